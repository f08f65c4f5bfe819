// Mitigation end to end on a real training run, on the netns cluster with faults applied from
// outside the job by the kernel fault driver (kernel_cluster.h: a cgroup CPU quota on one rank's
// device thread), set up as falcon_demo sets up its runs: controller (mitigation on), one agent
// per node, the reference trainer (DP=4 x PP=2, 8 ranks, 4 nodes, 64 micro-batches).
//   - two compute fail-slows in different DP groups (rank 1, then rank 6 while the first is
//     mitigated) -> two events, each naming its rank, and one joint S2 plan that sheds
//     micro-batches from both slow groups;
//   - a compute fault that clears (its quota removed) -> the S2 plan is reverted (even split);
//   - the controller restarted while an S2 directive is pending -> applied exactly once (the
//     trainer's JSON log shows the plan version switch once; the record is APPLIED), and the
//     event comes back from RocksDB as it was (alarm, verdict), once, still mitigating 30
//     iterations later.
// One compute fault -> S2 and a DP link cap -> S3 are covered the same way by
// demo_report_compute_test and dp_link_test (falcon_demo's report). Figures are printed as
// "FIGURES ..." lines for the report. Wall-clock waits are deadlines only (generous: outside load
// slows the run down), never what a test measures. A failed assertion prints the job's
// iteration-time series, event timeline, directives and log tails. Needs root with CAP_NET_ADMIN
// (skipped elsewhere, failed under CI=true).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/e2e/evidence.h"
#include "tests/e2e/kernel_cluster.h"
#include "tests/harness/local_cluster.h"
#include "tests/testing/require_netns.h"

namespace falcon::tests::e2e {
namespace {

constexpr char kJob[] = "e2e-mitigate";
// 50 iterations after the demo's warm-up of 30 (detection off): the online detector first needs
// a settled warm-up (20 observations, longer on a noisy machine), and a fault that starts before
// it settles becomes part of the baseline (as kDetectionFaultFrom in detection_scenario.h).
constexpr int kFaultFrom = 80;

std::unique_ptr<falcon::v1::Control::Stub> Stub(harness::LocalCluster& c) {
  return c.NewControlStub();
}

template <typename Req, typename Resp, typename Call>
bool Rpc(harness::LocalCluster& c, Call call, const Req& req, Resp* resp) {
  auto stub = Stub(c);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return ((*stub).*call)(&ctx, req, resp).ok();
}

std::vector<falcon::v1::Event> Events(harness::LocalCluster& c) {
  falcon::v1::ListEventsRequest req;
  req.set_job(kJob);
  falcon::v1::ListEventsResponse resp;
  if (!Rpc(c, &falcon::v1::Control::Stub::ListEvents, req, &resp)) return {};
  return {resp.events().begin(), resp.events().end()};
}

std::vector<falcon::v1::DirectiveRecord> Directives(harness::LocalCluster& c) {
  falcon::v1::ListDirectivesRequest req;
  req.set_job(kJob);
  falcon::v1::ListDirectivesResponse resp;
  if (!Rpc(c, &falcon::v1::Control::Stub::ListDirectives, req, &resp)) return {};
  std::vector<falcon::v1::DirectiveRecord> out(resp.directives().begin(), resp.directives().end());
  std::reverse(out.begin(), out.end());  // Oldest first.
  return out;
}

falcon::v1::Job GetJob(harness::LocalCluster& c) {
  falcon::v1::GetJobRequest req;
  req.set_job(kJob);
  falcon::v1::Job job;
  Rpc(c, &falcon::v1::Control::Stub::GetJob, req, &job);
  return job;
}

// Job iteration times (s) of iterations [from, to).
std::vector<double> History(harness::LocalCluster& c, int64_t from, int64_t to) {
  falcon::v1::GetHistoryRequest req;
  req.set_job(kJob);
  req.set_from_iteration(from);
  falcon::v1::GetHistoryResponse resp;
  std::vector<double> out;
  if (!Rpc(c, &falcon::v1::Control::Stub::GetHistory, req, &resp)) return out;
  for (const auto& p : resp.points()) {
    if (p.iteration() >= from && p.iteration() < to) out.push_back(p.iteration_time_ns() * 1e-9);
  }
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

using falcon::tests::e2e::FileTail;

std::string Dump(harness::LocalCluster& c) {
  std::string out = falcon::tests::e2e::JobEvidence(*Stub(c), kJob);
  for (const auto& d : Directives(c)) {
    absl::StrAppend(&out, "directive ", d.directive().directive_id(), " ",
                    falcon::v1::DirectiveRecord::State_Name(d.state()), " eff ",
                    d.directive().effective_iteration(), " epoch ", d.directive().epoch(), ": ",
                    d.directive().reason(), " [", d.state_reason(), "]\n");
  }
  absl::StrAppend(&out, "\ntrainer log:\n", FileTail(c.log_path("trainer")), "\ncontroller log:\n",
                  FileTail(c.log_path("controller")));
  return out;
}

// Starts the cluster with `faults` applied by the kernel fault driver and `settings` over the
// demo's as the defaults for new jobs.
absl::StatusOr<std::unique_ptr<KernelCluster>> Start(
    const std::vector<deploy::demo::InjectedFault>& faults, const falcon::v1::Settings& settings) {
  KernelClusterOptions o;
  o.job = kJob;
  o.faults = faults;
  o.settings = settings;
  return KernelCluster::Start(std::move(o));
}

// Polls until `pred` holds (true) or `timeout` passes (false).
template <typename Pred>
bool Await(harness::LocalCluster& c, absl::Duration timeout, Pred pred) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred()) return true;
    if (!c.TrainerRunning()) return pred();
    absl::SleepFor(absl::Milliseconds(500));
  }
  return false;
}

// The first non-dry-run action of `strategy` with a directive, or nullptr.
const falcon::v1::Action* FindAction(const falcon::v1::Event& e, falcon::v1::Strategy s,
                                     bool revert = false) {
  for (const auto& a : e.actions()) {
    if (a.strategy() == s && a.directive_id() != 0 && a.revert() == revert) return &a;
  }
  return nullptr;
}

// A copy of directive `id`'s record, if listed.
std::optional<falcon::v1::DirectiveRecord> FindDirective(
    const std::vector<falcon::v1::DirectiveRecord>& v, uint64_t id) {
  for (const auto& d : v) {
    if (d.directive().directive_id() == id) return d;
  }
  return std::nullopt;
}

// The newest non-dry-run, non-revert action of `strategy` with a directive, or nullptr.
const falcon::v1::Action* LastAction(const falcon::v1::Event& e, falcon::v1::Strategy s) {
  for (int i = e.actions_size() - 1; i >= 0; --i) {
    const falcon::v1::Action& a = e.actions(i);
    if (a.strategy() == s && a.directive_id() != 0 && !a.revert() && !a.dry_run()) return &a;
  }
  return nullptr;
}

// The transition of `e` into `state`, or nullptr.
const falcon::v1::StateTransition* TransitionTo(const falcon::v1::Event& e,
                                                falcon::v1::EventState state) {
  for (const auto& t : e.transitions()) {
    if (t.state() == state) return &t;
  }
  return nullptr;
}

// The COMPUTE event whose culprits include `rank`, if any (an UNKNOWN verdict lists the ranks
// that slowed down, not culprits).
std::optional<falcon::v1::Event> EventNaming(const std::vector<falcon::v1::Event>& events,
                                             uint32_t rank) {
  for (const auto& e : events) {
    if (e.cause() == falcon::v1::CAUSE_COMPUTE &&
        std::find(e.ranks().begin(), e.ranks().end(), rank) != e.ranks().end()) {
      return e;
    }
  }
  return std::nullopt;
}

// The event's newest S2 directive once APPLIED (its record), else nullopt.
std::optional<falcon::v1::DirectiveRecord> AppliedS2(harness::LocalCluster& c,
                                                     const falcon::v1::Event& e) {
  const falcon::v1::Action* a = LastAction(e, falcon::v1::STRATEGY_S2_MICRO_BATCH);
  if (a == nullptr) return std::nullopt;
  auto d = FindDirective(Directives(c), a->directive_id());
  if (!d.has_value() || d->state() != falcon::v1::DirectiveRecord::STATE_APPLIED) {
    return std::nullopt;
  }
  return d;
}

// Two compute fail-slows in different DP groups (docs/algorithms.md#concurrent-events). Staggered
// onsets rather than one: with both at the same iteration the second slowdown arrives while the
// first event is being localized and joins it (rule 1 there), so the test would only see one
// verdict naming two ranks: no second event, no plan joining two events. With the second fault
// starting once the first is mitigated (S2 applied, the job steady under it), the test exercises
// what concurrency adds: a second event opens beside the MITIGATING one instead of being absorbed
// by it, its verdict names the new rank and not the first event's culprit, and its S2 plan
// accounts for both culprits (a plan for the new culprit alone would hand the first group its
// micro-batches back, and the iteration time would not improve). Rank layout of the reference
// trainer: dp = rank % DP, pp = rank / DP (read back from the Control API below), so rank 1 is
// (dp 1, stage 0) and rank 6 is (dp 2, stage 1): different DP groups and different stages.
TEST(MitigationE2eTest, TwoComputeFailSlowsInDifferentDpGroupsGetOneJointS2Plan) {
  FALCON_REQUIRE_NETNS();
  const absl::Time start = absl::Now();
  constexpr uint32_t kFirst = 1;
  constexpr uint32_t kSecond = 6;
  // The single-fault case applies S2 about 10 iterations after the onset; the second fault leaves
  // the first ~100 iterations to be localized, mitigated and measured under load.
  constexpr int kSecondFrom = kFaultFrom + 110;
  // x2, not the single-fault cases' x1.5: the first plan must be in force when the second fault
  // begins, and at x1.5 the job slowed x1.17 and S2 gained about 5% (0.298 -> 0.284 s
  // predicted), within the drift of a loaded 2-core machine: CI saw the plan measured 0.292 s
  // against slow 0.298 s, judged no help and reverted, and the second fault then hid behind the
  // first (no second event).
  constexpr double kSlowdown = 2.0;
  falcon::v1::Settings settings;
  settings.set_s3_cost_seconds(1e5);  // Judge S2 on its own.
  auto cluster = Start(
      {ComputeFault(kFirst, kSlowdown, kFaultFrom), ComputeFault(kSecond, kSlowdown, kSecondFrom)},
      settings);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  harness::LocalCluster& c = (*cluster)->cluster();

  // 1. The first fault: an event naming rank 1 whose S2 plan is applied before the second fault.
  falcon::v1::Event first;
  std::optional<falcon::v1::DirectiveRecord> first_s2;
  ASSERT_TRUE(Await(c, absl::Seconds(240),
                    [&] {
                      std::optional<falcon::v1::Event> e = EventNaming(Events(c), kFirst);
                      if (!e.has_value()) return false;
                      first = *e;
                      first_s2 = AppliedS2(c, first);
                      return first_s2.has_value();
                    }))
      << "no S2 applied for rank " << kFirst << ":\n"
      << Dump(c);
  const int64_t eff1 = first_s2->directive().effective_iteration();
  ASSERT_LT(eff1 + 20, kSecondFrom)
      << "the first fault's S2 came too late to be in force before the second fault\n"
      << Dump(c);
  // Judged and kept (a plan is judged within 15 iterations of its effective one: 5, or 15 when
  // the first 5 are within the noise of slow), else the second fault hides behind the first.
  ASSERT_TRUE(Await(c, absl::Seconds(90), [&] { return GetJob(c).last_iteration() >= eff1 + 17; }))
      << Dump(c);
  ASSERT_EQ(GetJob(c).plan_version(), first_s2->directive().plan_version())
      << "the first fault's S2 plan is no longer in force\n"
      << Dump(c);

  // 2. The second fault: an event naming rank 6 whose (joint) S2 plan is applied, then 25
  // iterations under it (after 2 to settle), as in the single-fault case.
  falcon::v1::Event second;
  std::optional<falcon::v1::DirectiveRecord> joint;
  ASSERT_TRUE(Await(c, absl::Seconds(300),
                    [&] {
                      std::optional<falcon::v1::Event> e = EventNaming(Events(c), kSecond);
                      if (!e.has_value()) return false;
                      second = *e;
                      joint = AppliedS2(c, second);
                      return joint.has_value();
                    }))
      << "no S2 applied for rank " << kSecond << ":\n"
      << Dump(c);
  const int64_t eff2 = joint->directive().effective_iteration();
  ASSERT_TRUE(Await(c, absl::Seconds(90), [&] { return GetJob(c).last_iteration() >= eff2 + 27; }))
      << Dump(c);
  const std::vector<falcon::v1::Event> events = Events(c);
  first = *EventNaming(events, kFirst);
  second = *EventNaming(events, kSecond);
  const falcon::v1::Job job = GetJob(c);

  const double healthy = first.healthy_iteration_time_ns() * 1e-9;
  const double slow1 = Median(History(c, first.onset_iteration() + 2, first.alarm_iteration()));
  const double mitigated1 = Median(History(c, eff1 + 2, kSecondFrom));
  const double slow2 = Median(History(c, second.onset_iteration() + 2, second.alarm_iteration()));
  const double mitigated2 = Median(History(c, eff2 + 2, eff2 + 27));
  // The single-fault case's measure: the share of the slowdown in force when the plan was made
  // (both faults, the first plan) that the joint plan took back.
  const double recovered = (slow2 - mitigated2) / (slow2 - healthy);
  const auto& m1 = first_s2->directive().micro_batch_plan().micro_batches();
  const auto& m2 = joint->directive().micro_batch_plan().micro_batches();
  std::printf(
      "FIGURES concurrent: healthy_s=%.4f slow1_s=%.4f mitigated1_s=%.4f slow2_s=%.4f "
      "mitigated2_s=%.4f ratio=%.3f recovered=%.3f | event %llu rank=%u onset=%lld alarm=%lld "
      "verdict=%lld from_profiling=%d pause_ms=%.0f s2_iteration=%lld m=[%s] | event %llu "
      "rank=%u onset=%lld alarm=%lld verdict=%lld from_profiling=%d pause_ms=%.0f "
      "s2_iteration=%lld m=[%s] reason=\"%s\" wall_s=%.1f\n",
      healthy, slow1, mitigated1, slow2, mitigated2, mitigated2 / healthy, recovered,
      (unsigned long long)first.event_id(), kFirst, (long long)first.onset_iteration(),
      (long long)first.alarm_iteration(), (long long)first.verdict_iteration(),
      first.localized_from_profiling() ? 1 : 0, first.validation_pause_ns() * 1e-6, (long long)eff1,
      absl::StrJoin(m1, ",").c_str(), (unsigned long long)second.event_id(), kSecond,
      (long long)second.onset_iteration(), (long long)second.alarm_iteration(),
      (long long)second.verdict_iteration(), second.localized_from_profiling() ? 1 : 0,
      second.validation_pause_ns() * 1e-6, (long long)eff2, absl::StrJoin(m2, ",").c_str(),
      joint->directive().reason().c_str(), absl::ToDoubleSeconds(absl::Now() - start));
  std::fflush(stdout);

  // Two events, one per fault, each a COMPUTE verdict naming its own rank; nothing else named a
  // culprit or mitigated (an UNKNOWN event from the shared machine's noise that took no action
  // beyond S1 is an unexplained slowdown, not a false alarm: deploy/demo/report.h).
  int culprit_events = 0;
  for (const falcon::v1::Event& e : events) {
    if (e.cause() != falcon::v1::CAUSE_UNKNOWN) {
      ++culprit_events;
      continue;
    }
    for (const auto& a : e.actions()) {
      EXPECT_EQ(a.strategy(), falcon::v1::STRATEGY_S1_IGNORE)
          << "event " << e.event_id() << " named no culprit but mitigated\n"
          << Dump(c);
    }
  }
  EXPECT_EQ(culprit_events, 2) << Dump(c);
  EXPECT_NE(first.event_id(), second.event_id()) << Dump(c);
  for (const falcon::v1::Event* e : {&first, &second}) {
    EXPECT_EQ(e->cause(), falcon::v1::CAUSE_COMPUTE) << Dump(c);
    EXPECT_NE(TransitionTo(*e, falcon::v1::EVENT_STATE_LOCALIZED), nullptr) << Dump(c);
    EXPECT_EQ(e->links_size(), 0) << Dump(c);
    // Still mitigating: neither fault cleared, and neither event absorbed the other.
    EXPECT_EQ(e->state(), falcon::v1::EVENT_STATE_MITIGATING) << Dump(c);
  }
  EXPECT_EQ(std::vector<uint32_t>(first.ranks().begin(), first.ranks().end()),
            std::vector<uint32_t>{kFirst})
      << Dump(c);
  EXPECT_EQ(std::vector<uint32_t>(second.ranks().begin(), second.ranks().end()),
            std::vector<uint32_t>{kSecond})
      << Dump(c);
  // The second event opened beside the first one while that one was mitigated. (Its verdict says
  // "known culprits of other active events left out" only when its validation measured rank 1:
  // under the first plan rank 1's group computes fewer micro-batches, so profiling need not
  // suspect it, and the GEMM then runs on the second event's suspects and peers alone.)
  const falcon::v1::StateTransition* first_mitigating =
      TransitionTo(first, falcon::v1::EVENT_STATE_MITIGATING);
  ASSERT_NE(first_mitigating, nullptr) << Dump(c);
  EXPECT_LT(first_mitigating->iteration(), second.alarm_iteration()) << Dump(c);
  EXPECT_GE(second.onset_iteration(), eff1) << Dump(c);

  // One S2 plan in force, the second event's, shedding micro-batches from both slow DP groups.
  int dp1 = -1, dp2 = -1;
  for (const auto& r : job.ranks()) {
    if (r.rank() == kFirst) dp1 = r.dp_index();
    if (r.rank() == kSecond) dp2 = r.dp_index();
  }
  ASSERT_GE(dp1, 0) << job.DebugString();
  ASSERT_GE(dp2, 0) << job.DebugString();
  ASSERT_NE(dp1, dp2) << "the two faults must sit in different DP groups\n" << job.DebugString();
  EXPECT_EQ(job.plan_version(), joint->directive().plan_version()) << Dump(c);
  EXPECT_EQ(std::vector<uint32_t>(job.micro_batches().begin(), job.micro_batches().end()),
            std::vector<uint32_t>(m2.begin(), m2.end()))
      << Dump(c);
  ASSERT_EQ(m2.size(), 4u) << Dump(c);
  uint32_t healthy_min = UINT32_MAX;
  for (int d = 0; d < static_cast<int>(m2.size()); ++d) {
    if (d != dp1 && d != dp2) healthy_min = std::min(healthy_min, m2[d]);
  }
  EXPECT_LT(m2[dp1], healthy_min) << "DP group " << dp1 << " (rank " << kFirst << ") not shed\n"
                                  << Dump(c);
  EXPECT_LT(m2[dp2], healthy_min) << "DP group " << dp2 << " (rank " << kSecond << ") not shed\n"
                                  << Dump(c);

  // The second fault slowed the job clearly beyond the first plan's level, and the joint plan took
  // back a clear share of it. Its bound: with two groups at x2 the best split of 64 micro-batches
  // in multiples of PP ([22, 10, 10, 22]) leaves the slow groups 20 micro-batch times and the
  // healthy 22, against 32-36 for the new culprit's group under the first plan (16-18
  // micro-batches): ~0.6 of the compute. 0.3, as in the single-fault case, fails a plan that
  // covers only one culprit (the other group back at 16+ micro-batches x2: ~0). "Clearly
  // beyond": 10%. The emulated device slows by the quota's factor exactly, and the job's messages
  // and all-reduce, a fifth of its iteration, are not slowed (at x1.5: measured x1.18 over the
  // first plan's level).
  EXPECT_GT(slow2, mitigated1 * 1.1) << Dump(c);
  EXPECT_GE(recovered, 0.3) << "slowdown recovered " << recovered << "\n" << Dump(c);
}

TEST(MitigationE2eTest, ClearedFaultRevertsTheS2Plan) {
  FALCON_REQUIRE_NETNS();
  const absl::Time start = absl::Now();
  falcon::v1::Settings settings;
  settings.set_s3_cost_seconds(1e5);
  auto cluster = Start({ComputeFault(5, 1.5, kFaultFrom, kFaultFrom + 70)}, settings);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  harness::LocalCluster& c = (*cluster)->cluster();
  falcon::v1::Event event;
  ASSERT_TRUE(Await(c, absl::Seconds(240),
                    [&] {
                      for (const auto& e : Events(c)) {
                        if (e.state() == falcon::v1::EVENT_STATE_RECOVERED &&
                            FindAction(e, falcon::v1::STRATEGY_S2_MICRO_BATCH, /*revert=*/true) !=
                                nullptr) {
                          event = e;
                          return true;
                        }
                      }
                      return false;
                    }))
      << "no S2 revert after recovery:\n"
      << Dump(c);
  const falcon::v1::Action& revert =
      *FindAction(event, falcon::v1::STRATEGY_S2_MICRO_BATCH, /*revert=*/true);
  ASSERT_TRUE(Await(c, absl::Seconds(60), [&] {
    const auto d = FindDirective(Directives(c), revert.directive_id());
    return d.has_value() && d->state() == falcon::v1::DirectiveRecord::STATE_APPLIED;
  })) << Dump(c);
  const auto d = FindDirective(Directives(c), revert.directive_id());
  EXPECT_EQ(d->directive().reverts_directive_id(),
            FindAction(event, falcon::v1::STRATEGY_S2_MICRO_BATCH)->directive_id());
  const auto& m = d->directive().micro_batch_plan().micro_batches();
  EXPECT_EQ(std::vector<uint32_t>(m.begin(), m.end()), (std::vector<uint32_t>{16, 16, 16, 16}))
      << Dump(c);
  falcon::v1::Job job = GetJob(c);
  EXPECT_EQ(std::vector<uint32_t>(job.micro_batches().begin(), job.micro_batches().end()),
            (std::vector<uint32_t>{16, 16, 16, 16}))
      << Dump(c);
  std::printf("FIGURES clear: recovery=%lld revert_iteration=%lld wall_s=%.1f\n",
              (long long)event.recovery_iteration(), (long long)revert.iteration(),
              absl::ToDoubleSeconds(absl::Now() - start));
  std::fflush(stdout);
}

// Counts trainer JSON log lines where the plan version changes to `version`.
int PlanSwitches(const std::string& path, int64_t version) {
  std::ifstream in(path);
  std::string line;
  int switches = 0;
  int64_t last = -1;
  const std::string key = "\"plan_version\":";
  while (std::getline(in, line)) {
    size_t at = line.find(key);
    if (at == std::string::npos || line.find("\"rank\":0") == std::string::npos) continue;
    const int64_t v = std::atoll(line.c_str() + at + key.size());
    if (v == version && last != version) ++switches;
    last = v;
  }
  return switches;
}

TEST(MitigationE2eTest, ControllerRestartWithPendingDirectiveAppliesItOnce) {
  FALCON_REQUIRE_NETNS();
  const absl::Time start = absl::Now();
  falcon::v1::Settings settings;
  settings.set_s3_cost_seconds(1e5);
  auto cluster = Start({ComputeFault(5, 1.5, kFaultFrom)}, settings);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  harness::LocalCluster& c = (*cluster)->cluster();
  // As soon as the S2 directive exists (PENDING: its effective iteration lies ahead), kill the
  // controller and start it again on the same data directory.
  uint64_t id = 0;
  ASSERT_TRUE(Await(c, absl::Seconds(240), [&] {
    for (const auto& d : Directives(c)) {
      if (d.directive().has_micro_batch_plan()) {
        id = d.directive().directive_id();
        return true;
      }
    }
    return false;
  })) << Dump(c);
  // The event as stored before the restart: it must come back as it was, once.
  const std::optional<falcon::v1::Event> named = EventNaming(Events(c), 5);
  ASSERT_TRUE(named.has_value()) << Dump(c);
  const falcon::v1::Event event = *named;
  ASSERT_EQ(event.state(), falcon::v1::EVENT_STATE_MITIGATING) << Dump(c);
  ASSERT_TRUE(c.RestartController(/*kill=*/true).ok());
  std::optional<falcon::v1::DirectiveRecord> rec;
  ASSERT_TRUE(Await(c, absl::Seconds(120), [&] {
    rec = FindDirective(Directives(c), id);
    return rec.has_value() && rec->state() == falcon::v1::DirectiveRecord::STATE_APPLIED;
  })) << Dump(c);
  const int64_t version = rec->directive().plan_version();
  // Let the job run on under the plan (the fault never ends), then count: exactly one switch to
  // the plan, no second S2. 30 iterations: long enough for the rebuilt event's compute probe to
  // judge the culprit under the plan (CI once saw the rebuilt event recover on an outside
  // speed-up with the fault on, revert S2, and a second event blame the same rank).
  const int64_t at = GetJob(c).last_iteration();
  Await(c, absl::Seconds(60), [&] { return GetJob(c).last_iteration() >= at + 30; });
  int plans = 0;
  for (const auto& d : Directives(c)) plans += d.directive().has_micro_batch_plan() ? 1 : 0;
  const int switches = PlanSwitches(c.trainer_json_log(), version);
  std::printf(
      "FIGURES restart: directive=%llu deliveries=%u plan_version=%lld switches=%d "
      "plans=%d wall_s=%.1f\n",
      (unsigned long long)id, rec->deliveries(), (long long)version, switches, plans,
      absl::ToDoubleSeconds(absl::Now() - start));
  std::fflush(stdout);
  EXPECT_EQ(switches, 1) << FileTail(c.trainer_json_log());
  EXPECT_EQ(plans, 1) << Dump(c);
  // Every target acked once for this id (acks are per rank: 8).
  EXPECT_EQ(rec->acks_size(), 8) << rec->DebugString();
  // The event survived the restart (stored in RocksDB) with its alarm and verdict, once, and is
  // still mitigating: no event lost, none duplicated, no second event for the same fault (other
  // events, outside load on the shared machine, name no culprit: plans == 1 above).
  int naming = 0;
  falcon::v1::Event e;
  for (const falcon::v1::Event& x : Events(c)) {
    if (EventNaming({x}, 5).has_value()) {
      ++naming;
      e = x;
    }
  }
  ASSERT_EQ(naming, 1) << Dump(c);
  EXPECT_EQ(e.event_id(), event.event_id()) << Dump(c);
  EXPECT_EQ(e.alarm_iteration(), event.alarm_iteration()) << Dump(c);
  EXPECT_EQ(e.verdict_iteration(), event.verdict_iteration()) << Dump(c);
  EXPECT_EQ(e.cause(), event.cause()) << Dump(c);
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_MITIGATING) << Dump(c);
  int transitions_to_localized = 0;
  for (const auto& t : e.transitions()) {
    transitions_to_localized += t.state() == falcon::v1::EVENT_STATE_LOCALIZED ? 1 : 0;
  }
  EXPECT_EQ(transitions_to_localized, 1) << Dump(c);
}

}  // namespace
}  // namespace falcon::tests::e2e
