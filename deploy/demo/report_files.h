// The report folder the demo writes: report.json, iterations.csv, timeline.png (gnuplot) and
// index.html.
#ifndef FALCON_DEPLOY_DEMO_REPORT_FILES_H_
#define FALCON_DEPLOY_DEMO_REPORT_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "deploy/demo/report.h"

namespace falcon::deploy::demo {

// "iteration,iteration_time_s,plan_version,marks": one row per iteration of the history; marks
// joins with ';' what happened there: fault_start:N, fault_end:N (injected fault N),
// onset:E (the change point), alarm:E, verdict:E, recovery:E (event E), and S2:E / revert_S2:E /
// skipped_S3:E for actions (dry runs left out).
std::string IterationsCsv(const Report& report);

// A gnuplot script that reads `csv_path` and draws `png_path` (terminal `terminal`, "pngcairo" or
// "png"): iteration time over iterations, fault windows shaded, event marks (change point, alarm,
// verdict, recovery, directives, reverts, skipped rungs) as labelled vertical lines; marks outside
// the recorded iterations (a revert taking effect after the run ended) are left out, and labels
// near the right edge sit left of their line so they stay inside the plot.
std::string GnuplotScript(const Report& report, const std::string& csv_path,
                          const std::string& png_path, const std::string& terminal);

// index.html: the plot (`png_name`, relative), the summary table, faults and settings.
std::string IndexHtml(const Report& report, const std::string& png_name);

// Writes report.json, iterations.csv, timeline.gp, timeline.png (when gnuplot runs; else a note
// in the error and in index.html), index.html into `dir` (created). Files that can be written
// are written even when another fails; returns the first error (naming the file).
absl::Status WriteReportFolder(const Report& report, const std::string& dir);

// Writes `contents` to `path` (kInternal naming the path on failure).
absl::Status WriteTextFile(const std::string& path, const std::string& contents);

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_REPORT_FILES_H_
