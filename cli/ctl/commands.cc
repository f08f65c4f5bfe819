#include "cli/ctl/commands.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/ctl/format.h"
#include "cli/ctl/history_csv.h"
#include "cli/ctl/render.h"
#include "cli/ctl/settings_kv.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_tls.h"

namespace falcon::cli::ctl {
namespace {

using falcon::v1::Control;

// JSON text that never throws: a string that is not UTF-8 (proto3 strings are, but nothing here
// should abort on one) is written with U+FFFD in place of the bad bytes.
std::string Dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// gRPC's codes are Abseil's (the same numbers, the same names): DATA_LOSS, UNAUTHENTICATED, ...
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

class Runner {
 public:
  Runner(const Invocation& inv, Control::StubInterface& stub, std::ostream& out, std::ostream& err)
      : inv_(inv), stub_(stub), out_(out), err_(err) {}

  int Run() {
    const std::string& c = inv_.command;
    if (c == "jobs") return Jobs();
    if (c == "job") return Job();
    if (c == "events") return inv_.watch ? Watch() : Events();
    if (c == "event") return Event();
    if (c == "directives") return Directives();
    if (c == "audit") return Audit();
    if (c == "settings") return Settings();
    if (c == "validate") return Validate();
    if (c == "plan") return Plan();
    if (c == "export") return Export();
    err_ << "falconctl: unknown command '" << c << "'\n";
    return kExitUsage;
  }

 private:
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + inv_.timeout));
    return ctx;
  }

  // Prints the failure of `rpc` and returns its exit code. The controller answers most job-scoped
  // RPCs for an unknown `job` with INVALID_ARGUMENT (GetJob with NOT_FOUND): such a failure is
  // checked with GetJob and reported as not found (exit 1).
  int Fail(const std::string& rpc, const grpc::Status& s, const std::string& job = "") const {
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT && !job.empty()) {
      falcon::v1::GetJobRequest req;
      req.set_job(job);
      falcon::v1::Job ignored;
      grpc::Status found = stub_.GetJob(Context().get(), req, &ignored);
      if (found.error_code() == grpc::StatusCode::NOT_FOUND) {
        err_ << "falconctl " << inv_.command << ": unknown job '" << job << "' (" << rpc << ": "
             << CodeName(s.error_code()) << ": " << s.error_message() << ")\n";
        return kExitNotFound;
      }
    }
    const int code = ExitCodeFor(s.error_code());
    err_ << "falconctl " << inv_.command << ": ";
    switch (s.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
        err_ << "cannot reach the controller at " << inv_.controller << " (" << rpc
             << ": UNAVAILABLE: " << s.error_message() << ")";
        // A TLS controller closes a plaintext connection at once, as a foreign CA's is.
        if (inv_.plaintext) {
          err_ << "; if it serves TLS (the default), pass --tls_cert/--tls_key/--tls_ca "
                  "instead of --plaintext";
        } else {
          err_ << "; if it is up, check that --tls_ca is the CA that signed its certificate and "
                  "that your certificate is signed by the cluster CA";
        }
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        err_ << "no answer from the controller at " << inv_.controller << " within "
             << absl::FormatDuration(inv_.timeout) << " (" << rpc << ": DEADLINE_EXCEEDED)";
        break;
      default:
        err_ << rpc << ": " << CodeName(s.error_code()) << ": " << s.error_message();
    }
    err_ << "\n";
    return code;
  }

  void PrintJson(const nlohmann::json& j) const { out_ << Dump(j, 2) << "\n"; }

  // Runs a paged List RPC (control.proto) page after page, with the invocation's deadline for
  // each, and gathers every page into `*all`: no reply comes near the message size limit however
  // many items there are.
  template <typename Req, typename Resp, typename Items>
  grpc::Status AllPages(grpc::Status (Control::StubInterface::*rpc)(grpc::ClientContext*,
                                                                    const Req&, Resp*),
                        Req req, Items (Resp::*items)(), Resp* all) {
    all->Clear();
    for (;;) {
      Resp page;
      grpc::Status s = (stub_.*rpc)(Context().get(), req, &page);
      if (!s.ok()) return s;
      for (auto& item : *(page.*items)()) *((*all).*items)()->Add() = std::move(item);
      if (page.next_page_token().empty()) return grpc::Status::OK;
      req.set_page_token(page.next_page_token());
    }
  }

  grpc::Status ListAllJobs(falcon::v1::ListJobsResponse* resp) {
    return AllPages(&Control::StubInterface::ListJobs, falcon::v1::ListJobsRequest(),
                    &falcon::v1::ListJobsResponse::mutable_jobs, resp);
  }

  int Jobs() {
    falcon::v1::ListJobsResponse resp;
    grpc::Status s = ListAllJobs(&resp);
    if (!s.ok()) return Fail("ListJobs", s);
    if (inv_.json) {
      nlohmann::json jobs = nlohmann::json::array();
      for (const auto& j : resp.jobs()) jobs.push_back(ToJson(j));
      PrintJson({{"jobs", jobs}});
    } else {
      out_ << RenderJobs(resp);
    }
    return kExitOk;
  }

  int Job() {
    falcon::v1::GetJobRequest req;
    req.set_job(inv_.job);
    falcon::v1::Job job;
    grpc::Status s = stub_.GetJob(Context().get(), req, &job);
    if (!s.ok()) return Fail("GetJob", s);
    if (inv_.json) {
      PrintJson(ToJson(job));
    } else {
      out_ << RenderJob(job);
    }
    return kExitOk;
  }

  int Events() {
    falcon::v1::ListEventsRequest req;
    req.set_job(inv_.job);
    req.set_active_only(inv_.active);
    req.set_limit(inv_.limit);
    falcon::v1::ListEventsResponse resp;
    grpc::Status s = AllPages(&Control::StubInterface::ListEvents, req,
                              &falcon::v1::ListEventsResponse::mutable_events, &resp);
    if (!s.ok()) return Fail("ListEvents", s, req.job());
    if (inv_.json) {
      nlohmann::json events = nlohmann::json::array();
      for (const auto& e : resp.events()) events.push_back(ToJson(e));
      PrintJson({{"events", events}});
    } else {
      out_ << RenderEvents(resp);
    }
    return kExitOk;
  }

  // One line per transition (JSON Lines with --json) until the stream ends or --count lines.
  int Watch() {
    falcon::v1::WatchEventsRequest req;
    req.set_job(inv_.job);
    const uint64_t count = inv_.count;
    grpc::ClientContext ctx;  // No deadline: a watch runs until Ctrl-C or --count.
    auto reader = stub_.WatchEvents(&ctx, req);
    falcon::v1::Event e;
    uint64_t seen = 0;
    while ((count == 0 || seen < count) && reader->Read(&e)) {
      ++seen;
      if (inv_.json) {
        out_ << Dump(ToJson(e), -1) << "\n";
      } else {
        out_ << RenderWatchLine(e) << "\n";
      }
      out_.flush();
    }
    if (count != 0 && seen >= count) {
      ctx.TryCancel();
      reader->Finish();
      return kExitOk;
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return Fail("WatchEvents", s, req.job());
    return kExitOk;
  }

  int Event() {
    falcon::v1::GetEventRequest req;
    req.set_event_id(inv_.event_id);
    falcon::v1::Event e;
    grpc::Status s = stub_.GetEvent(Context().get(), req, &e);
    if (!s.ok()) return Fail("GetEvent", s);
    if (inv_.json) {
      PrintJson(ToJson(e));
    } else {
      out_ << RenderEvent(e);
    }
    return kExitOk;
  }

  int Directives() {
    falcon::v1::ListDirectivesRequest req;
    req.set_job(inv_.job);
    req.set_limit(inv_.limit);
    falcon::v1::ListDirectivesResponse resp;
    grpc::Status s = AllPages(&Control::StubInterface::ListDirectives, req,
                              &falcon::v1::ListDirectivesResponse::mutable_directives, &resp);
    if (!s.ok()) return Fail("ListDirectives", s, req.job());
    // World sizes for "acks x/y" of directives that target every rank.
    std::map<std::string, uint32_t> world;
    if (resp.directives_size() > 0) {
      falcon::v1::ListJobsResponse jobs;
      if (ListAllJobs(&jobs).ok()) {
        for (const auto& j : jobs.jobs()) world[j.job()] = j.world_size();
      }
    }
    if (inv_.json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& r : resp.directives()) {
        nlohmann::json j = ToJson(r);
        auto ws = world.find(r.directive().job());
        j["acks_summary"] = AckCount(r, ws == world.end() ? 0 : ws->second);
        arr.push_back(std::move(j));
      }
      PrintJson({{"directives", arr}});
    } else {
      out_ << RenderDirectives(resp, world);
    }
    return kExitOk;
  }

  int Audit() {
    falcon::v1::ListAuditRequest req;
    req.set_limit(inv_.limit);
    falcon::v1::ListAuditResponse resp;
    grpc::Status s = AllPages(&Control::StubInterface::ListAudit, req,
                              &falcon::v1::ListAuditResponse::mutable_records, &resp);
    if (!s.ok()) return Fail("ListAudit", s);
    if (inv_.json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& r : resp.records()) arr.push_back(ToJson(r));
      PrintJson({{"audit", arr}});
    } else {
      out_ << RenderAudit(resp);
    }
    return kExitOk;
  }

  int Settings() {
    const std::string& job = inv_.job;
    falcon::v1::Settings result;
    grpc::Status s;
    if (inv_.settings_set) {
      falcon::v1::SetSettingsRequest req;
      req.mutable_settings()->set_job(job);
      for (const std::string& kv : inv_.assignments) {
        absl::Status a = ApplySetting(kv, req.mutable_settings());
        if (!a.ok()) {
          err_ << "falconctl settings set: " << a.message() << "\n";
          return kExitUsage;
        }
      }
      s = stub_.SetSettings(Context().get(), req, &result);
      if (!s.ok()) return Fail("SetSettings", s, job);
    } else {
      falcon::v1::GetSettingsRequest req;
      req.set_job(job);
      s = stub_.GetSettings(Context().get(), req, &result);
      if (!s.ok()) return Fail("GetSettings", s, job);
    }
    if (inv_.json) {
      PrintJson(ToJson(result));
    } else {
      out_ << RenderSettings(result);
    }
    return kExitOk;
  }

  int Validate() {
    falcon::v1::ForceValidationRequest req;
    req.set_job(inv_.job);
    falcon::v1::ForceValidationResponse resp;
    grpc::Status s = stub_.ForceValidation(Context().get(), req, &resp);
    if (!s.ok()) return Fail("ForceValidation", s, req.job());
    if (inv_.json) {
      PrintJson({{"job", req.job()}, {"event_id", resp.event_id()}});
    } else {
      out_ << "validation started for job " << req.job() << ": event " << resp.event_id()
           << " (falconctl event " << resp.event_id() << " shows the verdict)\n";
    }
    return kExitOk;
  }

  int Plan() {
    const falcon::v1::DryRunPlanRequest& req = inv_.plan;
    falcon::v1::DryRunPlanResponse resp;
    grpc::Status s = stub_.DryRunPlan(Context().get(), req, &resp);
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      err_ << "falconctl plan: the controller at " << inv_.controller
           << " cannot plan mitigations yet (DryRunPlan: UNIMPLEMENTED: " << s.error_message()
           << ")\n";
      return kExitUnavailable;
    }
    if (!s.ok()) return Fail("DryRunPlan", s, req.job());
    if (inv_.json) {
      nlohmann::json j = ToJson(resp);
      j["job"] = req.job();
      PrintJson(j);
    } else {
      out_ << RenderPlan(req.job(), resp);
    }
    return kExitOk;
  }

  int Export() {
    falcon::v1::GetHistoryRequest req;
    req.set_job(inv_.job);
    req.set_from_iteration(inv_.from_iteration);
    req.set_max_points(inv_.max_points);
    falcon::v1::GetHistoryResponse resp;
    grpc::Status s = stub_.GetHistory(Context().get(), req, &resp);
    if (!s.ok()) return Fail("GetHistory", s, req.job());
    const std::string text =
        inv_.json ? Dump(HistoryJson(req.job(), resp), 2) + "\n" : HistoryCsv(resp);
    if (inv_.out.empty()) {
      out_ << text;
      return kExitOk;
    }
    const std::string& path = inv_.out;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) {
      err_ << "falconctl export: --out: cannot write '" << path << "'\n";
      return kExitUsage;
    }
    err_ << "wrote " << resp.points_size() << " points of job " << req.job() << " to " << path
         << "\n";
    return kExitOk;
  }

  const Invocation& inv_;
  Control::StubInterface& stub_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace

int ExitCodeFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return kExitUsage;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return kExitDenied;
    default:
      return kExitUnavailable;
  }
}

int RunCommand(const Invocation& inv, Control::StubInterface& stub, std::ostream& out,
               std::ostream& err) {
  return Runner(inv, stub, out, err).Run();
}

int Main(const std::vector<std::string>& args, const std::string& env_controller, std::ostream& out,
         std::ostream& err) {
  absl::StatusOr<Invocation> inv = ParseArgs(args, env_controller);
  if (!inv.ok()) {
    err << "falconctl: " << inv.status().message() << "\n";
    return kExitUsage;
  }
  if (inv->help) {
    out << inv->help_text;
    return kExitOk;
  }
  proto::TlsFiles tls{inv->tls_cert, inv->tls_key, inv->tls_ca};
  for (auto [value, env] :
       {std::make_pair(&tls.cert, "FALCON_TLS_CERT"), std::make_pair(&tls.key, "FALCON_TLS_KEY"),
        std::make_pair(&tls.ca, "FALCON_TLS_CA")}) {
    const char* v = std::getenv(env);
    if (value->empty() && !inv->plaintext && v != nullptr) *value = v;
  }
  if (absl::Status s = proto::CheckTlsSettings(tls, inv->plaintext, "--"); !s.ok()) {
    err << "falconctl: " << s.message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      proto::MakeChannelCredentials(tls);
  if (!credentials.ok()) {
    err << "falconctl: " << credentials.status().message() << "\n";
    return kExitUsage;
  }
  auto channel = grpc::CreateChannel(inv->controller, *credentials);
  auto stub = Control::NewStub(channel);
  return RunCommand(*inv, *stub, out, err);
}

}  // namespace falcon::cli::ctl
