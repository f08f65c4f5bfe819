// Which agents report which jobs, and the grace a job gets while its agents are away
// (docs/architecture.md#agent-restarts, docs/operations.md#agent-restarts).
//
// An agent *reports* a job while its stream is up and it registered the job on that stream
// (listed it in its AgentHello, or sent a registration or a batch of it). It is *away* from the
// job from the moment its stream ends, or it says hello without listing the job (a restarted
// agent whose shims have not reattached yet), until it reports the job again. The controller
// ends a job once every agent of it has been away for the grace (counted from the last one to
// leave), and takes the part of a job from an agent that is connected but still away after the
// grace. Within the grace of an absence an agent is *rejoining*: its registrations of the job add
// to the part it had (JobRegistry's WithEarlierPart), since its shims come back one at a time.
//
// Times are the controller's injected clock. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_REGISTRY_JOB_PRESENCE_H_
#define FALCON_CONTROLLER_REGISTRY_JOB_PRESENCE_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace falcon::controller::registry {

class JobPresence {
 public:
  // REQUIRES: grace > 0 (ControllerOptions::job_end_grace).
  explicit JobPresence(absl::Duration grace) : grace_(grace) {}

  // `agent` is away from `job` from `now`; when it already is, the earlier time stays. Returns
  // whether it was reporting the job until now.
  bool Away(const std::string& job, const std::string& agent, absl::Time now);
  // `agent` reports `job` (again): how long it was away, or nullopt when it was not away.
  std::optional<absl::Duration> Back(const std::string& job, const std::string& agent,
                                     absl::Time now);
  bool IsAway(const std::string& job, const std::string& agent) const;
  // Whether an absence of `agent` from `job` began less than the grace before `now` (it may be
  // back already).
  bool Rejoining(const std::string& job, const std::string& agent, absl::Time now) const;

  // Whether an agent is away from `job` for less than the grace at `now` (its directives are
  // held: DirectiveIssuer::Tick).
  bool Held(const std::string& job, absl::Time now) const;
  // When every agent in `agents` (the job's, non-empty) is away from `job`: the time the last of
  // them left, from which the grace runs. nullopt when one of them reports the job (an agent
  // without a record reports it).
  std::optional<absl::Time> UnreportedSince(const std::string& job,
                                            const std::vector<std::string>& agents) const;
  // Agents away from `job` for at least the grace at `now`, with the time each left.
  std::vector<std::pair<std::string, absl::Time>> Expired(const std::string& job,
                                                          absl::Time now) const;
  // Jobs with a record (an agent away or rejoining), sorted.
  std::vector<std::string> Jobs() const;

  // Forgets the record of `agent` for `job` (its part was removed), or all of `job` (it ended).
  void Forget(const std::string& job, const std::string& agent);
  void Forget(const std::string& job);
  // Forgets agents that are back and whose absence began at least the grace before `now`.
  void Prune(absl::Time now);

  absl::Duration grace() const { return grace_; }

 private:
  struct Record {
    absl::Time since;  // When the (latest) absence began.
    bool away = true;
  };
  const Record* Find(const std::string& job, const std::string& agent) const;

  const absl::Duration grace_;
  std::map<std::string, std::map<std::string, Record>> jobs_;  // job -> agent -> record.
};

}  // namespace falcon::controller::registry

#endif  // FALCON_CONTROLLER_REGISTRY_JOB_PRESENCE_H_
