// glog set-up shared by Falcon's daemons and tools. Every binary logs with glog to stderr (so
// journald keeps the lines under systemd; no log files), and takes the verbosity of VLOG(n) detail
// as the Abseil flag --v=N (also `-v N`), forwarded to glog's own FLAGS_v.
//
//   absl::ParseCommandLine(argc, argv);
//   falcon::common::logging::InitLogging(argv[0]);
//   LOG(INFO) << "event opened job=" << job << " event=" << id << " rank=" << rank;
//
// Daemon log lines: one line per state change an operator would ask about,
// `<what happened> job=<job> event=<id> [rank=<r> | link=<a>-><b>] [key=value ...]`; LOG(WARNING)
// for handled errors, VLOG(1..2) for detail.
#ifndef FALCON_COMMON_LOGGING_LOGGING_H_
#define FALCON_COMMON_LOGGING_LOGGING_H_

namespace falcon::common::logging {

// One line for a tool's usage text: how to set the verbosity and where the log goes.
inline constexpr char kLoggingUsage[] =
    "Logging: glog lines on stderr; --v=N (or -v N) adds VLOG(N) detail (default 0).\n";

// Initializes glog once per process (later calls only update the verbosity): stderr only,
// glog's FLAGS_v from the Abseil flag --v, `program` as the log's program name. Call after
// absl::ParseCommandLine. (The Abseil flag is defined in logging_flags.cc, a file that does not
// include glog: both define a variable named FLAGS_v, in different namespaces.)
void InitLogging(const char* program);

}  // namespace falcon::common::logging

#endif  // FALCON_COMMON_LOGGING_LOGGING_H_
