// The fuzz entry point of the ingest path: one input is a sequence of length-delimited
// falcon.v1.AgentMessage (protobuf's delimited format), fed to a fresh in-memory Controller on a
// stream that already said hello for a registered 8-rank job. Used by the libFuzzer target
// (ingest_fuzzer.cc, clang) and by the deterministic mutation test (ingest_mutation_test.cc).
//
// Invariants checked (an error names the broken one): the controller never crashes; a message
// either succeeds or ends the stream with INVALID_ARGUMENT / FAILED_PRECONDITION (never another
// code: the in-memory store cannot fail); every batch on a live stream gets exactly one BatchAck
// with its sequence; the Control API still answers afterwards.
#ifndef FALCON_CONTROLLER_FUZZ_INGEST_FUZZ_H_
#define FALCON_CONTROLLER_FUZZ_INGEST_FUZZ_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller::fuzz {

// Runs `data` through a fresh controller. Deterministic.
absl::Status FuzzIngestOnce(absl::string_view data);

// Encodes messages in the input format.
std::string EncodeInput(const std::vector<falcon::v1::AgentMessage>& messages);

// Realistic inputs: batches of summaries (from `iteration_times`, rank -> values in ms, when
// given; synthetic otherwise), raw ops, validation results and directive acks for the fuzz job.
std::vector<std::vector<falcon::v1::AgentMessage>> SeedMessages(
    const std::map<int, std::vector<double>>* iteration_times);

}  // namespace falcon::controller::fuzz

#endif  // FALCON_CONTROLLER_FUZZ_INGEST_FUZZ_H_
