// Readers for recorded series that falcon_detect analyses offline. Every error names the file
// and the line, column, field or worker at fault.
//
// Formats:
// - csv: a header row, then one row per observation; `column` picks the value column (default:
//   the last one). Comma-separated; double-quoted fields may contain commas. A UTF-8 byte order
//   mark at the start of the file is skipped (also for alibaba and bytedance).
// - tcpd: Turing Change Point Dataset JSON ({name, series: [{label, raw: [...]}]}); one series
//   per entry of "series" (all of them, or the one whose label is `column`).
// - alibaba: Alibaba PAI mini-batch CSV (<row>,worker,gpu,time,batch_time_norm): one series per
//   worker ("worker_6"), ordered by "time"; `column` picks the value (default batch_time_norm).
// - bytedance: the derived per-step, per-rank CSV of the ByteDance straggler study
//   (step,rank,dp_rank,stage,<op>_s...): one series per rank ("rank_0"), ordered by step, of the
//   total op time per step (or of `column`); plus per step the compute and communicator timings
//   for cross-rank blame (analysis/detect/blame.h), see ReadBytedance.
// - pairwise: one row per measured pair of nodes, as nccl-tests between two nodes prints it:
//   header node_a,node_b,busbw_gbps (other columns allowed; `column` picks the bandwidth column,
//   default busbw_gbps; larger is faster) for pairwise localization
//   (analysis/detect/pairwise.h); no series.
#ifndef FALCON_CLI_DETECT_READERS_H_
#define FALCON_CLI_DETECT_READERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/detect/blame.h"
#include "analysis/detect/pairwise.h"
#include "common/text_file.h"

namespace falcon::cli::detect {

enum class InputFormat { kCsv, kTcpd, kAlibaba, kBytedance, kPairwise };

// "csv", "tcpd", "alibaba", "bytedance", "pairwise"; kInvalidArgument naming the value otherwise.
absl::StatusOr<InputFormat> ParseFormat(absl::string_view name);

struct NamedSeries {
  std::string name;
  std::vector<double> values;
  // Where each value came from, for messages: e.g. "line 17" or "raw[16]".
  std::vector<std::string> origins;
};

struct DetectInput {
  std::string path;
  std::vector<NamedSeries> series;
  std::vector<analysis::detect::BlameInput> steps;       // kBytedance only, ascending step.
  std::vector<analysis::detect::PairMeasurement> pairs;  // kPairwise only, in file order.
};

// The bound on an input file: at most `max_bytes` (falcon_detect's --max_input_bytes), so that an
// endless input (/dev/zero) or a huge one fails with an error naming the limit.
struct ReadLimits {
  uint64_t max_bytes = common::kDefaultMaxTextFileBytes;
};

// Reads `path` in `format`. `column` as described above ("" for the default).
// kNotFound: the file cannot be opened. kInvalidArgument: a directory, malformed content (a JSON
// error names the line, column and field, e.g. a number beyond the range of a double), a missing
// column, a non-numeric, NaN or infinite value, or no data at all. kResourceExhausted: the file
// is larger than limits.max_bytes.
absl::StatusOr<DetectInput> ReadInput(const std::string& path, InputFormat format,
                                      const std::string& column, const ReadLimits& limits = {});

absl::StatusOr<DetectInput> ReadCsv(const std::string& path, const std::string& column,
                                    const ReadLimits& limits = {});
absl::StatusOr<DetectInput> ReadTcpd(const std::string& path, const std::string& column,
                                     const ReadLimits& limits = {});
absl::StatusOr<DetectInput> ReadAlibaba(const std::string& path, const std::string& column,
                                        const ReadLimits& limits = {});
// Blame input per step: compute = forward-compute + backward-compute, compared within the PP
// stage; communicators (bytes unknown, so comparable by kind): per stage the DP communicators of
// grads-reduce-scatter, params-all-gather and layernorm-grads-all-reduce; per DP replica
// optimizer-clip-main-grad over its stages and embedding-grads-all-reduce between its first and
// last stage; per pipeline link the forward (send on s, recv on s+1) and backward (send on s+1,
// recv on s) point-to-point pairs. kInvalidArgument also for a rank twice in a step or two ranks
// with the same (dp_rank, stage) in a step, naming both lines, and for a step, rank, dp_rank or
// stage outside [0, 2^31).
absl::StatusOr<DetectInput> ReadPairwise(const std::string& path, const std::string& column,
                                         const ReadLimits& limits = {});
absl::StatusOr<DetectInput> ReadBytedance(const std::string& path, const std::string& column,
                                          const ReadLimits& limits = {});

}  // namespace falcon::cli::detect

#endif  // FALCON_CLI_DETECT_READERS_H_
