#include "tests/e2e/evidence.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/client_context.h"

namespace falcon::tests::e2e {

std::string FormatSeries(std::vector<falcon::v1::HistoryPoint> points) {
  std::sort(points.begin(), points.end(),
            [](const falcon::v1::HistoryPoint& a, const falcon::v1::HistoryPoint& b) {
              return a.iteration() < b.iteration();
            });
  std::string out = absl::StrCat("iteration-time series (", points.size(), " points):\n");
  for (size_t i = 0; i < points.size(); ++i) {
    const falcon::v1::HistoryPoint& p = points[i];
    absl::StrAppendFormat(&out, "%s%lld:%.3f", i % 10 == 0 ? "  " : " ",
                          static_cast<long long>(p.iteration()), p.iteration_time_ns() * 1e-9);
    if (p.plan_version() != 0) absl::StrAppend(&out, "p", p.plan_version());
    if (i % 10 == 9 || i + 1 == points.size()) out += "\n";
  }
  return out;
}

std::string FormatTimeline(const std::vector<falcon::v1::Event>& events) {
  if (events.empty()) return "event timeline: (no events)\n";
  std::string out = "event timeline:\n";
  for (const falcon::v1::Event& e : events) {
    std::vector<std::string> links;
    for (const auto& l : e.links()) links.push_back(absl::StrCat(l.src_rank(), "->", l.dst_rank()));
    absl::StrAppendFormat(
        &out,
        "  event %llu %s cause=%s ranks=[%s] links=[%s] onset=%lld alarm=%lld verdict=%lld "
        "recovery=%lld healthy_s=%.4f slow_s=%.4f\n",
        static_cast<unsigned long long>(e.event_id()), falcon::v1::EventState_Name(e.state()),
        falcon::v1::Cause_Name(e.cause()), absl::StrJoin(e.ranks(), ","), absl::StrJoin(links, ","),
        static_cast<long long>(e.onset_iteration()), static_cast<long long>(e.alarm_iteration()),
        static_cast<long long>(e.verdict_iteration()),
        static_cast<long long>(e.recovery_iteration()), e.healthy_iteration_time_ns() * 1e-9,
        e.slow_iteration_time_ns() * 1e-9);
    for (const falcon::v1::Action& a : e.actions()) {
      absl::StrAppendFormat(&out, "    action %s iteration=%lld directive=%llu%s: %s\n",
                            falcon::v1::Strategy_Name(a.strategy()),
                            static_cast<long long>(a.iteration()),
                            static_cast<unsigned long long>(a.directive_id()),
                            a.revert() ? " revert" : "", a.reason());
    }
  }
  return out;
}

std::string JobEvidence(falcon::v1::Control::Stub& stub, const std::string& job) {
  const auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(5); };
  std::string out;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    falcon::v1::GetHistoryRequest req;
    req.set_job(job);
    falcon::v1::GetHistoryResponse resp;
    const grpc::Status s = stub.GetHistory(&ctx, req, &resp);
    out += s.ok() ? FormatSeries({resp.points().begin(), resp.points().end()})
                  : absl::StrCat("GetHistory failed: ", s.error_message(), "\n");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    falcon::v1::ListEventsRequest req;
    req.set_job(job);
    falcon::v1::ListEventsResponse resp;
    const grpc::Status s = stub.ListEvents(&ctx, req, &resp);
    out += s.ok() ? FormatTimeline({resp.events().begin(), resp.events().end()})
                  : absl::StrCat("ListEvents failed: ", s.error_message(), "\n");
  }
  return out;
}

std::string FileTail(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  const std::string t = s.str();
  return t.size() <= n ? t : t.substr(t.size() - n);
}

}  // namespace falcon::tests::e2e
