// falcon_detect: offline change-point analysis of a recorded iteration-time series, so that users
// can replay their own logs through Falcon's detector (BOCD + verification,
// docs/algorithms.md#bocd) and, for ByteDance traces, cross-rank blame
// (docs/algorithms.md#cross-rank-blame); for pairwise bandwidth tables, node-or-link
// localization (docs/algorithms.md#pairwise-localization).
//
//   falcon_detect --input FILE --format csv|tcpd|alibaba|bytedance|pairwise [--column NAME] [--raw]
//                 [--prior m,k,a,b] [--hazard LAMBDA] [--[no]zscore] [--min_probability P]
//                 [--json] [--max_input_bytes N]
//
// Exit status 0 on success (and for --help, which prints the usage and every flag), 1 on any
// error (message on stderr naming the file, field or flag), never a crash: the input is read up
// to --max_input_bytes, JSON errors (also numbers beyond a double) name the line and field, and
// names that are not UTF-8 are written to --json output with U+FFFD in place of bad bytes.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/detect/detect_runner.h"
#include "cli/detect/readers.h"
#include "cli/help/flags_help.h"
#include "common/flag_checks.h"
#include "common/logging/logging.h"

ABSL_FLAG(std::string, input, "", "File to analyse (required).");
ABSL_FLAG(std::string, format, "",
          "Input format: csv, tcpd, alibaba, bytedance or pairwise (required).");
ABSL_FLAG(std::string, column, "",
          "Value column (csv: default the last column; alibaba: default batch_time_norm; "
          "bytedance: default the total of all op columns; pairwise: default busbw_gbps) or series "
          "label (tcpd: default all).");
ABSL_FLAG(bool, raw, false,
          "Report BOCD's MAP segmentation as is (kind \"raw\", index 0 included), without "
          "verification. With --zscore --prior 0,1,1,1 --hazard 100 this reproduces the R package "
          "ocp as run by TCPDBench.");
ABSL_FLAG(std::string, prior, "0,1,1,1", "Normal-Gamma prior m,k,a,b (k, a, b > 0).");
ABSL_FLAG(double, hazard, 250,
          "Constant hazard, given as the expected run length lambda (> 1): the hazard is "
          "1/lambda.");
ABSL_FLAG(bool, zscore, true,
          "Standardize each series (mean 0, sample sd 1) before BOCD; --nozscore to disable.");
ABSL_FLAG(bool, json, false, "Print JSON instead of a text report.");
ABSL_FLAG(double, min_change, 0.10,
          "Verification: keep a change when the means differ by at least this fraction; also "
          "the blame threshold over the median, and pairwise: a pair is slow at median / "
          "bandwidth >= 1 + this.");
ABSL_FLAG(int, min_gap, 10, "Verification: minimum observations between kept changes.");
ABSL_FLAG(double, min_probability, falcon::cli::detect::DetectOptions().min_probability,
          "Verify (and report) a segment start only when its change-point probability reaches "
          "this: the online detector's change_probability (0.9, lag 10). 0 verifies every "
          "segment start of the MAP segmentation. Ignored with --raw.");
ABSL_FLAG(int64_t, max_input_bytes, int64_t{64} << 20,
          "Refuse an input file larger than this many bytes, in [1, 2^36] (64 GiB); the default "
          "is 64 MiB.");

namespace {

absl::StatusOr<falcon::analysis::detect::NormalGammaPrior> ParsePrior(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  if (parts.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prior must be m,k,a,b (4 numbers), got \"", text, "\""));
  }
  double v[4];
  const char* names[4] = {"m", "k", "a", "b"};
  for (int i = 0; i < 4; ++i) {
    if (!absl::SimpleAtod(parts[i], &v[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prior: ", names[i], " = \"", parts[i], "\" is not a number"));
    }
  }
  return falcon::analysis::detect::NormalGammaPrior{v[0], v[1], v[2], v[3]};
}

int Fail(const absl::Status& status) {
  std::cerr << "falcon_detect: " << status.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "falcon_detect: offline fail-slow analysis of a recorded series.\n"
      "  falcon_detect --input FILE --format csv|tcpd|alibaba|bytedance|pairwise [--column NAME] "
      "[--raw]\n"
      "                [--prior m,k,a,b] [--hazard LAMBDA] [--[no]zscore] [--min_probability P]\n"
      "                [--json]";
  absl::SetProgramUsageMessage(kUsage);
  if (falcon::cli::help::WantsHelp(argc, argv)) {  // Abseil's own --help exits 1.
    std::cout << falcon::cli::help::FlagsHelp(
        absl::StrCat(kUsage, "\n", falcon::common::logging::kLoggingUsage), "falcon_detect_main.cc",
        /*dashes=*/false);
    return 0;
  }
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  falcon::common::logging::InitLogging(argv[0]);
  if (absl::Status s = falcon::common::CheckNoPositionals(positional); !s.ok()) return Fail(s);
  const int64_t max_input_bytes = absl::GetFlag(FLAGS_max_input_bytes);
  if (absl::Status s =
          falcon::common::CheckIntegerIn(max_input_bytes, "--max_input_bytes", 1, int64_t{1} << 36);
      !s.ok()) {
    return Fail(s);
  }
  const std::string input = absl::GetFlag(FLAGS_input);
  if (input.empty()) return Fail(absl::InvalidArgumentError("--input is required"));
  if (absl::GetFlag(FLAGS_format).empty()) {
    return Fail(absl::InvalidArgumentError(
        "--format is required: one of csv, tcpd, alibaba, bytedance, pairwise"));
  }
  absl::StatusOr<falcon::cli::detect::InputFormat> format =
      falcon::cli::detect::ParseFormat(absl::GetFlag(FLAGS_format));
  if (!format.ok()) return Fail(format.status());
  absl::StatusOr<falcon::analysis::detect::NormalGammaPrior> prior =
      ParsePrior(absl::GetFlag(FLAGS_prior));
  if (!prior.ok()) return Fail(prior.status());

  falcon::cli::detect::DetectOptions options;
  options.raw = absl::GetFlag(FLAGS_raw);
  if (options.raw && *format == falcon::cli::detect::InputFormat::kPairwise) {
    return Fail(absl::InvalidArgumentError(
        "--raw applies to series (BOCD's segmentation); --format pairwise has none"));
  }
  options.prior = *prior;
  options.expected_run_length = absl::GetFlag(FLAGS_hazard);
  options.zscore = absl::GetFlag(FLAGS_zscore);
  options.min_change = absl::GetFlag(FLAGS_min_change);
  options.min_gap = absl::GetFlag(FLAGS_min_gap);
  options.min_probability = absl::GetFlag(FLAGS_min_probability);

  absl::StatusOr<falcon::cli::detect::DetectInput> data = falcon::cli::detect::ReadInput(
      input, *format, absl::GetFlag(FLAGS_column),
      falcon::cli::detect::ReadLimits{static_cast<uint64_t>(max_input_bytes)});
  if (!data.ok()) return Fail(data.status());
  absl::StatusOr<nlohmann::json> result = falcon::cli::detect::RunDetect(*data, options);
  if (!result.ok()) return Fail(result.status());
  if (absl::GetFlag(FLAGS_json)) {
    // Series names come from the input (CSV headers): not always UTF-8, which dump() would throw
    // on. Bad bytes become U+FFFD.
    std::cout << result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << falcon::cli::detect::FormatReport(*result);
  }
  return 0;
}
