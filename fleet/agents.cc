#include "fleet/agents.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/directive_kind.h"
#include "controller/testing/job_fixtures.h"
#include "glog/logging.h"
#include "proto/falcon/v1/telemetry.grpc.pb.h"

namespace falcon::fleet {

void LatencyHistogram::Add(absl::Duration d) {
  const double us = std::max(1.0, absl::ToDoubleMicroseconds(d));
  const int i = std::min(kBuckets - 1, static_cast<int>(std::log(us) / std::log(1.05)));
  ++buckets_[static_cast<size_t>(i)];
}

void LatencyHistogram::Merge(const LatencyHistogram& o) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += o.buckets_[i];
}

uint64_t LatencyHistogram::count() const {
  uint64_t n = 0;
  for (uint64_t b : buckets_) n += b;
  return n;
}

absl::Duration LatencyHistogram::Quantile(double q) const {
  const uint64_t n = count();
  if (n == 0) return absl::ZeroDuration();
  const auto want = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n)));
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= std::max<uint64_t>(1, want)) {
      return absl::Microseconds(std::pow(1.05, static_cast<double>(i + 1)));
    }
  }
  return absl::Microseconds(std::pow(1.05, kBuckets));
}

void FleetReport::Merge(const FleetReport& o) {
  summaries += o.summaries;
  batches += o.batches;
  ops += o.ops;
  foreign += o.foreign;
  streams_lost += o.streams_lost;
  ack_rtt.Merge(o.ack_rtt);
  for (const auto& [key, t] : o.tasks) {
    auto [it, inserted] = tasks.emplace(key, t);
    if (!inserted) it->second.first_ns = std::min(it->second.first_ns, t.first_ns);
  }
  for (const auto& [key, d] : o.directives) {
    auto [it, inserted] = directives.emplace(key, d);
    if (inserted) continue;
    it->second.first_ns = std::min(it->second.first_ns, d.first_ns);
    it->second.last_ns = std::max(it->second.last_ns, d.last_ns);
    it->second.agents += d.agents;
  }
}

std::string FleetReport::Serialize() const {
  std::string out = absl::StrCat("counts ", summaries, " ", batches, " ", ops, " ", foreign, " ",
                                 streams_lost, "\n");
  LatencyHistogram h = ack_rtt;
  for (size_t i = 0; i < h.buckets().size(); ++i) {
    if (h.buckets()[i] > 0) absl::StrAppend(&out, "rtt ", i, " ", h.buckets()[i], "\n");
  }
  for (const auto& [key, t] : tasks) {
    absl::StrAppend(&out, "task ", key.first, " ", key.second, " ", t.kind, " ", t.first_ns, "\n");
  }
  for (const auto& [key, d] : directives) {
    absl::StrAppend(&out, "directive ", key.first, " ", key.second, " ", d.kind, " ", d.first_ns,
                    " ", d.last_ns, " ", d.agents, "\n");
  }
  return out;
}

absl::StatusOr<FleetReport> FleetReport::Parse(const std::string& text) {
  FleetReport r;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    bool ok = false;
    if (f[0] == "counts" && f.size() == 6) {
      ok = absl::SimpleAtoi(f[1], &r.summaries) && absl::SimpleAtoi(f[2], &r.batches) &&
           absl::SimpleAtoi(f[3], &r.ops) && absl::SimpleAtoi(f[4], &r.foreign) &&
           absl::SimpleAtoi(f[5], &r.streams_lost);
    } else if (f[0] == "rtt" && f.size() == 3) {
      size_t i = 0;
      uint64_t n = 0;
      ok = absl::SimpleAtoi(f[1], &i) && absl::SimpleAtoi(f[2], &n) &&
           i < r.ack_rtt.buckets().size();
      if (ok) r.ack_rtt.buckets()[i] += n;
    } else if (f[0] == "task" && f.size() == 5) {
      uint64_t id = 0;
      Task t;
      t.kind = f[3];
      ok = absl::SimpleAtoi(f[2], &id) && absl::SimpleAtoi(f[4], &t.first_ns);
      if (ok) r.tasks[{f[1], id}] = t;
    } else if (f[0] == "directive" && f.size() == 7) {
      uint64_t id = 0;
      Delivery d;
      d.kind = f[3];
      ok = absl::SimpleAtoi(f[2], &id) && absl::SimpleAtoi(f[4], &d.first_ns) &&
           absl::SimpleAtoi(f[5], &d.last_ns) && absl::SimpleAtoi(f[6], &d.agents);
      if (ok) r.directives[{f[1], id}] = d;
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("report line '", line, "'"));
  }
  return r;
}

namespace {
int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }
}  // namespace

// One simulated node agent. The driver thread calls Tick; the reader thread handles what the
// controller sends; delayed work runs on the process's timer thread.
class Agent {
 public:
  Agent(AgentProcess* process, JobModel* model, uint32_t node)
      : process_(process),
        model_(model),
        node_(node),
        ranks_(RanksOfNode(model->layout(), node)),
        op_seq_(ranks_.size(), 0) {}

  ~Agent() { Close(); }

  absl::Status Connect(absl::Duration timeout) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // Its own connection, as a node has.
    channel_ = grpc::CreateCustomChannel(process_->options().target,
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = falcon::v1::Telemetry::NewStub(channel_);
    context_ = std::make_unique<grpc::ClientContext>();
    stream_ = stub_->Connect(context_.get());
    falcon::v1::AgentMessage hello;
    falcon::v1::AgentHello* h = hello.mutable_hello();
    h->set_agent_id(NodeName(model_->layout(), node_));
    h->set_node(NodeName(model_->layout(), node_));
    h->set_version("fleet-sim");
    *h->add_jobs() = NodeRegistration(model_->layout(), node_);
    Write(hello);
    reader_ = std::thread([this] { ReadLoop(); });
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return hello_ || reader_done_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout) || !hello_) {
      return absl::UnavailableError(absl::StrCat(NodeName(model_->layout(), node_),
                                                 ": no ControllerHello: ", final_message_));
    }
    return absl::OkStatus();
  }

  void Close() {
    if (stream_ == nullptr) return;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
    }
    {
      absl::MutexLock lock(&write_mu_);
      stream_->WritesDone();
    }
    context_->TryCancel();
    if (reader_.joinable()) reader_.join();
    absl::MutexLock lock(&write_mu_);
    stream_.reset();
  }

  void Heartbeat() {
    falcon::v1::AgentMessage hb;
    hb.mutable_heartbeat()->set_agent_time_ns(NowNs());
    Write(hb);
  }

  // Produces the next iteration unless paused; applies directives that take effect at it.
  void Tick() {
    std::vector<falcon::v1::AgentMessage> acks;
    bool paused;
    int64_t k;
    std::set<uint32_t> profiled;
    {
      absl::MutexLock lock(&mu_);
      k = next_;
      for (auto it = pending_.begin(); it != pending_.end();) {
        const falcon::v1::Directive& d = *it;
        const bool resume = d.has_resume();
        if (!resume && d.effective_iteration() > k) {
          ++it;
          continue;
        }
        if (d.has_pause()) paused_ = true;
        if (resume) paused_ = false;
        if (d.has_profiling()) SetProfilingLocked(d.profiling());
        for (falcon::v1::AgentMessage& m :
             controller::testing::AppliedAcks(d, ranks_, std::max(d.effective_iteration(), k))) {
          acks.push_back(std::move(m));
        }
        it = pending_.erase(it);
      }
      paused = paused_;
      if (!paused) ++next_;
      if (profile_all_ || !profiled_.empty()) {
        if (profile_until_ != absl::InfinitePast() && absl::Now() > profile_until_) {
          profile_all_ = false;
          profiled_.clear();
        }
      }
      for (uint32_t r : ranks_) {
        if (profile_all_ || profiled_.count(r) > 0) profiled.insert(r);
      }
    }
    for (const auto& m : acks) Write(m);
    if (paused) {
      falcon::v1::AgentMessage hb;
      hb.mutable_heartbeat()->set_agent_time_ns(NowNs());
      Write(hb);
      return;
    }
    falcon::v1::AgentMessage m;
    falcon::v1::TelemetryBatch* b = m.mutable_batch();
    b->set_job(model_->layout().job);
    for (uint32_t r : ranks_) model_->Fill(r, k, b->add_iterations());
    // Every profiled rank's ops ride with the summaries, one RankOps each: one message per node
    // and iteration.
    uint64_t ops = 0;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (profiled.count(ranks_[i]) == 0) continue;
      falcon::v1::RankOps* ro = b->add_rank_ops();
      ro->set_rank(ranks_[i]);
      model_->AddOps(ranks_[i], k, &op_seq_[i], ro->mutable_ops());
      ops += static_cast<uint64_t>(ro->ops_size());
    }
    Send(&m);
    absl::MutexLock lock(&process_->report_mu());
    process_->report().summaries += ranks_.size();
    process_->report().batches += 1;
    process_->report().ops += ops;
  }

 private:
  void Send(falcon::v1::AgentMessage* m) {
    {
      absl::MutexLock lock(&mu_);
      m->mutable_batch()->set_sequence(++sequence_);
      sent_[sequence_] = absl::Now();
    }
    Write(*m);
  }

  bool Write(const falcon::v1::AgentMessage& m) {
    absl::MutexLock lock(&write_mu_);
    return stream_ != nullptr && stream_->Write(m);
  }

  void SetProfilingLocked(const falcon::v1::ProfilingControl& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!p.enabled()) {
      if (p.ranks_size() == 0) {
        profile_all_ = false;
        profiled_.clear();
      }
      for (uint32_t r : p.ranks()) profiled_.erase(r);
      return;
    }
    if (p.ranks_size() == 0) profile_all_ = true;
    for (uint32_t r : p.ranks()) profiled_.insert(r);
    profile_until_ = p.max_duration_ns() > 0 ? absl::Now() + absl::Nanoseconds(p.max_duration_ns())
                                             : absl::InfinitePast();
  }

  void ReadLoop() {
    falcon::v1::ControllerMessage msg;
    while (stream_->Read(&msg)) Handle(msg);
    grpc::Status status = stream_->Finish();
    bool lost;
    {
      absl::MutexLock lock(&mu_);
      final_message_ = status.error_message();
      reader_done_ = true;
      lost = hello_ && !closing_;
    }
    if (lost) {
      LOG(WARNING) << "stream lost job=" << model_->layout().job << " node=" << node_
                   << " code=" << status.error_code() << " error=\"" << status.error_message()
                   << "\" (simulated agents do not reconnect)";
      absl::MutexLock lock(&process_->report_mu());
      ++process_->report().streams_lost;
    }
  }

  void Handle(const falcon::v1::ControllerMessage& msg) {
    const std::string& job = model_->layout().job;
    if ((msg.has_directive() && msg.directive().job() != job) ||
        (msg.has_validation_task() && msg.validation_task().job() != job) ||
        (msg.has_profiling() && msg.profiling().job() != job)) {
      absl::MutexLock lock(&process_->report_mu());
      ++process_->report().foreign;
      return;
    }
    if (msg.has_hello()) {
      absl::MutexLock lock(&mu_);
      hello_ = true;
    }
    if (msg.has_batch_ack()) {
      std::vector<absl::Duration> rtts;
      const absl::Time now = absl::Now();
      {
        absl::MutexLock lock(&mu_);
        auto end = sent_.upper_bound(msg.batch_ack().sequence());
        for (auto it = sent_.begin(); it != end; ++it) rtts.push_back(now - it->second);
        sent_.erase(sent_.begin(), end);
      }
      if (msg.batch_ack().has_error()) {
        LOG(WARNING) << "batch rejected job=" << job << " node=" << node_
                     << " field=" << msg.batch_ack().error().field()
                     << " message=" << msg.batch_ack().error().message();
      }
      absl::MutexLock lock(&process_->report_mu());
      for (absl::Duration d : rtts) process_->report().ack_rtt.Add(d);
    }
    if (msg.has_profiling()) {
      absl::MutexLock lock(&mu_);
      SetProfilingLocked(msg.profiling());
    }
    if (msg.has_directive()) {
      const falcon::v1::Directive d = msg.directive();
      {
        absl::MutexLock lock(&process_->report_mu());
        const int64_t now = NowNs();
        auto [it, inserted] =
            process_->report().directives.try_emplace({d.job(), d.directive_id()});
        if (inserted) {
          it->second.kind = std::string(common::DirectiveKindName(d));
          it->second.first_ns = now;
        }
        it->second.last_ns = std::max(it->second.last_ns, now);
        ++it->second.agents;
      }
      // The shims receive it after the agent -> shim latency; it applies at its iteration.
      process_->Later(process_->options().directive_latency, [this, d] {
        absl::MutexLock lock(&mu_);
        pending_.push_back(d);
      });
    }
    if (msg.has_validation_task()) {
      const falcon::v1::ValidationTask t = msg.validation_task();
      {
        absl::MutexLock lock(&process_->report_mu());
        auto [it, inserted] = process_->report().tasks.try_emplace({t.job(), t.task_id()});
        if (inserted) {
          it->second.kind = t.has_gemm() ? "gemm" : "link";
          it->second.first_ns = NowNs();
        }
      }
      process_->Later(
          t.has_gemm() ? process_->options().gemm_latency : process_->options().link_latency,
          [this, t] { Answer(t); });
    }
  }

  void Answer(const falcon::v1::ValidationTask& t) {
    for (const falcon::v1::AgentMessage& out : controller::testing::ValidationAnswers(
             t, ranks_, [this](uint32_t r) { return model_->GemmNs(r); },
             [this](uint32_t src, uint32_t dst) { return model_->LinkNs(src, dst); })) {
      Write(out);
    }
  }

  AgentProcess* process_;
  JobModel* model_;
  const uint32_t node_;
  const std::vector<uint32_t> ranks_;
  std::vector<uint64_t> op_seq_;  // Driver thread only.

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<falcon::v1::Telemetry::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<falcon::v1::AgentMessage, falcon::v1::ControllerMessage>>
      stream_;
  std::thread reader_;
  absl::Mutex write_mu_;

  absl::Mutex mu_;
  bool hello_ ABSL_GUARDED_BY(mu_) = false;
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // Close() ends the stream, not the controller.
  std::string final_message_ ABSL_GUARDED_BY(mu_);
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, absl::Time> sent_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::Directive> pending_ ABSL_GUARDED_BY(mu_);
  bool profile_all_ ABSL_GUARDED_BY(mu_) = false;
  std::set<uint32_t> profiled_ ABSL_GUARDED_BY(mu_);
  absl::Time profile_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

AgentProcess::AgentProcess(const Scenario& scenario, size_t from, size_t to, AgentsOptions options)
    : options_(std::move(options)) {
  const auto nodes = scenario.Nodes();
  std::map<size_t, JobModel*> by_job;
  for (size_t i = from; i < std::min(to, nodes.size()); ++i) {
    const auto [job, node] = nodes[i];
    if (by_job.count(job) == 0) {
      models_.push_back(std::make_unique<JobModel>(
          scenario.jobs[job].layout, scenario.jobs[job].fault, options_.noise, options_.seed,
          absl::ToInt64Nanoseconds(options_.period)));
      models_.back()->set_peer_timing(options_.peer_timing);
      by_job[job] = models_.back().get();
    }
    agents_.push_back(std::make_unique<Agent>(this, by_job[job], node));
  }
  timer_ = std::thread([this] { TimerLoop(); });
}

AgentProcess::~AgentProcess() {
  {
    absl::MutexLock lock(&timer_mu_);
    timer_stop_ = true;
  }
  timer_.join();
  agents_.clear();
}

absl::Status AgentProcess::ConnectAll(absl::Duration timeout) {
  absl::Time heartbeat = absl::Now();
  for (size_t i = 0; i < agents_.size(); ++i) {
    if (absl::Status s = agents_[i]->Connect(timeout); !s.ok()) return s;
    // Agents already connected heartbeat while the others connect (the idle timeout).
    if (absl::Now() - heartbeat > absl::Seconds(5)) {
      for (size_t j = 0; j <= i; ++j) agents_[j]->Heartbeat();
      heartbeat = absl::Now();
    }
  }
  return absl::OkStatus();
}

void AgentProcess::Heartbeat() {
  for (auto& a : agents_) a->Heartbeat();
}

void AgentProcess::Run(const std::atomic<bool>& stop) {
  const absl::Time start = absl::Now();
  for (int64_t tick = 0; !stop; ++tick) {
    const absl::Time at = start + tick * options_.period;
    while (!stop && absl::Now() < at) {
      absl::SleepFor(std::min(absl::Milliseconds(20), at - absl::Now()));
    }
    if (stop) break;
    for (auto& a : agents_) a->Tick();
  }
  for (auto& a : agents_) a->Close();
}

FleetReport AgentProcess::Report() {
  absl::MutexLock lock(&report_mu_);
  return report_;
}

void AgentProcess::Later(absl::Duration delay, std::function<void()> fn) {
  absl::MutexLock lock(&timer_mu_);
  timers_.emplace(absl::Now() + delay, std::move(fn));
}

void AgentProcess::TimerLoop() {
  while (true) {
    std::vector<std::function<void()>> due;
    {
      absl::MutexLock lock(&timer_mu_);
      if (timer_stop_) return;
      const absl::Time now = absl::Now();
      while (!timers_.empty() && timers_.begin()->first <= now) {
        due.push_back(std::move(timers_.begin()->second));
        timers_.erase(timers_.begin());
      }
    }
    for (auto& fn : due) fn();
    absl::SleepFor(absl::Milliseconds(2));
  }
}

}  // namespace falcon::fleet
