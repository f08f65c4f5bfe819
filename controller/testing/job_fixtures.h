// Builders for test and benchmark jobs: registrations of a DP x PP layout spread over nodes, and
// iteration summaries. Not for production code.
#ifndef FALCON_CONTROLLER_TESTING_JOB_FIXTURES_H_
#define FALCON_CONTROLLER_TESTING_JOB_FIXTURES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller::testing {

struct LayoutSpec {
  std::string job = "job";
  uint32_t dp = 2;
  uint32_t pp = 2;
  uint32_t ranks_per_node = 2;  // Consecutive ranks share a node ("node-<i>").
  bool hint_kinds = true;       // false: every comm registered as COMM_KIND_UNKNOWN.
  bool hint_layout = true;      // false: dp/pp sizes and rank indices left unknown.
  uint64_t epoch = 1;
};

// Rank r = pp_index * dp + dp_index. Comms: one DP communicator per stage (id 1000 + stage), one PP
// chain per replica (id 2000 + replica; a ring over the stages), and the world (id 1).
std::vector<falcon::v1::Communicator> LayoutComms(const LayoutSpec& spec);
// Number of nodes the layout occupies.
uint32_t NodeCount(const LayoutSpec& spec);
std::string NodeName(uint32_t node);
// The registration an agent on `node` sends: its ranks and the comms they are members of.
falcon::v1::JobRegistration NodeRegistration(const LayoutSpec& spec, uint32_t node);
std::vector<uint32_t> RanksOfNode(const LayoutSpec& spec, uint32_t node);

// A summary of `rank` at `iteration` taking `iteration_time_ns`, with one comm entry per comm of
// the rank (transfer = wait = a tenth of the time each).
falcon::v1::IterationSummary MakeSummary(const LayoutSpec& spec, uint32_t rank, int64_t iteration,
                                         int64_t iteration_time_ns);

// What a cooperative agent answers to `directive`: an APPLIED ack at `applied_iteration` from each
// of `ranks` the directive targets (all of them when it names no target), in their order.
std::vector<falcon::v1::AgentMessage> AppliedAcks(const falcon::v1::Directive& directive,
                                                  const std::vector<uint32_t>& ranks,
                                                  int64_t applied_iteration);

// What a cooperative agent answers to validation `task` for those of its `ranks` the task names:
// for a GEMM, each rank's gemm_ns(rank) with the FLOP rate it implies; for a link pass, each
// sending rank's timings of its links, link_ns(src, dst) (ranks that only receive answer nothing).
std::vector<falcon::v1::AgentMessage> ValidationAnswers(
    const falcon::v1::ValidationTask& task, const std::vector<uint32_t>& ranks,
    const std::function<int64_t(uint32_t rank)>& gemm_ns,
    const std::function<int64_t(uint32_t src, uint32_t dst)>& link_ns);

}  // namespace falcon::controller::testing

#endif  // FALCON_CONTROLLER_TESTING_JOB_FIXTURES_H_
