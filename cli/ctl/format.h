// Text and JSON rendering for falconctl: aligned tables, durations, timestamps, enum names and a
// proto -> JSON conversion (field names as in the .proto, enums as their names, 64-bit integers
// as JSON numbers, every field present).
#ifndef FALCON_CLI_CTL_FORMAT_H_
#define FALCON_CLI_CTL_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::cli::ctl {

// Columns padded to their widest cell, two spaces apart, no trailing blanks; `headers` first.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // A row; missing cells print empty, extra cells are an error of the caller (ignored).
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t size() const { return rows_.size(); }
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Nanoseconds as "1.23 s" (>= 1 s), "123.4 ms" (>= 1 ms), "12.3 us", "-" for <= 0.
std::string FormatDurationNs(int64_t ns);
// Seconds as "12.1 s", "850.0 ms", "2m 03.4s" (>= 60 s), "0 s" for 0.
std::string FormatSeconds(double seconds);
// Unix epoch ns as "2026-11-30 23:40:01.123" UTC; "-" for <= 0.
std::string FormatTimeNs(int64_t unix_ns);
// An iteration number, "-" when negative (unknown / not yet).
std::string FormatIteration(int64_t iteration);
// Bytes in binary units: "512 B", "1.5 KiB", "3.0 MiB", ... up to "EiB".
std::string FormatBytes(uint64_t bytes);

// Short lower-case enum names: "tracking", "localized", "compute", "S2 micro-batch", "S2L layer
// split", "applied".
std::string JobStateName(falcon::v1::JobState s);
std::string EventStateName(falcon::v1::EventState s);
// The event's state name, "transient" for a CLOSED event marked Event.transient.
std::string EventStateOf(const falcon::v1::Event& e);
std::string CauseName(falcon::v1::Cause c);
std::string StrategyName(falcon::v1::Strategy s);
// "S1", "S2", "S2L", "S3", "S4"; "-" for anything else.
std::string StrategyShortName(falcon::v1::Strategy s);
std::string DirectiveStateName(falcon::v1::DirectiveRecord::State s);
// "rank 5" / "ranks 5,6 link 1->3" / "links 1->3,2->3" / "-"; for a node NIC fault (Event.nodes)
// the node instead of its links: "node-2's NIC (12 links)".
std::string Culprit(const falcon::v1::Event& e);

// The message as JSON (see the file comment).
nlohmann::json ToJson(const google::protobuf::Message& message);

}  // namespace falcon::cli::ctl

#endif  // FALCON_CLI_CTL_FORMAT_H_
