#include "controller/detection/localizer.h"

#include <glog/logging.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/detect/validation_plan.h"
#include "common/directive_kind.h"
#include "controller/detection/node_nic.h"
#include "controller/metrics/metric_table.h"

namespace falcon::controller::detection {

using falcon::controller::v1::EventRecord;
using falcon::controller::v1::PendingTask;
using falcon::controller::v1::Phase;

absl::Status LocalizationOptions::Validate() const {
  if (profiling_iterations < 1 || profiling_iterations > 1000) {
    return absl::InvalidArgumentError("profiling_iterations: must be in [1, 1000]");
  }
  if (pause_lead_iterations < 0 || pause_lead_iterations > 1000) {
    return absl::InvalidArgumentError("pause_lead_iterations: must be in [0, 1000]");
  }
  if (profiling_timeout <= absl::ZeroDuration() || pause_ack_timeout <= absl::ZeroDuration() ||
      task_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("profiling/pause/task timeouts: must be > 0");
  }
  if (pause_max_duration <= absl::ZeroDuration() || pause_max_duration > absl::Seconds(600)) {
    return absl::InvalidArgumentError("pause_max_duration: must be in (0, 600 s]");
  }
  if (gemm_size < 1 || gemm_size > 65536) {
    return absl::InvalidArgumentError("gemm_size: must be in [1, 65536]");
  }
  if (repeats < 1 || repeats > 100)
    return absl::InvalidArgumentError("repeats: must be in [1, 100]");
  if (link_bytes < 1 || link_bytes > (1ull << 30)) {
    return absl::InvalidArgumentError("link_bytes: must be in [1, 2^30]");
  }
  if (!(verdict.gemm_slow_ratio > 0 && verdict.gemm_slow_ratio <= 10) ||
      !(verdict.link_slow_ratio > 0 && verdict.link_slow_ratio <= 10)) {
    return absl::InvalidArgumentError("verdict slow ratios: must be in (0, 10]");
  }
  return absl::OkStatus();
}

Localizer::Localizer(LocalizationOptions options, const common::Clock* clock,
                     core::IdAllocator* ids, core::AgentHub* hub, core::DirectiveIssuer* directives,
                     EventManager* events, registry::JobRegistry* registry,
                     const settings::SettingsManager* settings, common::ErrorCounter* errors,
                     ProgressFn progress, ProgressFn newest_reported)
    : options_(options),
      clock_(clock),
      ids_(ids),
      hub_(hub),
      directives_(directives),
      events_(events),
      registry_(registry),
      settings_(settings),
      errors_(errors != nullptr ? errors : &no_errors_),
      progress_(std::move(progress)),
      newest_reported_(std::move(newest_reported)) {}

CommProfiler* Localizer::Profiler(const std::string& job) {
  auto it = profilers_.find(job);
  return it == profilers_.end() ? nullptr : it->second.get();
}

namespace {

// Each task's round (analysis AssignRounds) over the nodes (agents) of its ranks, 0 for a covered
// task (not run); a rank of no known agent counts as a node of its own.
std::vector<uint32_t> RoundsOf(const std::vector<falcon::controller::v1::PendingTask>& tasks,
                               const registry::JobEntry& job) {
  std::vector<std::vector<std::string>> footprints;
  std::vector<size_t> run;  // Index in `tasks` of each footprint: covered tasks are not run.
  footprints.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const falcon::controller::v1::PendingTask& t = tasks[i];
    if (t.covered()) continue;
    run.push_back(i);
    std::vector<std::string>& nodes = footprints.emplace_back();
    for (uint32_t r : t.task().ranks()) {
      const std::string* agent = job.AgentOfRank(r);
      nodes.push_back(agent != nullptr ? *agent : absl::StrCat("rank/", r));
    }
  }
  const std::vector<uint32_t> assigned = analysis::detect::AssignRounds(footprints);
  std::vector<uint32_t> rounds(tasks.size(), 0);  // 0 for covered tasks.
  for (size_t k = 0; k < run.size(); ++k) rounds[run[k]] = assigned[k];
  return rounds;
}

// A communicator to judge the links of `c` with: of the same kind and size, sharing no rank with
// it, neither a suspect nor already a reference; one on other nodes first (its passes then share
// c's rounds), then the lowest id. 0: none.
uint64_t ReferenceComm(const registry::JobEntry& job, const registry::CommInfo& c,
                       const std::set<uint64_t>& suspects, const std::set<uint64_t>& taken) {
  const std::set<std::string> nodes(c.member_nodes.begin(), c.member_nodes.end());
  uint64_t best = 0;
  bool best_disjoint = false;
  for (const auto& [id, other] : job.comms()) {
    if (suspects.count(id) > 0 || taken.count(id) > 0) continue;
    if (other.comm.kind() != c.comm.kind() ||
        other.comm.member_ranks_size() != c.comm.member_ranks_size()) {
      continue;
    }
    bool shares_rank = false;
    for (uint32_t r : other.comm.member_ranks()) shares_rank |= c.HasMember(r);
    if (shares_rank) continue;
    bool disjoint = true;
    for (const std::string& n : other.member_nodes) disjoint &= n.empty() || nodes.count(n) == 0;
    if (best == 0 || (disjoint && !best_disjoint) || (disjoint == best_disjoint && id < best)) {
      best = id;
      best_disjoint = disjoint;
    }
  }
  return best;
}

// Each registered rank's node (docs/algorithms.md#node-nic-faults).
RankNodes NodesOfRanks(const registry::JobEntry& job) {
  RankNodes out;
  for (uint32_t r : job.ranks()) {
    if (const falcon::v1::RankInfo* info = job.FindRank(r)) out[r] = info->node();
  }
  return out;
}

// The nodes of a group of more than two ranks whose members sit on exactly two known nodes (a DP
// group over two nodes: a slow NIC on either drags most of its links); empty otherwise.
std::set<std::string> TwoNodesOfGroup(const registry::CommInfo& c) {
  std::set<std::string> nodes;
  if (c.comm.member_ranks_size() <= 2) return nodes;
  for (const std::string& n : c.member_nodes) {
    if (n.empty()) return {};
    nodes.insert(n);
  }
  if (nodes.size() != 2) nodes.clear();
  return nodes;
}

// The two nodes of a pair whose ranks sit on two different known nodes (a pipeline pair across
// nodes: its links all cross both nodes' NICs); empty otherwise.
std::set<std::string> TwoNodesOfPair(const registry::CommInfo& c) {
  if (c.comm.member_ranks_size() != 2 || c.member_nodes.size() != 2) return {};
  const std::string& a = c.member_nodes[0];
  const std::string& b = c.member_nodes[1];
  if (a.empty() || b.empty() || a == b) return {};
  return {a, b};
}

// Communicators to validate beside `suspects` so that a slow NIC can be told from the path between
// two nodes (docs/algorithms.md#node-nic-faults): for each suspect that measures two nodes only
// against each other, a group on two nodes (TwoNodesOfGroup) or a pair across two nodes
// (TwoNodesOfPair), each member's smallest other communicator that reaches a third node (lowest
// id among equals), unless one such is a suspect already. In suspect order, each once.
std::vector<uint64_t> ThirdNodeComms(const registry::JobEntry& job,
                                     const std::vector<uint64_t>& suspects) {
  std::set<uint64_t> taken(suspects.begin(), suspects.end());
  std::vector<uint64_t> out;
  for (uint64_t id : suspects) {
    const registry::CommInfo* c = job.FindComm(id);
    if (c == nullptr) continue;
    std::set<std::string> nodes = TwoNodesOfGroup(*c);
    if (nodes.empty()) nodes = TwoNodesOfPair(*c);
    if (nodes.empty()) continue;
    for (uint32_t r : c->comm.member_ranks()) {
      const registry::CommInfo* best = nullptr;
      bool measured = false;
      for (const registry::CommInfo* o : job.CommsOfRank(r)) {  // By id.
        bool third = false;
        for (const std::string& n : o->member_nodes) third |= !n.empty() && nodes.count(n) == 0;
        if (!third) continue;
        measured |= taken.count(o->comm.comm_id()) > 0;
        if (best == nullptr || o->comm.member_ranks_size() < best->comm.member_ranks_size()) {
          best = o;
        }
      }
      if (measured || best == nullptr) continue;
      taken.insert(best->comm.comm_id());
      out.push_back(best->comm.comm_id());
    }
  }
  return out;
}

// "kind=gemm rank=0,1,2 round=1" or "kind=link_pass comm=7 pass=0 link=0->1,2->3 round=2".
std::string TaskFields(const falcon::v1::ValidationTask& t) {
  if (t.has_link_pass()) {
    return absl::StrCat("kind=link_pass comm=", t.link_pass().comm_id(),
                        " pass=", t.link_pass().pass_index(), " link=",
                        absl::StrJoin(t.link_pass().links(), ",",
                                      [](std::string* o, const falcon::v1::Link& l) {
                                        absl::StrAppend(o, l.src_rank(), "->", l.dst_rank());
                                      }),
                        " round=", t.round());
  }
  return absl::StrCat("kind=gemm rank=", absl::StrJoin(t.ranks(), ","), " round=", t.round());
}

}  // namespace

void Localizer::SetJobState(const std::string& job, falcon::v1::JobState state,
                            core::UnitOfWork* uow) {
  registry::JobEntry* entry = registry_->Find(job);
  if (entry == nullptr || entry->job().state() == state) return;
  entry->set_state(state);
  registry_->Persist(*entry, &uow->txn());
}

void Localizer::SendProfiling(const registry::JobEntry& job, bool enabled,
                              const std::string& only_agent) {
  falcon::v1::ControllerMessage msg;
  falcon::v1::ProfilingControl* p = msg.mutable_profiling();
  p->set_job(job.name());
  p->set_enabled(enabled);
  // Twice the profiling window: the shims stop by themselves if the controller goes away.
  p->set_max_duration_ns(enabled ? absl::ToInt64Nanoseconds(2 * options_.profiling_timeout) : 0);
  for (const std::string& agent : job.AgentIds()) {
    if (only_agent.empty() || agent == only_agent) hub_->Send(agent, msg);
  }
}

void Localizer::Start(EventRecord* event, core::UnitOfWork* uow) { BeginProfiling(event, uow); }

void Localizer::BeginProfiling(EventRecord* event, core::UnitOfWork* uow) {
  const std::string job = event->event().job();
  event->set_phase(falcon::controller::v1::PHASE_PROFILING);
  event->set_phase_start_iteration(progress_(job));
  event->set_phase_deadline_ns(absl::ToUnixNanos(clock_->Now() + options_.profiling_timeout));
  events_->Persist(*event, uow);
  auto& profiler = profilers_[job];
  if (profiler == nullptr) profiler = std::make_unique<CommProfiler>();
  profiler->Start(newest_reported_(job) + 1);
  SetJobState(job, falcon::v1::JOB_STATE_PROFILING, uow);
  {
    const std::string line =
        absl::StrCat("event profiling job=", job, " event=", event->event().event_id(),
                     " iterations=", options_.profiling_iterations,
                     " timeout=", absl::FormatDuration(options_.profiling_timeout));
    uow->AfterCommit([line]() { LOG(INFO) << line; });
  }
  if (const registry::JobEntry* entry = registry_->Find(job)) {
    registry::JobEntry snapshot = *entry;
    uow->AfterCommit([this, snapshot]() { SendProfiling(snapshot, true, ""); });
  }
}

void Localizer::StartForced(EventRecord* event, core::UnitOfWork* uow) {
  const registry::JobEntry* job = registry_->Find(event->event().job());
  if (job == nullptr) return;
  std::vector<uint64_t> comms;
  for (const auto& [id, c] : job->comms()) comms.push_back(id);
  std::sort(comms.begin(), comms.end());
  PlanAndPause(event, job->ranks(), comms, /*run_gemm=*/true, "forced: every rank and communicator",
               uow);
}

void Localizer::Resume(EventRecord* event, core::UnitOfWork* uow) {
  const Phase phase = event->phase();
  if (phase == falcon::controller::v1::PHASE_PAUSING ||
      phase == falcon::controller::v1::PHASE_VALIDATING) {
    Release(event, "controller restarted during validation", uow);
  }
  if (phase == falcon::controller::v1::PHASE_PROFILING ||
      phase == falcon::controller::v1::PHASE_PAUSING ||
      phase == falcon::controller::v1::PHASE_VALIDATING) {
    event->clear_tasks();
    event->clear_results();
    event->set_pause_directive_id(0);
    if (event->forced()) {
      StartForced(event, uow);
    } else {
      BeginProfiling(event, uow);
    }
  }
}

void Localizer::OnJobIteration(const std::string& job, int64_t iteration, int64_t iteration_time_ns,
                               core::UnitOfWork* uow) {
  CommProfiler* profiler = Profiler(job);
  EventRecord* event = events_->Localizing(job);
  if (profiler == nullptr || event == nullptr ||
      event->phase() != falcon::controller::v1::PHASE_PROFILING) {
    return;
  }
  analysis::detect::BlameOptions blame;
  blame.slow_ratio = settings_->Effective(job).suspicious_group_ratio;
  const registry::JobEntry* entry = registry_->Find(job);
  profiler->CompleteIteration(iteration, iteration_time_ns,
                              entry != nullptr ? entry->ranks().size() : 0, blame);
  // profiling_iterations judged, or twice that many gone by since the first the profile can
  // judge (iterations some rank's summary missed are not judged).
  const int64_t before_first =
      std::max(event->phase_start_iteration(), profiler->first_iteration() - 1);
  if (profiler->judged() >= options_.profiling_iterations ||
      iteration - before_first >= 2 * options_.profiling_iterations) {
    FinishProfiling(event, uow);
  }
}

void Localizer::FinishProfiling(EventRecord* event, core::UnitOfWork* uow) {
  const std::string job_name = event->event().job();
  const registry::JobEntry* job = registry_->Find(job_name);
  if (job == nullptr) return;
  ProfileResult profile;
  if (CommProfiler* p = Profiler(job_name)) {
    profile = p->Result();
    p->Stop();
  }
  {
    registry::JobEntry snapshot = *job;
    uow->AfterCommit([this, snapshot]() { SendProfiling(snapshot, false, ""); });
  }

  // Profiling alone names the culprit when it is unambiguous: no pause at all
  // (docs/algorithms.md#localization-from-profiling).
  if (std::optional<Verdict> v = ProfilingVerdict(*event, profile); v.has_value()) {
    event->mutable_event()->set_localized_from_profiling(true);
    event->mutable_event()->set_evidence(falcon::v1::EVIDENCE_PROFILING);
    const std::string line =
        absl::StrCat("event localized from profiling job=", job_name,
                     " event=", event->event().event_id(), " rank=", absl::StrJoin(v->ranks, ","),
                     " iterations=", profile.iterations, " why=\"", v->reason, "\"");
    uow->AfterCommit([line]() { LOG(INFO) << line; });
    StageVerdict(event, *std::move(v), "", uow);
    return;
  }
  // Per-peer transfer timing (NCCL's profiler plugin) names a slow link with no pause when it is
  // unambiguous; otherwise its ranking goes with the validation plan
  // (docs/algorithms.md#peer-timing).
  std::string peer_ranking;
  if (std::optional<Verdict> v = PeerTimingVerdict(*event, profile, &peer_ranking); v.has_value()) {
    event->mutable_event()->set_localized_from_profiling(true);
    event->mutable_event()->set_evidence(falcon::v1::EVIDENCE_PEER_TIMING);
    std::vector<std::string> links;
    for (const falcon::v1::Link& l : v->links) {
      links.push_back(absl::StrCat(l.src_rank(), "->", l.dst_rank()));
    }
    const std::string line = absl::StrCat(
        "event localized from peer timing job=", job_name, " event=", event->event().event_id(),
        v->nodes.empty() ? "" : absl::StrCat(" node=", absl::StrJoin(v->nodes, ",")),
        " link=", absl::StrJoin(links, ","), " iterations=", profile.iterations, " why=\"",
        v->reason, "\"");
    uow->AfterCommit([line]() { LOG(INFO) << line; });
    StageVerdict(event, *std::move(v), "", uow);
    return;
  }
  // Ranks whose own series slowed down are suspects, unless most ranks slowed down (synchronous
  // training: everyone waits for the culprit, and only profiling can tell).
  std::set<uint32_t> ranks;
  std::vector<uint32_t> rank_level;
  for (const std::string& s : event->onset_series()) {
    if (int64_t r = SeriesRank(s); r >= 0) rank_level.push_back(static_cast<uint32_t>(r));
  }
  std::string why;
  if (!rank_level.empty() && 2 * rank_level.size() < job->ranks().size()) {
    ranks.insert(rank_level.begin(), rank_level.end());
    why = absl::StrCat("slow series on rank(s) ", absl::StrJoin(rank_level, ","));
  }
  std::set<uint64_t> comms;
  for (const ProfileResult::Comm& c : profile.suspicious) {
    comms.insert(c.comm_id);
    absl::StrAppend(&why, why.empty() ? "" : "; ",
                    absl::StrFormat("comm %d at %.2fx its comparable median", c.comm_id, c.ratio));
  }
  for (const ProfileResult::Rank& b : profile.blamed) {
    ranks.insert(b.rank);
    if (b.cause == analysis::detect::BlameCause::kCommunication && b.comm_id != 0)
      comms.insert(b.comm_id);
    absl::StrAppend(&why, why.empty() ? "" : "; ",
                    absl::StrFormat("rank %d blamed (%s, %.2fx)", b.rank,
                                    analysis::detect::BlameCauseName(b.cause), b.ratio));
  }
  // Profiling that blamed compute only needs no link pass (GEMM settles it), unless no compute
  // blame could explain the job's slowdown (docs/algorithms.md#verdict): a slow NIC stalls ranks
  // in ways profiling can take for compute (blames of x1.15-1.19 under x1.85-2.0 slowdowns, on
  // ranks of other nodes than the NIC's), and a GEMM alone would then find nothing, so every
  // communicator is tested as well. Profiling that saw nothing leaves the links of the suspect
  // ranks to test as well.
  const bool compute_explains =
      std::any_of(profile.blamed.begin(), profile.blamed.end(), [&](const ProfileResult::Rank& b) {
        return b.cause == analysis::detect::BlameCause::kCompute &&
               CanExplain(b.ratio, event->event().slowdown_ratio());
      });
  if (comms.empty() && !profile.blamed.empty() && !compute_explains) {
    absl::StrAppendFormat(&why,
                          "; no compute blame explains the job's x%.2f: every communicator is "
                          "tested too",
                          event->event().slowdown_ratio());
    for (const auto& [id, c] : job->comms()) comms.insert(id);
  }
  if (comms.empty() && profile.blamed.empty()) {
    for (uint32_t r : ranks) {
      for (const registry::CommInfo* c : job->CommsOfRank(r)) comms.insert(c->comm.comm_id());
    }
  }
  if (ranks.empty() && comms.empty()) {
    ranks.insert(job->ranks().begin(), job->ranks().end());
    for (const auto& [id, c] : job->comms()) comms.insert(id);
    why = "no suspect from profiling: every rank and communicator";
  }
  // Profiling that blamed communication alone compared every rank's compute already: no GEMM.
  const bool communication_only =
      !profile.blamed.empty() && !comms.empty() &&
      std::all_of(profile.blamed.begin(), profile.blamed.end(), [](const ProfileResult::Rank& b) {
        return b.cause == analysis::detect::BlameCause::kCommunication;
      });
  if (communication_only) absl::StrAppend(&why, "; no rank computes slowly: no GEMM");
  if (!peer_ranking.empty()) absl::StrAppend(&why, "; ", peer_ranking);
  absl::StrAppend(&why, absl::StrFormat(" (%d iterations profiled)", profile.iterations));
  PlanAndPause(event, std::vector<uint32_t>(ranks.begin(), ranks.end()),
               std::vector<uint64_t>(comms.begin(), comms.end()), !communication_only, why, uow);
}

void Localizer::PlanAndPause(EventRecord* event, std::vector<uint32_t> suspect_ranks,
                             std::vector<uint64_t> suspect_comms, bool run_gemm,
                             const std::string& why, core::UnitOfWork* uow) {
  const std::string job_name = event->event().job();
  const registry::JobEntry* job = registry_->Find(job_name);
  if (job == nullptr) return;
  // A DP communicator over two nodes cannot tell a node's slow NIC from the path between the two:
  // its members are measured against a third node too (docs/algorithms.md#node-nic-faults).
  const std::vector<uint64_t> third_node = ThirdNodeComms(*job, suspect_comms);
  suspect_comms.insert(suspect_comms.end(), third_node.begin(), third_node.end());
  event->clear_suspect_ranks();
  for (uint32_t r : suspect_ranks) event->add_suspect_ranks(r);
  event->clear_suspect_comms();
  for (uint64_t c : suspect_comms) event->add_suspect_comms(c);
  event->clear_tasks();
  event->clear_results();

  // The tasks before they get ids: ranks that take part, ranks expected to answer, the test.
  std::vector<PendingTask> drafts;
  auto new_task = [&](std::vector<uint32_t> ranks, std::vector<uint32_t> expected) {
    PendingTask& t = drafts.emplace_back();
    falcon::v1::ValidationTask* task = t.mutable_task();
    task->set_job(job_name);
    task->set_epoch(directives_->Epoch(*job));
    for (uint32_t r : ranks) task->add_ranks(r);
    for (uint32_t r : expected) t.add_expected_ranks(r);
    return task;
  };

  // GEMM on the suspects and their peers in the suspect comms. Without a suspect comm (compute
  // suspected), or with a lone rank, on every rank: the median of a few ranks, some of them slow,
  // would understate the culprit's slowdown (the ranks run it at the same time, so it costs no
  // more pause). Not when profiling blamed communication alone (its compute times compared
  // already).
  std::set<uint32_t> gemm(suspect_ranks.begin(), suspect_ranks.end());
  for (uint64_t id : suspect_comms) {
    if (const registry::CommInfo* c = job->FindComm(id)) {
      gemm.insert(c->comm.member_ranks().begin(), c->comm.member_ranks().end());
    }
  }
  if (gemm.size() < 2 || suspect_comms.empty())
    gemm.insert(job->ranks().begin(), job->ranks().end());
  if (run_gemm && !gemm.empty()) {
    std::vector<uint32_t> g(gemm.begin(), gemm.end());
    falcon::v1::GemmTest* test = new_task(g, g)->mutable_gemm();
    test->set_m(options_.gemm_size);
    test->set_n(options_.gemm_size);
    test->set_k(options_.gemm_size);
    test->set_repeats(options_.repeats);
  }
  const RankNodes rank_nodes = NodesOfRanks(*job);
  // Communicators over the same ranks (a job's world group and its barrier group, say) have the
  // same links: the first one's passes measure them for both.
  std::set<std::vector<uint32_t>> planned_members;
  // Directed links a pass planned so far measures: a later pass of only such links is covered
  // (not run; the verdict takes their measurements from the earlier passes).
  std::set<std::pair<int64_t, int64_t>> measured_links;
  // The passes of comm `id`, judged with the links of comm `compare_with` (0: its own).
  auto plan_comm = [&](uint64_t id, const registry::CommInfo& c, uint64_t compare_with) {
    std::vector<int64_t> ring(c.comm.member_ranks().begin(), c.comm.member_ranks().end());
    std::vector<analysis::detect::PassPlan> plans;
    if (auto p = analysis::detect::PlanRingPasses(ring); p.ok()) plans.push_back(*p);
    if (options_.tree_passes && ring.size() > 2) {
      if (auto p = analysis::detect::PlanTreePasses(analysis::detect::HeapTree(ring)); p.ok())
        plans.push_back(*p);
    }
    // A ring of 2 already has both directions (0 -> 1 -> 0).
    if (options_.both_directions && ring.size() > 2) {
      const size_t planned = plans.size();
      for (size_t i = 0; i < planned; ++i) plans.push_back(analysis::detect::Reversed(plans[i]));
    }
    // No pass crosses two nodes both ways: the acks of one link would queue behind the other's
    // data on a path slow one way, and slow the reverse link too.
    for (analysis::detect::PassPlan& p : plans) {
      p = analysis::detect::SeparateOpposingLinks(p, [&rank_nodes](int64_t r) {
        const auto it = rank_nodes.find(static_cast<uint32_t>(r));
        return it != rank_nodes.end() ? it->second : std::string();
      });
    }
    uint32_t pass_index = 0;
    for (const analysis::detect::PassPlan& plan : plans) {
      for (const std::vector<analysis::detect::LinkPair>& pass : plan.passes) {
        std::set<uint32_t> ranks, senders;
        for (const analysis::detect::LinkPair& l : pass) {
          ranks.insert(static_cast<uint32_t>(l.src));
          ranks.insert(static_cast<uint32_t>(l.dst));
          senders.insert(static_cast<uint32_t>(l.src));
        }
        falcon::v1::LinkPassTest* test =
            new_task(std::vector<uint32_t>(ranks.begin(), ranks.end()),
                     std::vector<uint32_t>(senders.begin(), senders.end()))
                ->mutable_link_pass();
        drafts.back().set_compare_with_comm(compare_with);
        bool covered = true;
        for (const analysis::detect::LinkPair& l : pass) {
          covered = !measured_links.insert({l.src, l.dst}).second && covered;
        }
        if (covered) {
          drafts.back().set_covered(true);
          drafts.back().set_finished(true);
        }
        test->set_pass_index(pass_index++);
        test->set_bytes(options_.link_bytes);
        test->set_repeats(options_.repeats);
        test->set_comm_id(id);
        for (const analysis::detect::LinkPair& l : pass) {
          falcon::v1::Link* link = test->add_links();
          link->set_src_rank(static_cast<uint32_t>(l.src));
          link->set_dst_rank(static_cast<uint32_t>(l.dst));
        }
      }
    }
  };
  const std::set<uint64_t> suspects(suspect_comms.begin(), suspect_comms.end());
  std::set<uint64_t> references;
  std::vector<std::string> reference_notes;
  // Smaller communicators first: their passes (pairs on disjoint nodes share rounds) measure the
  // links a larger one repeats, whose passes are then covered.
  std::vector<uint64_t> plan_order = suspect_comms;
  auto size_of = [&](uint64_t id) {
    const registry::CommInfo* c = job->FindComm(id);
    return c == nullptr ? 0 : c->comm.member_ranks_size();
  };
  std::stable_sort(plan_order.begin(), plan_order.end(),
                   [&](uint64_t a, uint64_t b) { return size_of(a) < size_of(b); });
  for (uint64_t id : plan_order) {
    const registry::CommInfo* c = job->FindComm(id);
    if (c == nullptr || c->comm.member_ranks_size() < 2) continue;
    std::vector<uint32_t> members(c->comm.member_ranks().begin(), c->comm.member_ranks().end());
    std::sort(members.begin(), members.end());
    if (!planned_members.insert(members).second) continue;
    plan_comm(id, *c, 0);
    // A pair's two directions are no population to judge a link against (the median of two
    // values is their mean), nor is a group on two nodes, most of whose links one slow NIC drags:
    // their links are judged with a comparable communicator's (docs/algorithms.md#reference-links).
    if (c->comm.member_ranks_size() == 2 || !TwoNodesOfGroup(*c).empty()) {
      if (const uint64_t ref = ReferenceComm(*job, *c, suspects, references); ref != 0) {
        references.insert(ref);
        plan_comm(ref, *job->FindComm(ref), id);
        reference_notes.push_back(absl::StrCat(ref, " for ", id));
      }
    }
  }
  // Rounds (docs/algorithms.md#validation-rounds): tasks on disjoint nodes run at the same time;
  // covered tasks are not run (round 0, after the others).
  const std::vector<uint32_t> rounds = RoundsOf(drafts, *job);
  uint32_t to_run = 0;
  for (const PendingTask& t : drafts) to_run += t.covered() ? 0 : 1;
  std::vector<size_t> order(drafts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(drafts[a].covered(), rounds[a]) <
           std::make_pair(drafts[b].covered(), rounds[b]);
  });
  for (size_t i : order) {
    PendingTask* t = event->add_tasks();
    *t = std::move(drafts[i]);
    t->mutable_task()->set_task_id(ids_->NextTaskId(&uow->txn()));
    t->mutable_task()->set_round(t->covered() ? 0 : rounds[i]);
    t->mutable_task()->set_validation_tasks(to_run);
  }
  uint32_t round_count = 0;
  for (const PendingTask& t : event->tasks()) round_count = std::max(round_count, t.task().round());

  IssuePause(event, *job,
             absl::StrCat("validation for event ", event->event().event_id(), ": ", why), uow);
  SetJobState(job_name, falcon::v1::JOB_STATE_VALIDATING, uow);
  const std::string line = absl::StrCat(
      "validation planned job=", job_name, " event=", event->event().event_id(),
      " rank=", absl::StrJoin(suspect_ranks, ","), " comms=", absl::StrJoin(suspect_comms, ","),
      " tasks=", to_run, " covered=", event->tasks_size() - static_cast<int>(to_run),
      " rounds=", round_count,
      " reference_comms=", reference_notes.empty() ? "none" : absl::StrJoin(reference_notes, ","),
      " third_node_comms=", third_node.empty() ? "none" : absl::StrJoin(third_node, ","),
      " pause_directive=", event->pause_directive_id(), " why=\"", why, "\"");
  uow->AfterCommit([line]() { LOG(INFO) << line; });
}

void Localizer::IssuePause(EventRecord* event, const registry::JobEntry& job,
                           const std::string& reason, core::UnitOfWork* uow) {
  // Ahead of the job's latest complete iteration by the pause's lead; each late pause before
  // doubles it. (Leading by the directive issuer's delivery lead instead delayed every verdict
  // by a few iterations, and validation then caught a fault that began after a noise onset.)
  const int64_t latest = std::max<int64_t>(0, progress_(job.name()));
  const int64_t lead = int64_t{options_.pause_lead_iterations}
                       << std::min(event->late_pauses(), kMaxLatePauses);
  falcon::v1::Directive pause;
  pause.set_effective_iteration(latest + lead);
  pause.set_reason(reason);
  pause.mutable_pause()->set_max_duration_ns(absl::ToInt64Nanoseconds(options_.pause_max_duration));
  event->set_pause_directive_id(directives_->Issue(pause, event->event().event_id(), job, uow));
  event->set_phase(falcon::controller::v1::PHASE_PAUSING);
  event->set_phase_start_iteration(progress_(job.name()));
  event->set_phase_deadline_ns(absl::ToUnixNanos(clock_->Now() + options_.pause_ack_timeout));
  events_->Persist(*event, uow);
}

void Localizer::SendTask(const falcon::v1::ValidationTask& task, const registry::JobEntry& job) {
  std::set<std::string> agents;
  for (uint32_t r : task.ranks()) {
    if (const std::string* a = job.AgentOfRank(r)) agents.insert(*a);
  }
  falcon::v1::ControllerMessage msg;
  *msg.mutable_validation_task() = task;
  for (const std::string& a : agents) hub_->Send(a, msg);
}

void Localizer::DispatchNext(EventRecord* event, core::UnitOfWork* uow) {
  if (event->phase() != falcon::controller::v1::PHASE_VALIDATING) {
    const std::string line =
        absl::StrCat("event validating job=", event->event().job(),
                     " event=", event->event().event_id(), " tasks=", event->tasks_size());
    uow->AfterCommit([line]() { LOG(INFO) << line; });
  }
  event->set_phase(falcon::controller::v1::PHASE_VALIDATING);
  if (event->pause_applied_time_ns() == 0) {
    event->set_pause_applied_time_ns(absl::ToUnixNanos(clock_->Now()));
  }
  // Every task at once: the trainers run them in task_id order, round by round with a barrier
  // between rounds (common.proto ValidationTask), so no per-task round trip through the
  // controller adds to the pause.
  bool unfinished = false;
  std::vector<falcon::v1::ValidationTask> to_send;
  for (PendingTask& t : *event->mutable_tasks()) {
    if (t.finished()) continue;
    unfinished = true;
    if (t.sent_time_ns() != 0) continue;
    t.set_sent_time_ns(absl::ToUnixNanos(clock_->Now()));
    to_send.push_back(t.task());
  }
  if (!unfinished) {
    GiveVerdict(event, "", uow);
    return;
  }
  if (!to_send.empty()) {
    // Given up when no result came for task_timeout (OnValidationResult extends it).
    event->set_phase_deadline_ns(absl::ToUnixNanos(clock_->Now() + options_.task_timeout));
    if (const registry::JobEntry* job = registry_->Find(event->event().job())) {
      // One copy of the job for the whole batch (a fleet-sized job is large).
      const uint64_t event_id = event->event().event_id();
      uow->AfterCommit([this, tasks = std::move(to_send), snapshot = *job, event_id]() {
        for (const falcon::v1::ValidationTask& task : tasks) {
          LOG(INFO) << "validation run sent job=" << task.job() << " event=" << event_id
                    << " task=" << task.task_id() << " " << TaskFields(task);
          SendTask(task, snapshot);
        }
      });
    }
  }
  events_->Persist(*event, uow);
}

EventRecord* Localizer::EventOfTask(uint64_t task_id) {
  for (EventRecord* e : events_->OpenEvents()) {
    for (const PendingTask& t : e->tasks()) {
      if (t.task().task_id() == task_id) return e;
    }
  }
  return nullptr;
}

void Localizer::OnValidationResult(const falcon::v1::ValidationResult& result,
                                   core::UnitOfWork* uow) {
  EventRecord* event = EventOfTask(result.task_id());
  if (event == nullptr || event->phase() != falcon::controller::v1::PHASE_VALIDATING) return;
  PendingTask* task = nullptr;
  for (PendingTask& t : *event->mutable_tasks()) {
    if (t.task().task_id() == result.task_id()) task = &t;
  }
  if (task == nullptr || task->finished() || task->sent_time_ns() == 0) return;
  *event->add_results() = result;
  // Validation progresses: it is given up only after task_timeout without any result.
  event->set_phase_deadline_ns(absl::ToUnixNanos(clock_->Now() + options_.task_timeout));
  VLOG(1) << "validation result job=" << result.job() << " event=" << event->event().event_id()
          << " task=" << result.task_id() << " rank=" << result.rank();
  std::set<uint32_t> answered;
  for (const falcon::v1::ValidationResult& r : event->results()) {
    if (r.task_id() == result.task_id()) answered.insert(r.rank());
  }
  bool complete = true;
  for (uint32_t r : task->expected_ranks()) complete = complete && answered.count(r) > 0;
  if (complete) {
    task->set_finished(true);
    const std::string line = absl::StrCat(
        "validation run finished job=", result.job(), " event=", event->event().event_id(),
        " task=", result.task_id(), " ", TaskFields(task->task()), " results=", answered.size());
    uow->AfterCommit([line]() { LOG(INFO) << line; });
    DispatchNext(event, uow);
  } else {
    events_->Persist(*event, uow);
  }
}

void Localizer::OnDirectiveState(const falcon::v1::DirectiveRecord& record, core::UnitOfWork* uow) {
  for (EventRecord* event : events_->OpenEvents()) {
    if (event->phase() != falcon::controller::v1::PHASE_PAUSING ||
        event->pause_directive_id() != record.directive().directive_id()) {
      continue;
    }
    if (record.state() == falcon::v1::DirectiveRecord::STATE_APPLIED) {
      event->set_pause_applied_time_ns(absl::ToUnixNanos(clock_->Now()));
      DispatchNext(event, uow);
    } else if (record.state() == falcon::v1::DirectiveRecord::STATE_REJECTED) {
      std::string reason;
      bool late = false;
      for (const falcon::v1::DirectiveAck& a : record.acks()) {
        if (a.status() == falcon::v1::ACK_STATUS_REJECTED) {
          reason = absl::StrCat("rank ", a.rank(), ": ", a.reason());
          late = late || absl::StartsWith(a.reason(), common::kLateRejectionPrefix);
        }
      }
      const registry::JobEntry* job = registry_->Find(event->event().job());
      if (late && job != nullptr && event->late_pauses() < kMaxLatePauses) {
        // The rank was past the pause's iteration when it arrived (the controller's view of the
        // job's progress lags by an agent's summary interval): the ranks that took it are
        // released, and the pause goes out again further ahead.
        Release(event, "pause came late", uow);
        event->set_late_pauses(event->late_pauses() + 1);
        const std::string line =
            absl::StrCat("validation pause late, re-issued job=", job->name(),
                         " event=", event->event().event_id(),
                         " late_pauses=", event->late_pauses(), " why=\"", reason, "\"");
        uow->AfterCommit([line]() { LOG(INFO) << line; });
        IssuePause(event, *job, record.directive().reason(), uow);
        continue;
      }
      GiveVerdict(event, absl::StrCat("pause rejected (", reason, "); nothing validated"), uow);
    }
  }
}

void Localizer::Tick(absl::Time now, core::UnitOfWork* uow) {
  const int64_t now_ns = absl::ToUnixNanos(now);
  for (EventRecord* event : events_->OpenEvents()) {
    if (event->phase_deadline_ns() == 0 || now_ns < event->phase_deadline_ns()) continue;
    switch (event->phase()) {
      case falcon::controller::v1::PHASE_PROFILING:
        LOG(INFO) << "profiling window ended by its deadline job=" << event->event().job()
                  << " event=" << event->event().event_id();
        FinishProfiling(event, uow);
        break;
      case falcon::controller::v1::PHASE_PAUSING:
        // Not every rank confirmed the pause: validate anyway, the shims run tasks when paused.
        LOG(WARNING) << "pause not confirmed by every rank in time job=" << event->event().job()
                     << " event=" << event->event().event_id()
                     << " directive=" << event->pause_directive_id() << "; validating anyway";
        errors_->CountError(metrics::where::kValidationPauseTimeout);
        DispatchNext(event, uow);
        break;
      case falcon::controller::v1::PHASE_VALIDATING:
        // No result for task_timeout: every unanswered task is given up, the verdict goes on
        // with what was measured.
        for (PendingTask& t : *event->mutable_tasks()) {
          if (!t.finished() && t.sent_time_ns() != 0) {
            LOG(WARNING) << "validation run timed out job=" << event->event().job()
                         << " event=" << event->event().event_id() << " task=" << t.task().task_id()
                         << " " << TaskFields(t.task())
                         << " timeout=" << absl::FormatDuration(options_.task_timeout);
            errors_->CountError(metrics::where::kValidationTaskTimeout);
            t.set_finished(true);
          }
        }
        DispatchNext(event, uow);
        break;
      default:
        break;
    }
  }
}

void Localizer::GiveVerdict(EventRecord* event, const std::string& note, core::UnitOfWork* uow) {
  std::vector<PendingTask> tasks(event->tasks().begin(), event->tasks().end());
  std::vector<falcon::v1::ValidationResult> results(event->results().begin(),
                                                    event->results().end());
  event->mutable_event()->set_evidence(falcon::v1::EVIDENCE_VALIDATION);
  const registry::JobEntry* job = registry_->Find(event->event().job());
  StageVerdict(event,
               JudgeValidation(tasks, results, options_.verdict,
                               job != nullptr ? NodesOfRanks(*job) : RankNodes()),
               note, uow);
}

std::optional<Verdict> Localizer::ProfilingVerdict(const EventRecord& event,
                                                   const ProfileResult& profile) {
  // An operator's forced validation always measures; a profile cut short by its timeout, one with
  // a slow communicator, or one that blamed no rank leaves the question open.
  if (event.forced() || profile.iterations < options_.profiling_iterations ||
      !profile.suspicious.empty() || profile.blamed.empty()) {
    return std::nullopt;
  }
  // Under an uneven micro-batch plan (S2 in force) a DP group computes more by design: compute
  // times no longer compare across a stage, a GEMM does.
  const registry::JobEntry* job = registry_->Find(event.event().job());
  if (job == nullptr) return std::nullopt;
  const auto& plan = job->job().micro_batches();
  if (!plan.empty() &&
      std::adjacent_find(plan.begin(), plan.end(), std::not_equal_to<>()) != plan.end()) {
    return std::nullopt;
  }
  std::vector<ProfileResult::Rank> blamed = profile.blamed;
  for (const ProfileResult::Rank& b : blamed) {
    // Compute in every profiled iteration, by at least the margin GEMM validation would need.
    if (b.cause != analysis::detect::BlameCause::kCompute || b.cause_fraction < 1.0 ||
        b.ratio < 1.0 + options_.verdict.gemm_slow_ratio) {
      return std::nullopt;
    }
  }
  std::sort(blamed.begin(), blamed.end(),
            [](const ProfileResult::Rank& a, const ProfileResult::Rank& b) {
              return a.ratio != b.ratio ? a.ratio > b.ratio : a.rank < b.rank;
            });
  Verdict v;
  v.cause = falcon::v1::CAUSE_COMPUTE;
  v.ratio = blamed.front().ratio;
  std::vector<std::string> parts;
  for (const ProfileResult::Rank& b : blamed) {
    v.ranks.push_back(b.rank);
    parts.push_back(absl::StrFormat("rank %d computes %.2fx its stage's median", b.rank, b.ratio));
  }
  v.reason = absl::StrFormat(
      "profiling: %s in each of %d profiled iterations and no communicator is slower than its "
      "peers; no validation pause",
      absl::StrJoin(parts, ", "), profile.iterations);
  // A culprit another active event already named: validation looks for a new one.
  Verdict check = v;
  if (!ExcludeKnownCulprits(event, &check).empty()) return std::nullopt;
  return v;
}

std::optional<Verdict> Localizer::PeerTimingVerdict(const EventRecord& event,
                                                    const ProfileResult& profile,
                                                    std::string* ranking_note) {
  const CommProfiler* profiler = Profiler(event.event().job());
  if (profiler == nullptr || !profiler->has_peer_transfers()) return std::nullopt;
  analysis::detect::PeerLinkOptions options;
  options.slow_ratio = options_.verdict.link_slow_ratio;
  const analysis::detect::PeerLinkRanking ranking = profiler->PeerLinks(options);
  const std::vector<analysis::detect::PeerLinkRanking::Link> slow = ranking.Slow();
  if (ranking.links.empty()) {
    *ranking_note = absl::StrFormat("peer timing: %d links, none with enough data to compare",
                                    ranking.links_unjudged);
    return std::nullopt;
  }
  std::vector<std::string> top;
  for (size_t i = 0; i < ranking.links.size() && i < 3; ++i) {
    const auto& l = ranking.links[i];
    top.push_back(absl::StrFormat("%d->%d %.2fx", l.key.src, l.key.dst, l.ratio));
  }
  *ranking_note = absl::StrFormat("peer timing ranks %s (%d links, %d slow)",
                                  absl::StrJoin(top, ", "), ranking.links.size(), slow.size());
  if (profiler->untracked_peer_transfers() > 0) {
    absl::StrAppend(ranking_note, "; ", profiler->untracked_peer_transfers(),
                    " peer transfers of links beyond the tracked bound left out");
  }
  // Measure instead when an operator forced validation, the profile was cut short, no link is
  // slow, or profiling blamed a rank's compute (a slow GPU delays its sends too).
  if (event.forced() || profile.iterations < options_.profiling_iterations || slow.empty()) {
    return std::nullopt;
  }
  for (const ProfileResult::Rank& b : profile.blamed) {
    if (b.cause == analysis::detect::BlameCause::kCompute) return std::nullopt;
  }
  auto to_link = [](const analysis::detect::PeerLinkRanking::Link& l) {
    falcon::v1::Link link;
    link.set_src_rank(l.key.src);
    link.set_dst_rank(l.key.dst);
    return link;
  };
  // Links another active event already named are that event's: the others are this event's
  // culprits; none left, validation looks for a new one (docs/algorithms.md#concurrent-events).
  Verdict unknown_only;
  unknown_only.cause = falcon::v1::CAUSE_COMMUNICATION;
  for (const auto& l : slow) unknown_only.links.push_back(to_link(l));
  const std::string known = ExcludeKnownCulprits(event, &unknown_only);
  std::set<std::pair<uint32_t, uint32_t>> candidates;
  for (const falcon::v1::Link& l : unknown_only.links) {
    candidates.insert({l.src_rank(), l.dst_rank()});
  }
  std::set<std::pair<uint32_t, uint32_t>> slow_set;
  for (const auto& l : slow) slow_set.insert({l.key.src, l.key.dst});
  std::set<std::pair<uint32_t, uint32_t>> measured;
  for (const auto& l : ranking.links) measured.insert({l.key.src, l.key.dst});
  Verdict v;
  v.cause = falcon::v1::CAUSE_COMMUNICATION;
  v.links_measured = static_cast<int>(ranking.links.size());
  v.link_endpoints = ranking.endpoints;
  std::vector<std::string> parts;
  // `slow` is slowest first; a link in several communicators is named once, at its worst.
  for (const auto& l : slow) {
    if (candidates.erase({l.key.src, l.key.dst}) == 0) continue;
    if (v.links.empty()) v.ratio = l.ratio;
    v.links.push_back(to_link(l));
    if (measured.count({l.key.dst, l.key.src}) > 0 && slow_set.count({l.key.dst, l.key.src}) == 0) {
      v.one_way_links.push_back(v.links.back());
    }
    parts.push_back(absl::StrFormat("link %d->%d moves data %.2fx slower than its %s links",
                                    l.key.src, l.key.dst, l.ratio, l.group));
  }
  if (v.links.empty()) return std::nullopt;
  // Node NIC faults (docs/algorithms.md#node-nic-faults) over every judged link, each figure
  // relative to its group's reference so that groups compare.
  std::string nic_text;
  if (const registry::JobEntry* job = registry_->Find(event.event().job())) {
    std::vector<LinkFigure> figures;
    for (const auto& l : ranking.links) {
      if (l.ratio > 0) figures.push_back({l.key.src, l.key.dst, 1 / l.ratio});
    }
    std::vector<falcon::v1::Link> group_slow;
    for (const auto& l : slow) group_slow.push_back(to_link(l));
    NodeNicOptions nic_options;
    nic_options.slow_ratio = options_.verdict.link_slow_ratio;
    const NodeNicResult nic =
        FindNodeNicFaults(figures, NodesOfRanks(*job), group_slow, nic_options);
    if (!nic.faults.empty()) {
      std::vector<std::pair<double, falcon::v1::Link>> slow_ratios;
      for (const auto& l : slow) slow_ratios.push_back({l.ratio, to_link(l)});
      const std::vector<std::pair<double, falcon::v1::Link>> all =
          NodeNicVerdictLinks(slow_ratios, nic, &v.nodes);
      v.links.clear();
      v.one_way_links.clear();
      for (const auto& [r, l] : all) v.links.push_back(l);
      v.ratio = all.front().first;
      nic_text = DescribeNodeNicFaults(nic);
    } else if (!nic.note.empty()) {
      nic_text = nic.note;
    }
  }
  v.reason = absl::StrFormat(
      "peer timing: %s%s over %d profiled iterations (%d links compared)%s; no validation pause",
      v.nodes.empty() ? "" : absl::StrCat(nic_text, "; "), absl::StrJoin(parts, ", "),
      profile.iterations, v.links_measured,
      v.link_endpoints.empty()
          ? ""
          : absl::StrCat("; every measured link of rank(s) ", absl::StrJoin(v.link_endpoints, ","),
                         " is slow (its NIC or node)"));
  if (v.nodes.empty() && !nic_text.empty()) absl::StrAppend(&v.reason, "; ", nic_text);
  if (!known.empty()) absl::StrAppend(&v.reason, "; ", known);
  return v;
}

void Localizer::StageVerdict(EventRecord* event, Verdict v, const std::string& note,
                             core::UnitOfWork* uow) {
  falcon::v1::Event* e = event->mutable_event();
  const std::string job = e->job();
  // Concurrent events (docs/algorithms.md#concurrent-events): a culprit another active event of
  // the job already named is that event's; this one looks for a new culprit.
  std::vector<uint64_t> owners;
  const double measured_ratio = v.ratio;  // The slowest culprit's, known ones included.
  const std::string known = ExcludeKnownCulprits(*event, &v, &owners);
  // A forced validation of a job whose slowdown detection never saw: differences between ranks
  // or links that do not slow the job are not a fail-slow (on shared CPUs concurrent link tests
  // alone differ by tens of percent), so it names no culprit; what it measured stays in the
  // reason, and the event closes below (docs/algorithms.md#verdict).
  const bool no_slowdown = event->forced() && event->onset_series_size() == 0;
  std::string measured;
  if (no_slowdown && v.cause != falcon::v1::CAUSE_UNKNOWN) {
    measured = v.reason;
    v.cause = falcon::v1::CAUSE_UNKNOWN;
    v.ranks.clear();
    v.links.clear();
    v.nodes.clear();
    v.ratio = 0;
  }
  // A culprit must be able to explain the slowdown (docs/algorithms.md#verdict): a part slowed
  // x r slows a synchronous iteration by at most x r, so a culprit measured slower than its peers
  // by less than the job slowed (beyond measurement noise) is a difference between healthy parts
  // under a passing load, not the fail-slow.
  // Only for what validation measured in isolation (a GEMM, a link pass): profiling's compute
  // times include host work a slow device does not slow, so its ratio understates the device's.
  // The bound holds iteration by iteration and a straggler's strength varies, so the slowdown
  // that counts is the one when validation ran, where it was below the event's and still held.
  const SlowdownToExplain slowdown =
      SlowdownValidationMustExplain(e->slowdown_ratio(), event->latest_slow_seconds(),
                                    static_cast<double>(e->healthy_iteration_time_ns()) * 1e-9,
                                    settings_->Effective(job).verification_min_ratio);
  if (!no_slowdown && !e->localized_from_profiling() && v.cause != falcon::v1::CAUSE_UNKNOWN &&
      !CanExplain(v.ratio, slowdown.ratio)) {
    v.reason = absl::StrFormat(
        "%s%s, too little to explain the job's x%.2f%s", v.reason,
        known.empty() ? "" : absl::StrFormat("; the slowest culprit left takes %.2fx", v.ratio),
        slowdown.ratio, slowdown.latest ? " over its latest iterations before validation" : "");
    v.cause = falcon::v1::CAUSE_UNKNOWN;
    v.ranks.clear();
    v.links.clear();
    v.nodes.clear();
    v.ratio = 0;
  }
  // Each culprit named must be able to explain the slowdown on its own, as the slowest must
  // (above): the others too weak are noise of a shared CPU, not more fail-slows.
  if (!no_slowdown && !e->localized_from_profiling() && v.cause != falcon::v1::CAUSE_UNKNOWN) {
    const std::string weak = DropCulpritsTooWeakToExplain(slowdown.ratio, &v);
    if (!weak.empty()) {
      absl::StrAppendFormat(&v.reason, "; too little to explain the job's x%.2f, not named: %s",
                            slowdown.ratio, weak);
    }
  }
  // Validation found culprits, and those that could explain the slowdown were all another
  // event's: this slowdown is that event's.
  const bool only_known = !no_slowdown && !owners.empty() && v.cause == falcon::v1::CAUSE_UNKNOWN &&
                          CanExplain(measured_ratio, slowdown.ratio);
  e->set_cause(v.cause);
  e->clear_ranks();
  e->clear_links();
  e->clear_nodes();
  for (const std::string& n : v.nodes) e->add_nodes(n);
  if (v.cause == falcon::v1::CAUSE_UNKNOWN) {
    // Validation found no culprit; report the ranks whose own series slowed down, if any.
    for (const std::string& s : event->onset_series()) {
      if (int64_t r = SeriesRank(s); r >= 0) e->add_ranks(static_cast<uint32_t>(r));
    }
  }
  for (uint32_t r : v.ranks) e->add_ranks(r);
  for (const falcon::v1::Link& l : v.links) *e->add_links() = l;
  // Not before the alarm: the alarm's iteration is the slowed series' (a rank's runs ahead of
  // the job's complete iterations), and a verdict from profiling can come within them.
  const int64_t iteration = std::max(progress_(job), e->alarm_iteration());
  e->set_verdict_iteration(iteration);
  e->set_verdict_time_ns(absl::ToUnixNanos(clock_->Now()));
  event->set_validation_slowdown_ratio(v.ratio);
  e->set_validation_ratio(v.ratio);
  event->set_phase(falcon::controller::v1::PHASE_DONE);
  event->set_phase_deadline_ns(0);
  std::string reason =
      no_slowdown
          ? absl::StrCat(metrics::CauseLabel(v.cause),
                         ": forced validation of a job without a detected "
                         "slowdown names no culprit (",
                         measured.empty() ? v.reason : absl::StrCat("measured: ", measured), ")")
          : absl::StrFormat("%s: %s; iteration time x%.2f", metrics::CauseLabel(v.cause), v.reason,
                            e->slowdown_ratio());
  if (!known.empty()) absl::StrAppend(&reason, "; ", known);
  if (!note.empty()) absl::StrAppend(&reason, "; ", note);
  Release(event, "validation finished", uow);
  profilers_.erase(job);
  SetJobState(job, falcon::v1::JOB_STATE_TRACKING, uow);
  events_->Transition(event, falcon::v1::EVENT_STATE_LOCALIZED, iteration, reason, uow);
  if (no_slowdown) {
    // Nothing slowed the job, so there is nothing to mitigate and nothing to wait for.
    events_->Close(event, iteration,
                   "forced validation done: the job has no detected slowdown, nothing to mitigate",
                   uow);
    return;
  }
  if (only_known) {
    // Another active event's culprit explains what validation measured (the known culprit
    // slowing the job further, or noise on the job's level under that event's plan): nothing new
    // to localize or mitigate, and no culprit to name by elimination
    // (docs/algorithms.md#concurrent-events).
    e->set_explained_by_event_id(owners.front());
    events_->Close(event, iteration,
                   absl::StrCat("its slowdown is event ", owners.front(),
                                "'s: validation found no culprit but that event's (", known,
                                "), nothing new to mitigate"),
                   uow);
    return;
  }
  if (v.cause == falcon::v1::CAUSE_UNKNOWN && EveryRankSlowedAlike(*event, v)) {
    // Outside load (a burst on the machines): nothing of the job's to mitigate, and the event
    // must not absorb a fail-slow that follows (docs/algorithms.md#transients).
    events_->CloseTransient(
        event, iteration,
        event->after_environment_shift()
            ? "transient: the slowdown an environment shift left, and validation measured every "
              "rank alike (outside load), nothing to mitigate"
            : "transient: every rank slowed down alike and validation measured them alike "
              "(outside load), nothing to mitigate",
        uow);
    return;
  }
  if (on_verdict_) on_verdict_(event, uow);
}

std::string Localizer::ExcludeKnownCulprits(const EventRecord& event, Verdict* v,
                                            std::vector<uint64_t>* owners) {
  // Each known culprit with the event that named it.
  std::map<uint32_t, uint64_t> ranks;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> links;
  std::map<std::string, uint64_t> nodes;  // Culprit nodes (NIC faults): every link is known.
  // Compute culprits: a link from or to one is slowed by its endpoint (a throttled rank sends and
  // receives late), so it is that event's too.
  std::map<uint32_t, uint64_t> compute_ranks;
  for (const EventRecord* other : events_->ActiveEvents(event.event().job())) {
    const falcon::v1::Event& o = other->event();
    if (o.event_id() == event.event().event_id() || EventManager::AwaitsVerdict(o)) continue;
    // An unknown verdict reports the ranks that slowed down, not culprits.
    if (o.cause() != falcon::v1::CAUSE_COMPUTE && o.cause() != falcon::v1::CAUSE_COMMUNICATION) {
      continue;
    }
    for (uint32_t r : o.ranks()) {
      ranks.emplace(r, o.event_id());
      if (o.cause() == falcon::v1::CAUSE_COMPUTE) compute_ranks.emplace(r, o.event_id());
    }
    for (const falcon::v1::Link& l : o.links()) {
      links.emplace(std::make_pair(l.src_rank(), l.dst_rank()), o.event_id());
    }
    for (const std::string& n : o.nodes()) nodes.emplace(n, o.event_id());
  }
  if (ranks.empty() && links.empty() && nodes.empty()) return "";
  RankNodes rank_nodes;
  if (!nodes.empty() || !links.empty()) {
    if (const registry::JobEntry* job = registry_->Find(event.event().job())) {
      rank_nodes = NodesOfRanks(*job);
    }
  }
  std::set<uint64_t> owner_ids;
  auto owner_of = [&](const auto& map, const auto& key) -> std::optional<uint64_t> {
    auto it = map.find(key);
    if (it == map.end()) return std::nullopt;
    return it->second;
  };
  auto node_owner = [&](uint32_t r) -> std::optional<uint64_t> {
    auto it = rank_nodes.find(r);
    return it == rank_nodes.end() ? std::nullopt : owner_of(nodes, it->second);
  };
  // A known link between two nodes is their path: once S3 moved ranks, other rank pairs cross it
  // and run as slow (the demo's capped node pair: link 1->5 named, then 1->4 across the same two
  // nodes after S3, named again as a new culprit).
  std::map<std::pair<std::string, std::string>, uint64_t> node_pairs;
  for (const auto& [pair, owner] : links) {
    auto s = rank_nodes.find(pair.first), d = rank_nodes.find(pair.second);
    if (s == rank_nodes.end() || d == rank_nodes.end() || s->second == d->second) continue;
    node_pairs.emplace(std::make_pair(s->second, d->second), owner);
  }
  auto path_owner = [&](uint32_t src, uint32_t dst) -> std::optional<uint64_t> {
    auto s = rank_nodes.find(src), d = rank_nodes.find(dst);
    if (s == rank_nodes.end() || d == rank_nodes.end() || s->second == d->second) {
      return std::nullopt;
    }
    return owner_of(node_pairs, std::make_pair(s->second, d->second));
  };
  std::vector<uint32_t> dropped_ranks;
  std::vector<std::string> dropped_links;
  std::vector<std::string> dropped_nodes;
  // Keeps the culprits (and their ratios, when parallel) no other event named.
  KeepCulpritsIf(&v->ranks, &v->rank_ratios, [&](size_t i) {
    std::optional<uint64_t> owner = owner_of(ranks, v->ranks[i]);
    if (!owner) return true;
    dropped_ranks.push_back(v->ranks[i]);
    owner_ids.insert(*owner);
    return false;
  });
  KeepCulpritsIf(&v->links, &v->link_ratios, [&](size_t i) {
    const falcon::v1::Link& l = v->links[i];
    std::optional<uint64_t> owner = owner_of(links, std::make_pair(l.src_rank(), l.dst_rank()));
    if (!owner) owner = owner_of(links, std::make_pair(l.dst_rank(), l.src_rank()));
    if (!owner) owner = path_owner(l.src_rank(), l.dst_rank());
    if (!owner) owner = path_owner(l.dst_rank(), l.src_rank());
    if (!owner) owner = node_owner(l.src_rank());
    if (!owner) owner = node_owner(l.dst_rank());
    if (!owner) owner = owner_of(compute_ranks, l.src_rank());
    if (!owner) owner = owner_of(compute_ranks, l.dst_rank());
    if (!owner) return true;
    dropped_links.push_back(absl::StrCat(l.src_rank(), "->", l.dst_rank()));
    owner_ids.insert(*owner);
    return false;
  });
  std::vector<std::string> kept_nodes;
  for (const std::string& n : v->nodes) {
    if (std::optional<uint64_t> owner = owner_of(nodes, n)) {
      dropped_nodes.push_back(n);
      owner_ids.insert(*owner);
      continue;
    }
    kept_nodes.push_back(n);
  }
  if (dropped_ranks.empty() && dropped_links.empty() && dropped_nodes.empty()) return "";
  v->nodes = std::move(kept_nodes);
  if (v->links.empty()) v->nodes.clear();  // A node's evidence is its links.
  if (v->cause == falcon::v1::CAUSE_COMPUTE && v->ranks.empty()) {
    v->cause = v->links.empty() ? falcon::v1::CAUSE_UNKNOWN : falcon::v1::CAUSE_COMMUNICATION;
  } else if (v->cause == falcon::v1::CAUSE_COMMUNICATION && v->links.empty()) {
    v->cause = v->ranks.empty() ? falcon::v1::CAUSE_UNKNOWN : falcon::v1::CAUSE_COMPUTE;
  }
  // The ratio is the slowest culprit left's (each list is slowest first).
  if (v->cause == falcon::v1::CAUSE_UNKNOWN) {
    v->ratio = 0;
  } else if (v->cause == falcon::v1::CAUSE_COMPUTE && !v->rank_ratios.empty()) {
    v->ratio = v->rank_ratios.front();
  } else if (v->cause == falcon::v1::CAUSE_COMMUNICATION && !v->link_ratios.empty()) {
    v->ratio = v->link_ratios.front();
  }
  if (owners != nullptr) owners->assign(owner_ids.begin(), owner_ids.end());
  std::string out = "known culprits of other active events left out:";
  if (!dropped_ranks.empty()) absl::StrAppend(&out, " rank ", absl::StrJoin(dropped_ranks, ","));
  if (!dropped_nodes.empty()) absl::StrAppend(&out, " node ", absl::StrJoin(dropped_nodes, ","));
  if (!dropped_links.empty()) absl::StrAppend(&out, " link ", absl::StrJoin(dropped_links, ","));
  return out;
}

bool Localizer::EveryRankSlowedAlike(const EventRecord& event, const Verdict& v) const {
  if (event.forced() || v.gemm_ranks_measured < 2) return false;
  if (event.after_environment_shift()) return true;
  const registry::JobEntry* job = registry_->Find(event.event().job());
  if (job == nullptr || job->ranks().empty()) return false;
  std::set<uint32_t> slowed;
  for (const std::string& s : event.onset_series()) {
    if (int64_t r = SeriesRank(s); r >= 0) slowed.insert(static_cast<uint32_t>(r));
  }
  for (uint32_t r : job->ranks()) {
    if (!slowed.count(r)) return false;
  }
  return true;
}

void Localizer::Release(EventRecord* event, const std::string& reason, core::UnitOfWork* uow) {
  if (event->pause_directive_id() == 0) return;
  const registry::JobEntry* job = registry_->Find(event->event().job());
  if (job == nullptr) return;
  falcon::v1::Directive resume;
  resume.set_effective_iteration(std::max<int64_t>(0, progress_(job->name())));
  resume.set_reason(absl::StrCat("event ", event->event().event_id(), ": ", reason));
  resume.mutable_resume();
  event->set_resume_directive_id(directives_->Issue(resume, event->event().event_id(), *job, uow));
  event->set_pause_directive_id(0);
  if (event->pause_applied_time_ns() != 0) {
    const int64_t paused_ns = absl::ToUnixNanos(clock_->Now()) - event->pause_applied_time_ns();
    event->mutable_event()->set_validation_pause_ns(std::max<int64_t>(0, paused_ns));
    event->set_pause_applied_time_ns(0);
    const std::string line = absl::StrCat(
        "validation pause ended job=", job->name(), " event=", event->event().event_id(),
        " paused_ms=", paused_ns / 1'000'000, " reason=\"", reason, "\"");
    uow->AfterCommit([line]() { LOG(INFO) << line; });
  }
  events_->Persist(*event, uow);
}

void Localizer::Cancel(EventRecord* event, core::UnitOfWork* uow) {
  const std::string job = event->event().job();
  const Phase phase = event->phase();
  if (phase == falcon::controller::v1::PHASE_PROFILING) {
    if (const registry::JobEntry* entry = registry_->Find(job)) {
      registry::JobEntry snapshot = *entry;
      uow->AfterCommit([this, snapshot]() { SendProfiling(snapshot, false, ""); });
    }
  }
  if (phase == falcon::controller::v1::PHASE_PAUSING ||
      phase == falcon::controller::v1::PHASE_VALIDATING) {
    Release(event, "fail-slow cleared during validation", uow);
  }
  if (phase == falcon::controller::v1::PHASE_PROFILING ||
      phase == falcon::controller::v1::PHASE_PAUSING ||
      phase == falcon::controller::v1::PHASE_VALIDATING) {
    profilers_.erase(job);
    event->set_phase_deadline_ns(0);
    SetJobState(job, falcon::v1::JOB_STATE_TRACKING, uow);
  }
}

void Localizer::OnAgentJoined(const std::string& agent_id, const registry::JobEntry& job) {
  EventRecord* event = events_->Localizing(job.name());
  bool profiling = event != nullptr && event->phase() == falcon::controller::v1::PHASE_PROFILING;
  if (profiling) SendProfiling(job, true, agent_id);
}

}  // namespace falcon::controller::detection
