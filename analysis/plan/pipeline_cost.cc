#include "analysis/plan/pipeline_cost.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace falcon::analysis::plan {

absl::Duration StageCycle(const PipelineTiming& replica, int stage) {
  absl::Duration cycle = replica.stage_compute[stage];
  if (stage > 0) cycle += replica.boundary_p2p[stage - 1];
  if (stage + 1 < static_cast<int>(replica.stage_compute.size())) {
    cycle += replica.boundary_p2p[stage];
  }
  return cycle;
}

absl::Duration MicroBatchTime(const PipelineTiming& replica) {
  absl::Duration slowest;
  for (int s = 0; s < static_cast<int>(replica.stage_compute.size()); ++s) {
    slowest = std::max(slowest, StageCycle(replica, s));
  }
  return slowest;
}

absl::Duration PipelineTime(const PipelineTiming& replica) {
  if (replica.micro_batches <= 0) return absl::ZeroDuration();
  absl::Duration sum;
  absl::Duration slowest;
  for (int s = 0; s < static_cast<int>(replica.stage_compute.size()); ++s) {
    const absl::Duration cycle = StageCycle(replica, s);
    sum += cycle;
    slowest = std::max(slowest, cycle);
  }
  return sum + (replica.micro_batches - 1) * slowest;
}

std::vector<absl::Duration> MicroBatchTimes(const JobTiming& job) {
  std::vector<absl::Duration> times;
  times.reserve(job.replicas.size());
  for (const PipelineTiming& r : job.replicas) times.push_back(MicroBatchTime(r));
  return times;
}

absl::Status ValidateJobTiming(const JobTiming& job) {
  if (job.replicas.empty()) return absl::InvalidArgumentError("replicas: empty (D = 0)");
  const size_t pp = job.replicas[0].stage_compute.size();
  if (pp == 0) return absl::InvalidArgumentError("replicas[0].stage_compute: empty (P = 0)");
  for (size_t d = 0; d < job.replicas.size(); ++d) {
    const PipelineTiming& r = job.replicas[d];
    if (r.stage_compute.size() != pp) {
      return absl::InvalidArgumentError(absl::StrCat("replicas[", d, "].stage_compute: has ",
                                                     r.stage_compute.size(), " stages, want ", pp));
    }
    if (r.boundary_p2p.size() != pp - 1) {
      return absl::InvalidArgumentError(absl::StrCat("replicas[", d, "].boundary_p2p: has ",
                                                     r.boundary_p2p.size(), " entries, want ",
                                                     pp - 1));
    }
    if (r.micro_batches < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicas[", d, "].micro_batches: must be >= 0, got ", r.micro_batches));
    }
    for (size_t s = 0; s < pp; ++s) {
      if (r.stage_compute[s] < absl::ZeroDuration() ||
          r.stage_compute[s] == absl::InfiniteDuration()) {
        return absl::InvalidArgumentError(
            absl::StrCat("replicas[", d, "].stage_compute[", s, "]: must be finite and >= 0"));
      }
    }
    for (size_t b = 0; b + 1 < pp; ++b) {
      if (r.boundary_p2p[b] < absl::ZeroDuration() ||
          r.boundary_p2p[b] == absl::InfiniteDuration()) {
        return absl::InvalidArgumentError(
            absl::StrCat("replicas[", d, "].boundary_p2p[", b, "]: must be finite and >= 0"));
      }
    }
  }
  if (job.stage_allreduce.size() != pp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage_allreduce: has ", job.stage_allreduce.size(), " entries, want P = ", pp));
  }
  for (size_t s = 0; s < pp; ++s) {
    if (job.stage_allreduce[s] < absl::ZeroDuration() ||
        job.stage_allreduce[s] == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage_allreduce[", s, "]: must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<IterationEstimate> EstimateIteration(const JobTiming& job) {
  if (absl::Status s = ValidateJobTiming(job); !s.ok()) return s;
  IterationEstimate e;
  for (size_t d = 0; d < job.replicas.size(); ++d) {
    const PipelineTiming& r = job.replicas[d];
    const absl::Duration pipeline = PipelineTime(r);
    e.replica_pipeline.push_back(pipeline);
    e.replica_bubble.push_back(r.micro_batches > 0 ? pipeline - r.micro_batches * MicroBatchTime(r)
                                                   : absl::ZeroDuration());
    if (pipeline > e.pipeline) {
      e.pipeline = pipeline;
      e.slowest_replica = static_cast<int>(d);
    }
  }
  for (absl::Duration a : job.stage_allreduce) e.allreduce = std::max(e.allreduce, a);
  e.iteration = e.pipeline + e.allreduce;
  return e;
}

absl::StatusOr<JobTiming> UniformJob(int dp, int pp, int64_t micro_batches, absl::Duration compute,
                                     absl::Duration p2p, absl::Duration allreduce) {
  if (dp < 1) return absl::InvalidArgumentError(absl::StrCat("dp: must be >= 1, got ", dp));
  if (pp < 1) return absl::InvalidArgumentError(absl::StrCat("pp: must be >= 1, got ", pp));
  if (micro_batches < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batches: must be >= 0, got ", micro_batches));
  }
  const std::pair<const char*, absl::Duration> times[] = {
      {"compute", compute}, {"p2p", p2p}, {"allreduce", allreduce}};
  for (const auto& [name, t] : times) {
    if (t < absl::ZeroDuration() || t == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": must be finite and >= 0, got ", absl::FormatDuration(t)));
    }
  }
  JobTiming job;
  PipelineTiming replica;
  replica.stage_compute.assign(pp, compute);
  replica.boundary_p2p.assign(pp - 1, p2p);
  replica.micro_batches = micro_batches;
  job.replicas.assign(dp, replica);
  job.stage_allreduce.assign(pp, allreduce);
  if (absl::Status s = ValidateJobTiming(job); !s.ok()) return s;
  return job;
}

}  // namespace falcon::analysis::plan
