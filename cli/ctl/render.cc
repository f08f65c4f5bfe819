#include "cli/ctl/render.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/ctl/format.h"
#include "cli/ctl/settings_kv.h"
#include "common/comm_kind.h"
#include "common/directive_kind.h"
#include "common/layer_split.h"

namespace falcon::cli::ctl {
namespace {

std::string Layout(const falcon::v1::Job& j) {
  if (j.dp_size() == 0 && j.pp_size() == 0) return "-";
  return absl::StrCat(j.dp_size(), "x", j.pp_size(), "x", std::max<uint32_t>(j.tp_size(), 1));
}

std::string Slowdown(double ratio) { return ratio > 0 ? absl::StrFormat("x%.2f", ratio) : "-"; }

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string Index(int32_t i) { return i < 0 ? "-" : absl::StrCat(i); }

// The share of the slowdown the plan in force recovered, as measured: (slow − mitigated) /
// (slow − healthy) of the event's iteration times; nullopt until mitigated is measured.
std::optional<double> MeasuredShare(const falcon::v1::Event& e) {
  const int64_t healthy = e.healthy_iteration_time_ns(), slow = e.slow_iteration_time_ns();
  const int64_t mitigated = e.mitigated_iteration_time_ns();
  if (mitigated <= 0 || healthy <= 0 || slow <= healthy) return std::nullopt;
  return static_cast<double>(slow - mitigated) / static_cast<double>(slow - healthy);
}

// "S2L 0.88": the plan in force's level and recoverable share; "-" without one.
std::string CeilingCell(const falcon::v1::Event& e) {
  if (!e.has_ceiling()) return "-";
  return absl::StrFormat("%s %.2f", StrategyShortName(e.ceiling().strategy()),
                         e.ceiling().recoverable());
}

// Blocks of a split: its first pipeline's (every pipeline holds them all).
int SplitBlocks(const falcon::v1::LayerSplit& split) {
  int blocks = 0;
  if (split.replicas_size() > 0) {
    for (uint32_t b : split.replicas(0).stage_blocks()) blocks += static_cast<int>(b);
  }
  return blocks;
}

// "+1.2 s" relative to `base_ns`; "" when either time is unknown.
std::string Since(int64_t time_ns, int64_t base_ns) {
  if (time_ns <= 0 || base_ns <= 0) return "";
  const double s = (time_ns - base_ns) / 1e9;
  return s == 0 ? "0 s" : absl::StrCat(s > 0 ? "+" : "", FormatSeconds(s));
}

}  // namespace

std::string RenderJobs(const falcon::v1::ListJobsResponse& jobs) {
  if (jobs.jobs_size() == 0) return "no jobs\n";
  Table t({"JOB", "STATE", "WORLD", "LAYOUT", "NODES", "EPOCH", "ITERATION", "ITER_TIME", "HEALTHY",
           "ACTIVE_EVENTS", "PLAN"});
  for (const auto& j : jobs.jobs()) {
    t.Add({j.job(), JobStateName(j.state()), absl::StrCat(j.world_size()), Layout(j),
           absl::StrCat(j.nodes_size()), absl::StrCat(j.epoch()),
           FormatIteration(j.last_iteration()), FormatDurationNs(j.iteration_time_ns()),
           FormatDurationNs(j.healthy_iteration_time_ns()),
           j.active_event_ids_size() == 0 ? "-" : absl::StrJoin(j.active_event_ids(), ","),
           absl::StrCat(j.plan_version())});
  }
  return t.Render();
}

std::string RenderJob(const falcon::v1::Job& j) {
  std::string out;
  Table head({"", ""});
  head.Add({"job", j.job()});
  head.Add({"state", JobStateName(j.state())});
  head.Add({"world", absl::StrCat(j.world_size(), " ranks on ", j.nodes_size(), " nodes (",
                                  absl::StrJoin(j.nodes(), ", "), ")")});
  head.Add({"layout", j.dp_size() == 0 && j.pp_size() == 0
                          ? "unknown (not hinted)"
                          : absl::StrCat("dp ", j.dp_size(), " x pp ", j.pp_size(), " x tp ",
                                         std::max<uint32_t>(j.tp_size(), 1))});
  if (j.pipeline_blocks() > 0) {
    head.Add({"blocks", absl::StrCat(j.pipeline_blocks(),
                                     j.block_state_bytes() > 0
                                         ? absl::StrCat(" (", FormatBytes(j.block_state_bytes()),
                                                        " state each)")
                                         : " (state size unknown)")});
  }
  head.Add({"epoch", absl::StrCat(j.epoch())});
  head.Add({"iteration", FormatIteration(j.last_iteration())});
  head.Add({"iteration time", absl::StrCat(FormatDurationNs(j.iteration_time_ns()), " (healthy ",
                                           FormatDurationNs(j.healthy_iteration_time_ns()), ")")});
  if (j.has_detection_armed_iteration()) {
    head.Add({"detection", j.detection_armed_iteration() < 0
                               ? absl::StrCat("warming up (ranks armed ", j.detection_armed_ranks(),
                                              " of ", j.world_size(), ")")
                               : absl::StrCat("armed at iteration ", j.detection_armed_iteration(),
                                              " (ranks armed ", j.detection_armed_ranks(), " of ",
                                              j.world_size(), ")")});
  }
  head.Add({"active events",
            j.active_event_ids_size() == 0 ? "none" : absl::StrJoin(j.active_event_ids(), ", ")});
  head.Add({"plan", absl::StrCat("version ", j.plan_version(),
                                 j.micro_batches_size() == 0
                                     ? ""
                                     : absl::StrCat(", micro-batches per dp ",
                                                    absl::StrJoin(j.micro_batches(), ",")))});
  if (j.layer_split_size() > 0) {
    falcon::v1::LayerSplit split;
    *split.mutable_replicas() = j.layer_split();
    head.Add({"layer split", common::SplitText(common::StageBlocksOf(split),
                                               static_cast<int>(j.pipeline_blocks()))});
  }
  if (j.has_imbalance()) {
    const falcon::v1::WorkloadImbalance& im = j.imbalance();
    for (int i = 0; i < im.findings_size(); ++i) {
      head.Add(
          {i == 0 ? absl::StrCat("imbalance (", im.iterations(), " it)") : "", im.findings(i)});
    }
  } else {
    head.Add({"imbalance", "not analysed yet"});
  }
  // Drop the empty header line of the key/value block.
  std::string block = head.Render();
  out += block.substr(block.find('\n') + 1);
  Table ranks({"RANK", "NODE", "LOCAL", "GPU", "PID", "DP", "PP", "TP"});
  for (const auto& r : j.ranks()) {
    ranks.Add({absl::StrCat(r.rank()), r.node(), absl::StrCat(r.local_rank()), Index(r.gpu()),
               absl::StrCat(r.pid()), Index(r.dp_index()), Index(r.pp_index()),
               Index(r.tp_index())});
  }
  absl::StrAppend(&out, "\n", ranks.Render());
  Table comms({"COMM", "KIND", "NAME", "MEMBERS"});
  for (const auto& c : j.communicators()) {
    comms.Add({absl::StrFormat("0x%x", c.comm_id()), common::CommKindName(c.kind()),
               OrDash(c.name()), absl::StrJoin(c.member_ranks(), ",")});
  }
  absl::StrAppend(&out, "\n", comms.Render());
  return out;
}

std::string RenderEvents(const falcon::v1::ListEventsResponse& events) {
  if (events.events_size() == 0) return "no events\n";
  Table t({"ID", "JOB", "STATE", "CAUSE", "CULPRIT", "SLOWDOWN", "ONSET", "ALARM", "VERDICT",
           "RECOVERY", "LOST", "CEILING"});
  for (const auto& e : events.events()) {
    t.Add({absl::StrCat(e.event_id()), e.job(), EventStateOf(e), CauseName(e.cause()), Culprit(e),
           Slowdown(e.slowdown_ratio()), FormatIteration(e.onset_iteration()),
           FormatIteration(e.alarm_iteration()), FormatIteration(e.verdict_iteration()),
           FormatIteration(e.recovery_iteration()), FormatSeconds(e.lost_seconds()),
           CeilingCell(e)});
  }
  return t.Render();
}

std::string RenderEvent(const falcon::v1::Event& e) {
  std::string out =
      absl::StrCat("event ", e.event_id(), "  job ", e.job(), "  state ", EventStateOf(e),
                   "  cause ", CauseName(e.cause()), "  culprit ", Culprit(e),
                   e.rank_level() ? "  (rank-level series)" : "  (job series)", "\n");
  if (e.nodes_size() > 0) {
    // A node NIC fault (docs/algorithms.md#node-nic-faults): its links are the evidence.
    std::vector<std::string> links;
    for (const auto& l : e.links()) links.push_back(absl::StrCat(l.src_rank(), "->", l.dst_rank()));
    absl::StrAppend(&out, "slow NIC of node ", absl::StrJoin(e.nodes(), ", node "), ": ",
                    e.links_size(), " slow links to other nodes: ", absl::StrJoin(links, ","),
                    "\n");
  }
  absl::StrAppend(&out, "slowdown ", Slowdown(e.slowdown_ratio()), ": healthy ",
                  FormatDurationNs(e.healthy_iteration_time_ns()), ", slow ",
                  FormatDurationNs(e.slow_iteration_time_ns()), ", mitigated ",
                  FormatDurationNs(e.mitigated_iteration_time_ns()), "; lost ",
                  FormatSeconds(e.lost_seconds()), "\n");
  if (e.has_ceiling()) {
    // What the cost model says the plan in force can recover, next to what it did.
    const falcon::v1::PlanCeiling& c = e.ceiling();
    absl::StrAppend(&out, "ceiling ", CeilingCell(e), " (predicted ",
                    FormatDurationNs(c.predicted_iteration_time_ns()), "; healthy ",
                    FormatDurationNs(c.healthy_iteration_time_ns()), ", slowed ",
                    FormatDurationNs(c.slowed_iteration_time_ns()), ")");
    if (const std::optional<double> share = MeasuredShare(e); share.has_value()) {
      absl::StrAppendFormat(&out, " — recovered %.2f measured", *share);
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "\ntimeline:\n");
  struct Entry {
    int64_t iteration;
    int64_t time_ns;
    std::string what;
    std::string detail;
  };
  std::vector<Entry> entries;
  entries.push_back({e.onset_iteration(), e.onset_time_ns(), "onset", "first slow iteration"});
  if (e.alarm_iteration() >= 0 && (e.alarm_iteration() > 0 || e.alarm_time_ns() > 0)) {
    entries.push_back({e.alarm_iteration(), e.alarm_time_ns(), "alarm", "slowdown confirmed"});
  }
  if (e.verdict_iteration() >= 0) {
    entries.push_back(
        {e.verdict_iteration(), e.verdict_time_ns(), "verdict",
         absl::StrCat(CauseName(e.cause()), ", ", Culprit(e),
                      e.evidence() == falcon::v1::EVIDENCE_PEER_TIMING
                          ? " (from peer timing, no pause)"
                      : e.localized_from_profiling() ? " (from profiling, no pause)"
                      : e.validation_pause_ns() > 0
                          ? absl::StrCat(" (validation paused the job ",
                                         FormatDurationNs(e.validation_pause_ns()), ")")
                          : "")});
  }
  for (const auto& a : e.actions()) {
    std::vector<std::string> d = {StrategyName(a.strategy())};
    if (a.revert()) d.push_back("revert");
    if (a.dry_run()) d.push_back("dry-run");
    if (a.directive_id() != 0) d.push_back(absl::StrCat("directive ", a.directive_id()));
    std::string detail = absl::StrJoin(d, ", ");
    if (!a.reason().empty()) absl::StrAppend(&detail, ": ", a.reason());
    entries.push_back({a.iteration(), a.time_ns(), a.revert() ? "revert" : "action", detail});
  }
  if (e.recovery_iteration() >= 0) {
    entries.push_back({e.recovery_iteration(), e.recovery_time_ns(), "recovery",
                       absl::StrCat("state ", EventStateName(e.state()))});
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.iteration < b.iteration; });
  Table t({"ITERATION", "TIME (UTC)", "SINCE ONSET", "WHAT", "DETAIL"});
  for (const auto& x : entries) {
    t.Add({FormatIteration(x.iteration), FormatTimeNs(x.time_ns),
           Since(x.time_ns, e.onset_time_ns()), x.what, x.detail});
  }
  out += t.Render();
  if (e.transitions_size() > 0) {
    absl::StrAppend(&out, "\ntransitions:\n");
    Table tr({"ITERATION", "TIME (UTC)", "STATE", "REASON"});
    for (const auto& s : e.transitions()) {
      tr.Add({FormatIteration(s.iteration()), FormatTimeNs(s.time_ns()), EventStateName(s.state()),
              s.reason()});
    }
    out += tr.Render();
  }
  return out;
}

std::string RenderWatchLine(const falcon::v1::Event& e) {
  int64_t time_ns = 0;
  int64_t iteration = -1;
  std::string reason;
  if (e.transitions_size() > 0) {
    const auto& last = e.transitions(e.transitions_size() - 1);
    time_ns = last.time_ns();
    iteration = last.iteration();
    reason = last.reason();
  }
  std::string line = absl::StrCat(
      FormatTimeNs(time_ns), "  event ", e.event_id(), "  job ", e.job(), "  ",
      EventStateName(e.state()), "  iteration ", FormatIteration(iteration), "  cause ",
      CauseName(e.cause()), "  culprit ", Culprit(e), "  slowdown ", Slowdown(e.slowdown_ratio()));
  if (!reason.empty()) absl::StrAppend(&line, "  (", reason, ")");
  return line;
}

std::string AckCount(const falcon::v1::DirectiveRecord& record, uint32_t world_size) {
  std::set<uint32_t> applied;
  for (const auto& a : record.acks()) {
    if (a.status() == falcon::v1::ACK_STATUS_APPLIED) applied.insert(a.rank());
  }
  const int targets = record.directive().target_ranks_size();
  if (targets > 0) return absl::StrCat(applied.size(), "/", targets);
  if (world_size == 0) return absl::StrCat(applied.size(), "/?");
  return absl::StrCat(applied.size(), "/", world_size);
}

std::string RenderDirectives(const falcon::v1::ListDirectivesResponse& directives,
                             const std::map<std::string, uint32_t>& world_sizes) {
  if (directives.directives_size() == 0) return "no directives\n";
  Table t({"ID", "JOB", "EPOCH", "KIND", "EFFECTIVE", "STATE", "ACKS", "EVENT", "ISSUED (UTC)",
           "REASON"});
  for (const auto& r : directives.directives()) {
    const auto& d = r.directive();
    auto ws = world_sizes.find(d.job());
    // The kind word of the logs and metrics (s2, s3, s4, pause, resume, profiling).
    std::string kind(common::DirectiveKindName(d));
    if (d.reverts_directive_id() != 0)
      absl::StrAppend(&kind, " (reverts ", d.reverts_directive_id(), ")");
    t.Add({absl::StrCat(d.directive_id()), d.job(), absl::StrCat(d.epoch()), kind,
           FormatIteration(d.effective_iteration()), DirectiveStateName(r.state()),
           AckCount(r, ws == world_sizes.end() ? 0 : ws->second),
           r.event_id() == 0 ? "-" : absl::StrCat(r.event_id()), FormatTimeNs(r.issued_time_ns()),
           OrDash(d.reason())});
  }
  return t.Render();
}

std::string RenderAudit(const falcon::v1::ListAuditResponse& audit) {
  if (audit.records_size() == 0) return "no audit records\n";
  Table t({"ID", "TIME (UTC)", "IDENTITY", "ROLE", "METHOD", "RESULT", "REQUEST"});
  for (const auto& r : audit.records()) {
    t.Add({absl::StrCat(r.audit_id()), FormatTimeNs(r.time_ns()), OrDash(r.identity()),
           OrDash(r.role()), r.method(), r.result(), OrDash(r.request())});
  }
  return t.Render();
}

std::string RenderSettings(const falcon::v1::Settings& s) {
  std::string out = s.job().empty() ? "defaults for new jobs\n"
                                    : absl::StrCat("settings for job ", s.job(), "\n");
  Table t({"KEY", "VALUE"});
  for (auto& [k, v] : SettingRows(s)) t.Add({k, v});
  return out + t.Render();
}

std::string RenderPlan(const std::string& job, const falcon::v1::DryRunPlanResponse& p) {
  std::string out = absl::StrCat("dry-run plan for job ", job, " (nothing sent)\n");
  if (p.actions_size() == 0) {
    absl::StrAppend(&out, "no actions\n");
  } else {
    Table t({"STEP", "STRATEGY", "ITERATION", "REASON"});
    int step = 0;
    for (const auto& a : p.actions()) {
      t.Add({absl::StrCat(++step), StrategyName(a.strategy()), FormatIteration(a.iteration()),
             OrDash(a.reason())});
    }
    out += t.Render();
  }
  if (p.has_micro_batch_plan()) {
    absl::StrAppend(&out, "\nS2 micro-batches per dp: ",
                    absl::StrJoin(p.micro_batch_plan().micro_batches(), ","), "\n");
  }
  if (p.has_layer_split()) {
    absl::StrAppend(
        &out, "\nS2L layer split: ",
        common::SplitText(common::StageBlocksOf(p.layer_split()), SplitBlocks(p.layer_split())),
        "; micro-batches per dp: ", absl::StrJoin(p.layer_split().micro_batches(), ","), "\n");
  }
  if (p.has_topology_change()) {
    absl::StrAppend(&out, "\nS3 layout:\n");
    Table t({"RANK", "DP", "PP", "TP"});
    for (const auto& a : p.topology_change().assignments()) {
      t.Add({absl::StrCat(a.rank()), absl::StrCat(a.dp_index()), absl::StrCat(a.pp_index()),
             absl::StrCat(a.tp_index())});
    }
    out += t.Render();
  }
  if (p.predicted_iteration_time_s() > 0) {
    absl::StrAppend(&out, "\npredicted iteration time ",
                    FormatSeconds(p.predicted_iteration_time_s()), "\n");
  }
  return out;
}

}  // namespace falcon::cli::ctl
