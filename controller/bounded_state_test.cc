// Bounded state, in process (no gRPC, fake clock, in-memory store): ended jobs, old events and
// directives are purged from memory and store a retention period after they ended, in batches;
// the limits on ranks per job and jobs per agent refuse with RESOURCE_EXHAUSTED naming the limit;
// silent streams time out and their agent reconnects; the List RPCs page through many jobs,
// events and directives.
#include <prometheus/registry.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/series_value.h"
#include "controller/control_api.h"
#include "controller/controller.h"
#include "controller/metrics/metric_table.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/store/keys.h"
#include "controller/testing/fake_agent_channel.h"
#include "controller/testing/sim_agent.h"
#include "gtest/gtest.h"

namespace falcon::controller {
namespace {

using falcon::controller::v1::EventRecord;
using testing::FakeAgentChannel;
using testing::SimAgent;

// A job of `world` ranks of which this node registers `ranks` (0..ranks-1).
falcon::v1::JobRegistration Job(const std::string& name, uint32_t world = 1, uint32_t ranks = 1) {
  falcon::v1::JobRegistration reg;
  reg.set_job(name);
  reg.set_world_size(world);
  reg.set_epoch(1);
  for (uint32_t r = 0; r < ranks; ++r) {
    falcon::v1::RankInfo* info = reg.add_ranks();
    info->set_rank(r);
    info->set_node("node-0");
    info->set_local_rank(r);
    info->set_gpu(-1);
    info->set_pid(1000 + static_cast<int32_t>(r));
    info->set_dp_index(-1);
    info->set_pp_index(-1);
    info->set_tp_index(-1);
  }
  return reg;
}

std::vector<falcon::v1::JobRegistration> Jobs(const std::string& prefix, int from, int to) {
  std::vector<falcon::v1::JobRegistration> out;
  for (int i = from; i < to; ++i) out.push_back(Job(absl::StrCat(prefix, i)));
  return out;
}

class BoundedStateTest : public ::testing::Test {
 protected:
  BoundedStateTest() : kv_(store::ControllerStore::TableNames()), metrics_(registry_, "t") {}

  void Start(ControllerOptions options = ControllerOptions()) {
    c_.reset();
    auto c = Controller::Create(options, &kv_, &clock_, &metrics_);
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(*c);
  }

  // Rows of a store table.
  size_t Rows(const char* table) {
    size_t n = 0;
    EXPECT_TRUE(kv_.Scan(table, "",
                         [&](absl::string_view, absl::string_view) {
                           ++n;
                           return true;
                         })
                    .ok());
    return n;
  }
  void Put(const char* table, const std::string& key, const google::protobuf::Message& value) {
    store::KvWriteBatch b;
    b.Put(table, key, value.SerializeAsString());
    ASSERT_TRUE(kv_.Write(b).ok());
  }
  double Counter(const std::string& name, const std::map<std::string, std::string>& labels) {
    return common::testing::SeriesValue(registry_.Collect(), name, labels).value_or(0);
  }
  std::vector<std::string> JobNames() { return c_->registry().JobNames(); }

  common::FakeClock clock_;
  store::InMemoryKvStore kv_;
  prometheus::Registry registry_;
  metrics::ControllerMetrics metrics_;
  std::unique_ptr<Controller> c_;
};

// ---- Retention ---------------------------------------------------------------------------------

TEST_F(BoundedStateTest, EndedJobsArePurgedFromMemoryAndStoreAfterTheRetention) {
  ControllerOptions options;
  options.retention.retention = absl::Hours(1);
  Start(options);
  SimAgent agent("agent-0", "node-0", {0});
  ASSERT_TRUE(agent.Connect(*c_, Jobs("old-", 0, 10)).ok());
  falcon::v1::Settings settings;
  settings.set_job("old-3");
  settings.set_dry_run(true);
  ASSERT_TRUE(c_->SetSettings(settings).ok());
  // The agent now runs only "live": the ten others end after the job-end grace.
  agent.Disconnect(*c_);
  ASSERT_TRUE(agent.Connect(*c_, {Job("live")}).ok());
  clock_.Advance(options.job_end_grace + absl::Seconds(1));
  c_->Tick();
  ASSERT_EQ(c_->registry().Find("old-0")->job().state(), falcon::v1::JOB_STATE_ENDED);
  // Rows keyed by an ended job (and by the live one, which stay).
  for (const std::string job : {"old-5", "live"}) {
    falcon::v1::HistoryPoint point;
    point.set_iteration(7);
    Put(store::tables::kHistory, store::keys::HistoryKey(job, 7), point);
    falcon::v1::DirectiveRecord d;
    d.mutable_directive()->set_job(job);
    Put(store::tables::kDirectives, store::keys::DirectiveKey(job, 99), d);
    for (uint32_t position : {0u, 1u}) {
      falcon::v1::DirectiveAck ack;
      ack.set_job(job);
      ack.set_rank(position);
      Put(store::tables::kDirectiveAcks, store::keys::DirectiveAckKey(job, 99, position), ack);
    }
    store::KvWriteBatch b;
    b.Put(store::tables::kSampleRows, store::keys::SampleRowKey(job, 7, 0), std::string(12, '\0'));
    // Of an earlier version, not yet moved.
    b.Put(store::tables::kLegacySamples, store::keys::LegacySampleKey(job, 0, 7),
          std::string(8, '\0'));
    ASSERT_TRUE(kv_.Write(b).ok());
  }
  ASSERT_EQ(Rows(store::tables::kJobs), 11u);
  ASSERT_EQ(Rows(store::tables::kSettings), 1u);
  ASSERT_EQ(Rows(store::tables::kDirectiveAcks), 4u);

  clock_.Advance(absl::Minutes(59));
  c_->Tick();
  EXPECT_EQ(JobNames().size(), 11u) << "purged before the retention period";

  clock_.Advance(absl::Minutes(2));
  c_->Tick();
  EXPECT_EQ(JobNames(), std::vector<std::string>{"live"});
  EXPECT_EQ(Rows(store::tables::kJobs), 1u);
  EXPECT_EQ(Rows(store::tables::kSettings), 0u);
  EXPECT_EQ(Rows(store::tables::kHistory), 1u);
  EXPECT_EQ(Rows(store::tables::kDirectives), 1u);
  EXPECT_EQ(Rows(store::tables::kDirectiveAcks), 2u);
  EXPECT_EQ(Rows(store::tables::kSampleRows), 1u);
  EXPECT_EQ(Rows(store::tables::kLegacySamples), 1u);
  EXPECT_EQ(Counter(metrics::kRetentionPurged.name, {{"kind", "job"}}), 10);
  ControlApi api(c_.get());
  EXPECT_EQ(api.ListJobs({})->jobs_size(), 1);
  EXPECT_EQ(api.GetJob([] {
                 falcon::v1::GetJobRequest r;
                 r.set_job("old-3");
                 return r;
               }())
                .status()
                .code(),
            absl::StatusCode::kNotFound);

  // Nothing comes back after a restart.
  Start(options);
  EXPECT_EQ(JobNames(), std::vector<std::string>{"live"});
}

TEST_F(BoundedStateTest, AuditRecordsArePurgedAfterTheRetentionAndSurviveARestartUntilThen) {
  ControllerOptions options;
  options.retention.retention = absl::Hours(1);
  Start(options);
  auto record = [&](const std::string& identity) {
    falcon::v1::AuditRecord r;
    r.set_identity(identity);
    r.set_method("SetSettings");
    r.set_result("OK");
    return c_->RecordAudit(r);
  };
  EXPECT_EQ(record("old").audit_id(), 1u);
  clock_.Advance(absl::Minutes(40));
  EXPECT_EQ(record("new").audit_id(), 2u);
  EXPECT_EQ(Rows(store::tables::kAudit), 2u);
  Start(options);  // A restart loads the trail; ids go on.
  ASSERT_EQ(c_->audit().size(), 2u);
  clock_.Advance(absl::Minutes(30));  // "old" is 70 minutes old, "new" 30.
  c_->Tick();
  ASSERT_EQ(c_->audit().size(), 1u);
  EXPECT_EQ(c_->audit().ListBefore(0, 10)[0]->identity(), "new");
  EXPECT_EQ(Rows(store::tables::kAudit), 1u);
  EXPECT_EQ(Counter(metrics::kRetentionPurged.name, {{"kind", "audit"}}), 1);
  EXPECT_EQ(record("newer").audit_id(), 3u);
}

TEST_F(BoundedStateTest, RetentionPurgesInBatchesOneTickEach) {
  ControllerOptions options;
  options.retention.retention = absl::Minutes(10);
  options.retention.purge_batch = 4;
  Start(options);
  SimAgent agent("agent-0", "node-0", {0});
  ASSERT_TRUE(agent.Connect(*c_, Jobs("j", 0, 10)).ok());
  ASSERT_TRUE(agent.Connect(*c_, {}).ok());  // Lists none: all ten end after the grace.
  clock_.Advance(options.job_end_grace + absl::Seconds(1));
  c_->Tick();
  ASSERT_EQ(c_->registry().Find("j0")->job().state(), falcon::v1::JOB_STATE_ENDED);
  clock_.Advance(absl::Minutes(11));
  std::vector<size_t> left;
  for (int i = 0; i < 4; ++i) {
    c_->Tick();
    left.push_back(JobNames().size());
  }
  EXPECT_EQ(left, (std::vector<size_t>{6, 2, 0, 0}));
  EXPECT_EQ(Rows(store::tables::kJobs), 0u);
}

// Events and directives of a running job: recovered or closed events and final directives go a
// retention period after they ended; an active event, a directive of an active event and the
// job's newest epoch-bumping directive stay. (A directive pending for hours times out at the tick
// and then goes with the others.)
TEST_F(BoundedStateTest, OldEventsAndDirectivesOfARunningJobArePurged) {
  ControllerOptions options;
  options.retention.retention = absl::Hours(1);
  Start(options);
  {
    SimAgent agent("agent-0", "node-0", {0});
    ASSERT_TRUE(agent.Connect(*c_, {Job("run")}).ok());  // Stores the job record.
  }
  c_.reset();
  const int64_t now_ns = absl::ToUnixNanos(clock_.Now());
  const int64_t hour_ns = 3600'000'000'000;
  auto event = [&](uint64_t id, falcon::v1::EventState state, int64_t at_ns) {
    EventRecord r;
    r.mutable_event()->set_event_id(id);
    r.mutable_event()->set_job("run");
    r.mutable_event()->set_state(state);
    falcon::v1::StateTransition* t = r.mutable_event()->add_transitions();
    t->set_state(state);
    t->set_time_ns(at_ns);
    r.set_phase(falcon::controller::v1::PHASE_DONE);
    Put(store::tables::kEvents, store::keys::EventKey(id), r);
  };
  event(1, falcon::v1::EVENT_STATE_CLOSED, now_ns - 2 * hour_ns);     // Old: purged.
  event(2, falcon::v1::EVENT_STATE_RECOVERED, now_ns - hour_ns / 6);  // Recent: kept.
  event(3, falcon::v1::EVENT_STATE_LOCALIZED, now_ns - 3 * hour_ns);  // Active: kept.
  auto directive = [&](uint64_t id, uint64_t event_id, falcon::v1::DirectiveRecord::State state,
                       int64_t at_ns, uint64_t epoch, bool topology) {
    falcon::v1::DirectiveRecord r;
    r.mutable_directive()->set_directive_id(id);
    r.mutable_directive()->set_job("run");
    r.mutable_directive()->set_epoch(epoch);
    if (topology) {
      r.mutable_directive()->mutable_topology_change();
    } else {
      r.mutable_directive()->mutable_micro_batch_plan();
    }
    r.set_event_id(event_id);
    r.set_state(state);
    r.set_issued_time_ns(at_ns);
    r.set_last_delivery_time_ns(at_ns);
    Put(store::tables::kDirectives, store::keys::DirectiveKey("run", id), r);
    for (uint32_t position : {0u, 1u}) {
      falcon::v1::DirectiveAck ack;
      ack.set_directive_id(id);
      ack.set_job("run");
      ack.set_rank(position);
      Put(store::tables::kDirectiveAcks, store::keys::DirectiveAckKey("run", id, position), ack);
    }
  };
  using D = falcon::v1::DirectiveRecord;
  directive(1, 1, D::STATE_APPLIED, now_ns - 2 * hour_ns, 1, false);   // Purged.
  directive(2, 3, D::STATE_APPLIED, now_ns - 3 * hour_ns, 1, false);   // Its event is active.
  directive(3, 0, D::STATE_PENDING, now_ns - 3 * hour_ns, 1, false);   // Times out: purged.
  directive(4, 0, D::STATE_APPLIED, now_ns - 2 * hour_ns, 3, true);    // Newest S3: the fence.
  directive(5, 0, D::STATE_TIMED_OUT, now_ns - 2 * hour_ns, 2, true);  // An older S3: purged.
  directive(6, 2, D::STATE_APPLIED, now_ns - hour_ns / 6, 1, false);   // Recent.
  Start(options);
  ASSERT_EQ(Rows(store::tables::kEvents), 3u);
  ASSERT_EQ(Rows(store::tables::kDirectives), 6u);
  ASSERT_EQ(Rows(store::tables::kDirectiveAcks), 12u);
  SimAgent agent("agent-0", "node-0", {0});
  ASSERT_TRUE(agent.Connect(*c_, {Job("run")}).ok());

  c_->Tick();
  std::set<uint64_t> events, directives;
  ControlApi api(c_.get());
  const absl::StatusOr<falcon::v1::ListEventsResponse> listed_events = api.ListEvents({});
  const absl::StatusOr<falcon::v1::ListDirectivesResponse> listed = api.ListDirectives({});
  ASSERT_TRUE(listed_events.ok() && listed.ok());
  for (const auto& e : listed_events->events()) events.insert(e.event_id());
  for (const auto& d : listed->directives()) directives.insert(d.directive().directive_id());
  EXPECT_EQ(events, (std::set<uint64_t>{2, 3}));
  EXPECT_EQ(directives, (std::set<uint64_t>{2, 4, 6}));
  EXPECT_EQ(Rows(store::tables::kEvents), 2u);
  EXPECT_EQ(Rows(store::tables::kDirectives), 3u);
  EXPECT_EQ(Rows(store::tables::kDirectiveAcks), 6u) << "purged with their directives";
  EXPECT_EQ(JobNames(), std::vector<std::string>{"run"});
  EXPECT_EQ(Counter(metrics::kRetentionPurged.name, {{"kind", "event"}}), 1);
  EXPECT_EQ(Counter(metrics::kRetentionPurged.name, {{"kind", "directive"}}), 3);
}

// ---- Limits ------------------------------------------------------------------------------------

TEST_F(BoundedStateTest, AHelloWithAHugeJobIsRefusedNamingTheLimit) {
  Start();
  SimAgent agent("agent-0", "node-0", {0});
  // A 2^20-rank job (the largest world_size the wire allows).
  absl::Status s = agent.Connect(*c_, {Job("huge", 1u << 20, 1)});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  for (const char* part : {"max_ranks_per_job", "huge", "agent-0", "1048576"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " in " << s.message();
  }
  EXPECT_TRUE(JobNames().empty());
  EXPECT_EQ(Rows(store::tables::kJobs), 0u);
  EXPECT_EQ(Counter(metrics::kLimitRefusals.name, {{"limit", "max_ranks_per_job"}}), 1);
  // At the limit it is accepted.
  EXPECT_TRUE(agent.Connect(*c_, {Job("big", 16384, 1)}).ok());
}

TEST_F(BoundedStateTest, JobsPerAgentAreLimitedInHellosAndInBatchRegistrations) {
  ControllerOptions options;
  options.resource_limits.max_jobs_per_agent = 3;
  Start(options);
  SimAgent agent("agent-0", "node-0", {0});
  absl::Status s = agent.Connect(*c_, Jobs("j", 0, 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("max_jobs_per_agent"), std::string::npos) << s;
  EXPECT_NE(s.message().find("agent-0"), std::string::npos) << s;
  EXPECT_TRUE(JobNames().empty());

  ASSERT_TRUE(agent.Connect(*c_, Jobs("j", 0, 3)).ok());
  // A fourth job registered by a batch: the batch is rejected with a field error saying so.
  falcon::v1::TelemetryBatch batch;
  batch.set_job("j3");
  *batch.mutable_registration() = Job("j3");
  absl::StatusOr<falcon::v1::BatchAck> ack = agent.Send(*c_, batch);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_TRUE(ack->has_error());
  EXPECT_EQ(ack->error().field(), "batch.registration.job");
  EXPECT_NE(ack->error().message().find("RESOURCE_EXHAUSTED"), std::string::npos);
  EXPECT_NE(ack->error().message().find("max_jobs_per_agent"), std::string::npos);
  EXPECT_EQ(c_->registry().Find("j3"), nullptr);
  // Re-registering one of its own jobs is not a new job.
  batch.set_job("j1");
  *batch.mutable_registration() = Job("j1");
  ack = agent.Send(*c_, batch);
  ASSERT_TRUE(ack.ok());
  EXPECT_FALSE(ack->has_error()) << ack->error().message();
  // Ranks per job in a batch registration.
  batch.set_job("j2");
  *batch.mutable_registration() = Job("j2", 1u << 20, 1);
  ack = agent.Send(*c_, batch);
  ASSERT_TRUE(ack.ok());
  ASSERT_TRUE(ack->has_error());
  EXPECT_EQ(ack->error().field(), "batch.registration.world_size");
  EXPECT_NE(ack->error().message().find("max_ranks_per_job"), std::string::npos);
  EXPECT_EQ(c_->registry().Find("j2")->world_size(), 1u);
  EXPECT_EQ(Counter(metrics::kLimitRefusals.name, {{"limit", "max_jobs_per_agent"}}), 2);
  EXPECT_EQ(Counter(metrics::kLimitRefusals.name, {{"limit", "max_ranks_per_job"}}), 1);
}

// ---- Idle streams ------------------------------------------------------------------------------

TEST_F(BoundedStateTest, ASilentStreamTimesOut) {
  ControllerOptions options;
  options.stream_idle_timeout = absl::Seconds(60);
  Start(options);
  auto channel = std::make_shared<FakeAgentChannel>();
  AgentSession session;
  session.channel = channel;
  session.peer = "ipv4:127.0.0.1:4242";
  c_->OnAgentConnected(&session);  // Never says hello.
  clock_.Advance(absl::Seconds(59));
  c_->Tick();
  EXPECT_FALSE(channel->closed);
  clock_.Advance(absl::Seconds(1));
  c_->Tick();
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(channel->close_status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(channel->close_status.message().find("stream_idle_timeout"), std::string::npos);
  EXPECT_EQ(Counter(metrics::kStreamIdleTimeouts.name, {}), 1);
  c_->OnAgentDisconnected(&session);  // The adapter's own end of the stream: harmless.
}

TEST_F(BoundedStateTest, AStreamWithoutHeartbeatsTimesOutAndTheAgentReconnects) {
  ControllerOptions options;
  options.stream_idle_timeout = absl::Seconds(60);
  Start(options);
  auto channel = std::make_shared<FakeAgentChannel>();
  AgentSession session;
  session.channel = channel;
  c_->OnAgentConnected(&session);
  falcon::v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id("agent-0");
  hello.mutable_hello()->set_node("node-0");
  *hello.mutable_hello()->add_jobs() = Job("job");
  ASSERT_TRUE(c_->OnAgentMessage(&session, hello).ok());
  falcon::v1::AgentMessage beat;
  beat.mutable_heartbeat()->set_agent_time_ns(1);
  // Heartbeats every 5 s keep it open well past the timeout.
  for (int i = 0; i < 30; ++i) {
    clock_.Advance(absl::Seconds(5));
    ASSERT_TRUE(c_->OnAgentMessage(&session, beat).ok());
    c_->Tick();
  }
  EXPECT_FALSE(channel->closed);
  EXPECT_TRUE(c_->hub().IsConnected("agent-0"));
  // Then silence.
  clock_.Advance(absl::Seconds(61));
  c_->Tick();
  EXPECT_TRUE(channel->closed);
  EXPECT_FALSE(c_->hub().IsConnected("agent-0"));
  // What still arrives on the closed stream is refused.
  EXPECT_EQ(c_->OnAgentMessage(&session, beat).code(), absl::StatusCode::kUnavailable);
  c_->OnAgentDisconnected(&session);
  // A live agent reconnects normally.
  SimAgent agent("agent-0", "node-0", {0});
  ASSERT_TRUE(agent.Connect(*c_, {Job("job")}).ok());
  EXPECT_TRUE(c_->hub().IsConnected("agent-0"));
  EXPECT_EQ(c_->registry().Find("job")->job().state(), falcon::v1::JOB_STATE_TRACKING);
}

// ---- Paging ------------------------------------------------------------------------------------

TEST_F(BoundedStateTest, ListJobsPagesThroughManyJobs) {
  ControllerOptions options;
  options.resource_limits.max_jobs_per_agent = 1000;
  Start(options);
  std::vector<std::unique_ptr<SimAgent>> agents;
  for (int a = 0; a < 5; ++a) {
    agents.push_back(
        std::make_unique<SimAgent>(absl::StrCat("agent-", a), "node-0", std::vector<uint32_t>{0}));
    ASSERT_TRUE(agents.back()->Connect(*c_, Jobs(absl::StrCat("a", a, "-"), 0, 500)).ok());
  }
  ControlApi api(c_.get());
  for (uint32_t page_size : {0u, 7u, 5000u}) {
    falcon::v1::ListJobsRequest req;
    req.set_page_size(page_size);
    std::vector<std::string> names;
    int pages = 0;
    for (;;) {
      absl::StatusOr<falcon::v1::ListJobsResponse> r = api.ListJobs(req);
      ASSERT_TRUE(r.ok()) << r.status();
      ++pages;
      EXPECT_LE(r->jobs_size(), page_size == 0 || page_size > 1000 ? 1000 : int(page_size));
      for (const auto& j : r->jobs()) names.push_back(j.job());
      if (r->next_page_token().empty()) break;
      req.set_page_token(r->next_page_token());
    }
    EXPECT_EQ(names, JobNames()) << "page_size " << page_size;
    EXPECT_EQ(names.size(), 2500u);
    EXPECT_EQ(pages, page_size == 7 ? 358 : 3);
  }
  falcon::v1::ListJobsRequest bad;
  bad.set_page_token("not-a-token");
  EXPECT_EQ(api.ListJobs(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BoundedStateTest, PagesStayUnderTheByteBudget) {
  Start();
  SimAgent agent("agent-0", "node-0", {0});
  std::vector<falcon::v1::JobRegistration> big;
  for (int i = 0; i < 40; ++i) big.push_back(Job(absl::StrCat("big-", i), 4096, 4096));
  ASSERT_TRUE(agent.Connect(*c_, big).ok());
  ControlApi api(c_.get());
  falcon::v1::ListJobsRequest req;
  size_t total = 0, jobs = 0, pages = 0;
  for (;;) {
    absl::StatusOr<falcon::v1::ListJobsResponse> r = api.ListJobs(req);
    ASSERT_TRUE(r.ok()) << r.status();
    ++pages;
    EXPECT_LE(r->ByteSizeLong(), ControlApi::kMaxPageBytes + 1024);
    total += r->ByteSizeLong();
    jobs += r->jobs_size();
    if (r->next_page_token().empty()) break;
    req.set_page_token(r->next_page_token());
  }
  EXPECT_EQ(jobs, 40u);
  EXPECT_GT(total, size_t{4} << 20) << "one unpaged reply would pass gRPC's 4 MiB default";
  EXPECT_GT(pages, 2u);
}

TEST_F(BoundedStateTest, EventsAndDirectivesPageNewestFirstWithinTheLimit) {
  Start();
  {
    const absl::Status connected =
        SimAgent("agent-0", "node-0", {0}).Connect(*c_, {Job("a"), Job("b")});
    ASSERT_TRUE(connected.ok()) << connected;
  }
  c_.reset();
  for (uint64_t id = 1; id <= 25; ++id) {
    EventRecord r;
    r.mutable_event()->set_event_id(id);
    r.mutable_event()->set_job(id % 2 ? "a" : "b");
    r.mutable_event()->set_state(falcon::v1::EVENT_STATE_CLOSED);
    Put(store::tables::kEvents, store::keys::EventKey(id), r);
    falcon::v1::DirectiveRecord d;
    d.mutable_directive()->set_directive_id(id);
    d.mutable_directive()->set_job("a");
    d.set_state(falcon::v1::DirectiveRecord::STATE_APPLIED);
    Put(store::tables::kDirectives, store::keys::DirectiveKey("a", id), d);
  }
  Start();
  ControlApi api(c_.get());
  auto events = [&](falcon::v1::ListEventsRequest req, std::vector<int>* sizes) {
    std::vector<uint64_t> ids;
    for (;;) {
      absl::StatusOr<falcon::v1::ListEventsResponse> r = api.ListEvents(req);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      sizes->push_back(r->events_size());
      for (const auto& e : r->events()) ids.push_back(e.event_id());
      if (r->next_page_token().empty()) break;
      req.set_page_token(r->next_page_token());
    }
    return ids;
  };
  falcon::v1::ListEventsRequest req;
  req.set_page_size(10);
  std::vector<int> sizes;
  std::vector<uint64_t> ids = events(req, &sizes);
  EXPECT_EQ(sizes, (std::vector<int>{10, 10, 5}));
  ASSERT_EQ(ids.size(), 25u);
  EXPECT_EQ(ids.front(), 25u);
  EXPECT_EQ(ids.back(), 1u);
  req.set_limit(15);
  sizes.clear();
  ids = events(req, &sizes);
  EXPECT_EQ(sizes, (std::vector<int>{10, 5}));
  EXPECT_EQ(ids.back(), 11u);
  req.set_limit(0);
  req.set_job("b");
  sizes.clear();
  ids = events(req, &sizes);
  EXPECT_EQ(sizes, (std::vector<int>{10, 2}));
  // A token from another request (the job changed between pages) is refused.
  absl::StatusOr<falcon::v1::ListEventsResponse> first = api.ListEvents(req);
  ASSERT_FALSE(first->next_page_token().empty());
  req.set_job("a");
  req.set_page_token(first->next_page_token());
  absl::StatusOr<falcon::v1::ListEventsResponse> mixed = api.ListEvents(req);
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("page_token"), std::string::npos);

  falcon::v1::ListDirectivesRequest dreq;
  dreq.set_page_size(20);
  std::vector<uint64_t> dids;
  for (;;) {
    absl::StatusOr<falcon::v1::ListDirectivesResponse> r = api.ListDirectives(dreq);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const auto& d : r->directives()) dids.push_back(d.directive().directive_id());
    if (r->next_page_token().empty()) break;
    dreq.set_page_token(r->next_page_token());
  }
  ASSERT_EQ(dids.size(), 25u);
  EXPECT_TRUE(std::is_sorted(dids.rbegin(), dids.rend()));
}

}  // namespace
}  // namespace falcon::controller
