// Key encodings for the controller's tables. Integers are fixed-width big-endian so byte-wise key
// order equals numeric order; a job name never contains '\0' (JobRegistration.job is
// [A-Za-z0-9._-]), so "<job>\0" is a safe prefix.
#ifndef FALCON_CONTROLLER_STORE_KEYS_H_
#define FALCON_CONTROLLER_STORE_KEYS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace falcon::controller::store::keys {

void AppendU32(std::string* out, uint32_t v);
void AppendU64(std::string* out, uint64_t v);
// Reads a big-endian integer at `*pos` and advances it; nullopt when too short.
std::optional<uint32_t> ReadU32(absl::string_view in, size_t* pos);
std::optional<uint64_t> ReadU64(absl::string_view in, size_t* pos);

// events: event id.
std::string EventKey(uint64_t event_id);
// audit: audit id.
std::string AuditKey(uint64_t audit_id);
// directives: "<job>\0" + directive id.
std::string JobPrefix(absl::string_view job);
std::string DirectiveKey(absl::string_view job, uint64_t directive_id);
// directive_acks: "<job>\0" + directive id + position (32 bits): the ack's place in its
// directive's acks, in the order they were first received.
std::string DirectiveAckKey(absl::string_view job, uint64_t directive_id, uint32_t position);
// Parses a directive_acks key; false when malformed.
bool ParseDirectiveAckKey(absl::string_view key, std::string* job, uint64_t* directive_id,
                          uint32_t* position);
// job_parts: "<job>\0" + agent id.
std::string JobPartKey(absl::string_view job, absl::string_view agent_id);
// history: "<job>\0" + first iteration of the bucket (iterations are >= 0).
std::string HistoryKey(absl::string_view job, int64_t iteration);
// sample_rows: "<job>\0" + iteration + the row's first rank (iterations are >= 0): one row per
// job, iteration and agent batch, so rows are appended in iteration order.
std::string SampleRowKey(absl::string_view job, int64_t iteration, uint32_t first_rank);
// Parses a sample_rows key; false when malformed.
bool ParseSampleRowKey(absl::string_view key, std::string* job, int64_t* iteration,
                       uint32_t* first_rank);
// samples (written by versions before sample_rows, read once to move them):
// "<job>\0" + rank + iteration.
std::string LegacySampleKey(absl::string_view job, uint32_t rank, int64_t iteration);
// Parses a samples key; false when malformed.
bool ParseLegacySampleKey(absl::string_view key, std::string* job, uint32_t* rank,
                          int64_t* iteration);

}  // namespace falcon::controller::store::keys

#endif  // FALCON_CONTROLLER_STORE_KEYS_H_
