// Human-readable views of Control API responses (pure functions, so tests need no controller).
// Durations print in s/ms/us, timestamps in UTC, unknown values as "-".
#ifndef FALCON_CLI_CTL_RENDER_H_
#define FALCON_CLI_CTL_RENDER_H_

#include <cstdint>
#include <map>
#include <string>

#include "proto/falcon/v1/control.pb.h"

namespace falcon::cli::ctl {

// Table: JOB STATE WORLD LAYOUT NODES EPOCH ITERATION ITER_TIME HEALTHY ACTIVE_EVENTS PLAN.
std::string RenderJobs(const falcon::v1::ListJobsResponse& jobs);
// Summary block, then RANK and COMM tables.
std::string RenderJob(const falcon::v1::Job& job);
// Table: ID JOB STATE CAUSE CULPRIT SLOWDOWN ONSET ALARM VERDICT RECOVERY LOST CEILING (the plan
// in force's level and recoverable share, "S2L 0.88"; "-" without one).
std::string RenderEvents(const falcon::v1::ListEventsResponse& events);
// Summary, iteration times, the plan in force's ceiling (Event.ceiling) with the share measured
// ((slow − mitigated) / (slow − healthy), once mitigated is measured), timeline (onset, alarm,
// verdict, actions, recovery) and transitions.
std::string RenderEvent(const falcon::v1::Event& event);
// One line for a WatchEvents message: time, event id, job, state, iteration, cause, culprit,
// slowdown and the latest transition's reason.
std::string RenderWatchLine(const falcon::v1::Event& event);

// Acks as "applied/expected": distinct target ranks that acked APPLIED over the target count
// (every rank of the job when target_ranks is empty: `world_size`, 0 when unknown -> "x/?").
std::string AckCount(const falcon::v1::DirectiveRecord& record, uint32_t world_size);
// Table: ID JOB EPOCH KIND EFFECTIVE STATE ACKS EVENT ISSUED REASON. `world_sizes` by job.
// The audit trail, newest first: id, time, identity, role, method, result, request.
std::string RenderAudit(const falcon::v1::ListAuditResponse& audit);
std::string RenderDirectives(const falcon::v1::ListDirectivesResponse& directives,
                             const std::map<std::string, uint32_t>& world_sizes);
// "settings for job J" (or "defaults for new jobs") and KEY VALUE rows.
std::string RenderSettings(const falcon::v1::Settings& settings);
// Escalation ladder, micro-batch plan, layer split ("dp2 6+10" and its micro-batches), topology
// change, predicted iteration time.
std::string RenderPlan(const std::string& job, const falcon::v1::DryRunPlanResponse& plan);

}  // namespace falcon::cli::ctl

#endif  // FALCON_CLI_CTL_RENDER_H_
