#include "deploy/demo/report_files.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/subprocess.h"

namespace falcon::deploy::demo {
namespace {

std::map<int64_t, std::vector<std::string>> Marks(const Report& report) {
  std::map<int64_t, std::vector<std::string>> marks;
  for (size_t i = 0; i < report.scenario.faults.size(); ++i) {
    const InjectedFault& f = report.scenario.faults[i];
    marks[f.from_iteration].push_back(absl::StrCat("fault_start:", i));
    marks[f.to_iteration].push_back(absl::StrCat("fault_end:", i));
  }
  for (const EventReport& e : report.events) {
    if (e.onset_iteration >= 0)
      marks[e.onset_iteration].push_back(absl::StrCat("onset:", e.event_id));
    if (e.alarm_iteration >= 0)
      marks[e.alarm_iteration].push_back(absl::StrCat("alarm:", e.event_id));
    if (e.verdict_iteration >= 0) {
      marks[e.verdict_iteration].push_back(absl::StrCat("verdict:", e.event_id));
    }
    if (e.recovery_iteration >= 0) {
      marks[e.recovery_iteration].push_back(absl::StrCat("recovery:", e.event_id));
    }
    for (const ActionMark& a : e.actions) {
      if (a.dry_run) continue;
      marks[a.iteration].push_back(absl::StrCat(
          a.revert ? "revert_" : "", a.skipped ? "skipped_" : "", a.strategy, ":", e.event_id));
    }
  }
  return marks;
}

std::string HtmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string Cell(int64_t iteration) { return iteration < 0 ? "-" : absl::StrCat(iteration); }

std::string GnuplotQuote(const std::string& s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

// Runs argv (no shell; argv[0] looked up in PATH) to its end. The spawn error naming the program
// (kNotFound when it is not installed), or kInternal naming it and how it ended when it fails.
absl::Status RunProgram(const std::vector<std::string>& args) {
  common::SpawnOptions options;
  options.argv = args;
  options.search_path = true;
  absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
  if (!proc.ok()) return proc.status();
  absl::StatusOr<common::ExitStatus> ended = proc->Wait();
  if (!ended.ok()) return ended.status();
  if (!ended->success()) {
    return absl::InternalError(absl::StrCat(args[0], " failed (", ended->ToString(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string IterationsCsv(const Report& report) {
  std::map<int64_t, std::vector<std::string>> marks = Marks(report);
  std::string out = "iteration,iteration_time_s,plan_version,marks\n";
  for (const auto& p : report.history) {
    auto it = marks.find(p.iteration());
    absl::StrAppendFormat(&out, "%d,%.6f,%d,%s\n", p.iteration(), p.iteration_time_ns() * 1e-9,
                          p.plan_version(),
                          it == marks.end() ? "" : absl::StrJoin(it->second, ";"));
  }
  return out;
}

std::string GnuplotScript(const Report& report, const std::string& csv_path,
                          const std::string& png_path, const std::string& terminal) {
  std::string s;
  absl::StrAppend(&s, "set terminal ", terminal, " size 1000,420",
                  terminal == "pngcairo" ? " font \"sans,9\"" : "", "\n");
  absl::StrAppend(&s, "set output ", GnuplotQuote(png_path), "\n");
  absl::StrAppend(&s, "set datafile separator \",\"\n");
  absl::StrAppendFormat(
      &s, "set title %s\n",
      GnuplotQuote(absl::StrFormat("Falcon demo: %s, DP=%d x PP=%d on %d nodes",
                                   report.scenario.name, report.settings.layout.dp,
                                   report.settings.layout.pp, report.settings.nodes)));
  s += "set xlabel \"iteration\"\nset ylabel \"iteration time (s)\"\n";
  s += "set grid ytics lc rgb \"#dddddd\"\nset key top right opaque\n";
  // Robust y range: up to 2.5x the median so validation pauses do not flatten the plot.
  double median = MedianIterationTime(report.history, 0, INT64_MAX);
  if (median > 0) absl::StrAppendFormat(&s, "set yrange [0:%.4f]\n", median * 2.5);
  int64_t last = report.history.empty() ? 1 : report.history.back().iteration();
  absl::StrAppendFormat(&s, "set xrange [0:%d]\n", std::max<int64_t>(1, last));
  // A label at iteration x: left of its line, or right of it near the right edge (so it stays
  // inside the plot; a label is about 12% of the width).
  const int64_t margin = std::max<int64_t>(3, last * 12 / 100);
  auto label = [&](const std::string& text, int64_t x, double y, const char* color) {
    const bool right = x + 1 > last - margin;
    absl::StrAppendFormat(&s, "set label %s at %d, graph %.2f %s textcolor rgb \"%s\"\n",
                          GnuplotQuote(text), right ? std::max<int64_t>(0, x - 1) : x + 1, y,
                          right ? "right" : "left", color);
  };
  int obj = 1;
  for (size_t i = 0; i < report.scenario.faults.size(); ++i) {
    const InjectedFault& f = report.scenario.faults[i];
    if (f.from_iteration > last) continue;  // Not reached.
    const char* color = f.kind == FaultKind::kLink ? "#cfe0ff" : "#ffd6d6";
    int64_t to = std::min<int64_t>(f.to_iteration, last);
    absl::StrAppendFormat(&s,
                          "set object %d rect from %d, graph 0 to %d, graph 1 fc rgb \"%s\" "
                          "fs solid 0.6 noborder behind\n",
                          obj++, f.from_iteration, to, color);
    label(absl::StrCat("fault ", FaultKindName(f.kind)), f.from_iteration + 1, 0.04, "#555555");
  }
  int arrow = 1;
  // A vertical line at iteration x (none outside the recorded iterations).
  auto vline = [&](int64_t x, const char* color, int dash, const std::string& text, double y) {
    if (x < 0 || x > last) return;
    absl::StrAppendFormat(
        &s,
        "set arrow %d from %d, graph 0 to %d, graph 1 nohead lc rgb \"%s\" lw 1.5 "
        "dt %d\n",
        arrow++, x, x, color, dash);
    label(text, x, y, color);
  };
  for (const EventReport& e : report.events) {
    vline(e.onset_iteration, "#e69f00", 2, "change point", 0.90);
    vline(e.alarm_iteration, "#d62728", 1, "alarm", 0.85);
    vline(e.verdict_iteration, "#7b3294", 1,
          absl::StrCat("verdict ", e.cause == "COMMUNICATION" ? "link" : e.cause), 0.80);
    vline(e.recovery_iteration, "#555555", 3, "recovered", 0.90);
    for (const ActionMark& a : e.actions) {
      if (a.dry_run || a.strategy == "S1") continue;
      if (a.skipped) {
        vline(a.iteration, "#aaaaaa", 3, absl::StrCat(a.strategy, " skipped"), 0.70);
        continue;
      }
      vline(a.iteration, a.revert ? "#777777" : "#2ca02c", a.revert ? 3 : 1,
            a.revert ? absl::StrCat("revert ", a.strategy) : a.strategy, 0.75);
    }
  }
  absl::StrAppendFormat(&s,
                        "plot %s skip 1 using 1:2 with lines lw 1.2 lc rgb \"#1f77b4\" "
                        "title \"iteration time\"\n",
                        GnuplotQuote(csv_path));
  return s;
}

std::string IndexHtml(const Report& report, const std::string& png_name) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Falcon demo report</title>\n"
      "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#eee}"
      ".bad{color:#b00}</style></head><body>\n";
  absl::StrAppend(
      &h, "<h1>Falcon demo: ", HtmlEscape(report.scenario.name), "</h1>\n<p>",
      HtmlEscape(report.scenario.description), ". Layout DP=", report.settings.layout.dp,
      " &times; PP=", report.settings.layout.pp, " on ", report.settings.nodes, " emulated nodes; ",
      IterationsLine(report), " in ", absl::StrFormat("%.0f", report.wall_time_s), " s",
      report.interrupted ? " (interrupted)" : "", ".</p>\n");
  absl::StrAppend(&h, "<img src=\"", HtmlEscape(png_name),
                  "\" alt=\"iteration time timeline\" width=\"1000\">\n");
  h += "<h2>Events</h2>\n<table><tr><th>event</th><th>state</th><th>cause</th><th>culprit</th>"
       "<th>fault from</th><th>change point</th><th>alarm</th><th>alarm delay</th>"
       "<th>verdict</th><th>recovered at</th><th>actions</th><th>healthy s</th><th>slowed s</th>"
       "<th>mitigated s</th><th>recovered</th><th>matches</th></tr>\n";
  auto seconds = [](double v) { return v > 0 ? absl::StrFormat("%.3f", v) : std::string("-"); };
  for (const EventReport& e : report.events) {
    std::vector<std::string> culprit, actions;
    if (!e.nodes.empty()) {
      culprit.push_back(HtmlEscape(CulpritText(e)));  // The node's NIC, not its links.
    } else {
      for (int r : e.ranks) culprit.push_back(absl::StrCat("rank ", r));
      for (const auto& [a, b] : e.links) culprit.push_back(absl::StrCat("link ", a, "&rarr;", b));
    }
    for (const ActionMark& a : e.actions) actions.push_back(HtmlEscape(ActionLabel(a)));
    std::string match = "<span class=\"bad\">false alarm</span>";
    if (e.matched_fault >= 0) {
      match = absl::StrCat("fault #", e.matched_fault,
                           e.cause_correct && e.culprit_correct
                               ? " (correct)"
                               : " <span class=\"bad\">(wrong culprit)</span>");
    } else if (e.explained_by_event_id != 0) {
      match = absl::StrCat("part of event ", e.explained_by_event_id);
    } else if (e.unexplained) {
      match = "unexplained (no culprit, nothing mitigated)";
    } else if (e.cleared_unmitigated) {
      match = "cleared by itself (culprit named, no fault injected, nothing mitigated)";
    }
    std::string delay = "-";
    if (e.alarm_delay_iterations >= 0) {
      delay = absl::StrCat(
          e.alarm_delay_iterations, " it",
          e.alarm_delay_s >= 0 ? absl::StrFormat(" / %.1f s", e.alarm_delay_s) : std::string());
    }
    std::string recovered = e.slowdown_recovered.has_value()
                                ? absl::StrFormat("%.0f%%", 100 * *e.slowdown_recovered)
                                : std::string("-");
    if (e.recoverable_ceiling.has_value()) {
      absl::StrAppendFormat(&recovered, " of %s ceiling %.0f%%", e.ceiling_strategy,
                            100 * *e.recoverable_ceiling);
    }
    absl::StrAppend(
        &h, "<tr><td>", e.event_id, "</td><td>", e.state, "</td><td>", e.cause, "</td><td>",
        absl::StrJoin(culprit, ", "), "</td><td>", Cell(e.fault_start_iteration), "</td><td>",
        Cell(e.onset_iteration), "</td><td>", Cell(e.alarm_iteration), "</td><td>", delay,
        "</td><td>", Cell(e.verdict_iteration), "</td><td>",
        e.recovery_iteration >= 0 ? absl::StrCat(e.recovery_iteration) : "not recovered",
        "</td><td>", absl::StrJoin(actions, ", "), "</td><td>", seconds(e.iteration_time_healthy_s),
        "</td><td>", seconds(e.iteration_time_slow_s), "</td><td>",
        seconds(e.iteration_time_mitigated_s), "</td><td>", recovered, "</td><td>", match,
        "</td></tr>\n");
  }
  h += "</table>\n";
  for (const EventReport& e : report.events) {
    for (const std::string& note : e.notes) {
      absl::StrAppend(&h, "<p>Event ", e.event_id, ": ", HtmlEscape(note), ".</p>\n");
    }
  }
  absl::StrAppend(&h, "<p>False alarms: ", report.false_alarms,
                  ". Unexplained slowdowns: ", report.unexplained_slowdowns,
                  ". Cleared by themselves: ", report.cleared_slowdowns,
                  ". Missed faults: ", report.missed_faults.size(),
                  ". Faults not reached before the run ended: ", report.unreached_faults.size(),
                  ". Faults the driver failed to apply: ", report.unapplied_faults.size(),
                  ".</p>\n<h2>Injected faults</h2>\n<ul>\n");
  for (const InjectedFault& f : report.scenario.faults) {
    absl::StrAppend(&h, "<li>", HtmlEscape(f.Describe()), " <code>", HtmlEscape(f.ToSpec()),
                    "</code></li>\n");
  }
  absl::StrAppend(&h, "</ul>\n<h2>Summary</h2>\n<pre>", HtmlEscape(SummaryText(report)),
                  "</pre>\n<p>Data: <a href=\"report.json\">report.json</a>, "
                  "<a href=\"iterations.csv\">iterations.csv</a>, "
                  "<a href=\"timeline.gp\">timeline.gp</a>.</p>\n</body></html>\n");
  return h;
}

absl::Status WriteTextFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status WriteReportFolder(const Report& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  absl::Status first = absl::OkStatus();
  auto keep = [&first](absl::Status s) {
    if (first.ok() && !s.ok()) first = s;
  };
  const std::string csv = absl::StrCat(dir, "/iterations.csv");
  const std::string gp = absl::StrCat(dir, "/timeline.gp");
  keep(WriteTextFile(absl::StrCat(dir, "/report.json"), ReportJson(report).dump(2) + "\n"));
  keep(WriteTextFile(csv, IterationsCsv(report)));
  absl::Status plotted = absl::UnknownError("no plot");
  // The script names its files relative to the folder (`cd DIR && gnuplot timeline.gp` redraws
  // the plot wherever the folder was moved); gnuplot runs it from there.
  for (const char* terminal : {"pngcairo", "png"}) {
    keep(WriteTextFile(gp, GnuplotScript(report, "iterations.csv", "timeline.png", terminal)));
    // The script too is named from inside the folder: a relative `dir` (the demo's default
    // --out) would otherwise be looked for again below itself.
    plotted = RunProgram({"gnuplot", "-e", absl::StrCat("cd ", GnuplotQuote(dir)), "timeline.gp"});
    if (plotted.ok()) break;
  }
  if (!plotted.ok()) {
    keep(absl::Status(plotted.code(), absl::StrCat("timeline.png: ", plotted.message())));
  }
  keep(WriteTextFile(absl::StrCat(dir, "/index.html"), IndexHtml(report, "timeline.png")));
  return first;
}

}  // namespace falcon::deploy::demo
