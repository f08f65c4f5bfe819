#include "cli/ctl/args.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace falcon::cli::ctl {
namespace {

using Args = std::vector<std::string>;

Invocation MustParse(const Args& args, const std::string& env = "") {
  auto inv = ParseArgs(args, env);
  EXPECT_TRUE(inv.ok()) << inv.status();
  return inv.ok() ? *inv : Invocation();
}

// The error message of a failed parse (the test fails when it succeeds).
std::string Error(const Args& args, const std::string& env = "") {
  auto inv = ParseArgs(args, env);
  EXPECT_FALSE(inv.ok()) << "parsed: " << inv->command;
  if (inv.ok()) return "";
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(inv.status().message());
}

#define EXPECT_ERROR_NAMES(args, text)                                                             \
  do {                                                                                             \
    const std::string message = Error(args);                                                       \
    EXPECT_TRUE(absl::StrContains(message, text)) << "'" << message << "' does not name " << text; \
  } while (false)

TEST(ParseArgs, GlobalFlagsAnywhereAndDefaults) {
  Invocation a = MustParse({"jobs"});
  EXPECT_EQ(a.command, "jobs");
  EXPECT_EQ(a.controller, "127.0.0.1:7070");
  EXPECT_EQ(a.timeout, absl::Seconds(10));
  EXPECT_FALSE(a.json);
  EXPECT_FALSE(a.help);
  Invocation b = MustParse({"--json", "job", "j1", "--controller", "h:1", "--timeout=500ms"});
  EXPECT_EQ(b.command, "job");
  EXPECT_EQ(b.job, "j1");
  EXPECT_TRUE(b.json);
  EXPECT_EQ(b.controller, "h:1");
  EXPECT_EQ(b.timeout, absl::Milliseconds(500));
  EXPECT_EQ(MustParse({"--timeout", "2.5", "jobs"}).timeout, absl::Milliseconds(2500));
  EXPECT_EQ(MustParse({"settings", "get", "j", "--json"}).json, true);  // Two levels down.
  EXPECT_EQ(MustParse({"jobs", "--controller", "[::1]:7070"}).controller, "[::1]:7070");
}

TEST(ParseArgs, EnvironmentControllerIsTheDefaultAndTheFlagWins) {
  EXPECT_EQ(MustParse({"jobs"}, "env:9").controller, "env:9");
  EXPECT_EQ(MustParse({"jobs", "--controller=flag:1"}, "env:9").controller, "flag:1");
  EXPECT_TRUE(absl::StrContains(Error({"jobs"}, "env:0"), "$FALCON_CONTROLLER"));
}

TEST(ParseArgs, ControllerAddressIsHostColonPortWithAPortInRange) {
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", "h:0"}), "port '0'");
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", "h:65536"}), "port '65536'");
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", "h:-1"}), "--controller");
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", "h:7070x"}), "--controller");
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", "nohost"}), "'nohost'");
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", ":7070"}), "no host");
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller="}), "--controller");
  EXPECT_EQ(MustParse({"jobs", "--controller", "h:65535"}).controller, "h:65535");
  EXPECT_TRUE(CheckControllerAddress("127.0.0.1:1", "x").ok());
  EXPECT_TRUE(absl::StrContains(CheckControllerAddress("h:99999", "ADDR").message(), "ADDR"));
}

TEST(ParseArgs, CommandFlags) {
  Invocation e = MustParse({"events", "--job", "j", "--active", "--limit=5"});
  EXPECT_EQ(e.job, "j");
  EXPECT_TRUE(e.active);
  EXPECT_FALSE(e.watch);
  EXPECT_EQ(e.limit, 5u);
  Invocation w = MustParse({"events", "--watch", "--count", "3"});
  EXPECT_TRUE(w.watch);
  EXPECT_EQ(w.count, 3u);
  EXPECT_EQ(MustParse({"event", "42"}).event_id, 42u);
  Invocation d = MustParse({"directives", "--job=j", "--limit", "7"});
  EXPECT_EQ(d.job, "j");
  EXPECT_EQ(d.limit, 7u);
  Invocation x = MustParse({"export", "j", "--csv", "--out", "f.csv", "--max_points", "10"});
  EXPECT_EQ(x.job, "j");
  EXPECT_EQ(x.out, "f.csv");
  EXPECT_EQ(x.max_points, 10u);  // Snake case accepted.
  EXPECT_EQ(x.from_iteration, 0);
  Invocation x2 = MustParse({"export", "j", "--from", "12", "--max-points=3"});
  EXPECT_EQ(x2.from_iteration, 12);
  EXPECT_EQ(x2.max_points, 3u);
  EXPECT_EQ(MustParse({"export", "j"}).max_points, kDefaultMaxPoints);
  EXPECT_EQ(MustParse({"validate", "j"}).job, "j");
  EXPECT_EQ(MustParse({"plan", "j", "--dry_run"}).plan.job(), "j");
}

TEST(ParseArgs, Settings) {
  Invocation g = MustParse({"settings", "get"});
  EXPECT_EQ(g.command, "settings");
  EXPECT_FALSE(g.settings_set);
  EXPECT_EQ(g.job, "");
  EXPECT_EQ(MustParse({"settings", "get", "j"}).job, "j");
  Invocation s = MustParse({"settings", "set", "j", "dry_run=true", "hazard=0.01"});
  EXPECT_TRUE(s.settings_set);
  EXPECT_EQ(s.job, "j");
  EXPECT_EQ(s.assignments, (Args{"dry_run=true", "hazard=0.01"}));
  Invocation defaults = MustParse({"settings", "set", "dry_run=true"});  // For new jobs.
  EXPECT_EQ(defaults.job, "");
  EXPECT_EQ(defaults.assignments, Args{"dry_run=true"});
  EXPECT_ERROR_NAMES((Args{"settings", "put"}), "put");
  EXPECT_ERROR_NAMES((Args{"settings"}), "get or set");
  EXPECT_ERROR_NAMES((Args{"settings", "set", "j"}), "SETTING is required");
  EXPECT_ERROR_NAMES((Args{"settings", "set", "j", "a=1", "b"}), "b");
  EXPECT_ERROR_NAMES((Args{"settings", "get", "j", "k"}), "k");
  EXPECT_ERROR_NAMES((Args{"settings", "get", "a=1"}), "a=1");
}

TEST(ParseArgs, HelpForms) {
  Invocation top = MustParse({"--help"});
  EXPECT_TRUE(top.help);
  EXPECT_EQ(top.command, "");
  for (const char* command : {"jobs", "job", "events", "event", "directives", "settings",
                              "validate", "plan", "export", "help"}) {
    EXPECT_TRUE(absl::StrContains(top.help_text, command)) << command;
  }
  EXPECT_TRUE(absl::StrContains(top.help_text, "--controller HOST:PORT"));
  EXPECT_TRUE(absl::StrContains(top.help_text, "Exit codes"));
  EXPECT_EQ(MustParse({"-h"}).help_text, top.help_text);
  EXPECT_EQ(MustParse({"help"}).help_text, top.help_text);

  Invocation events = MustParse({"events", "--help"});
  EXPECT_TRUE(events.help);
  EXPECT_EQ(events.command, "events");
  EXPECT_TRUE(absl::StrContains(events.help_text, "Usage: falconctl events"));
  EXPECT_TRUE(absl::StrContains(events.help_text, "--watch"));
  EXPECT_TRUE(absl::StrContains(events.help_text, "Global flags"));
  EXPECT_EQ(MustParse({"help", "events"}).help_text, events.help_text);

  Invocation event = MustParse({"event", "-h"});  // No ID needed with --help.
  EXPECT_TRUE(event.help);
  EXPECT_EQ(event.command, "event");
  EXPECT_TRUE(absl::StrContains(event.help_text, "Usage: falconctl event [OPTIONS] ID"));
  Invocation set = MustParse({"settings", "set", "--help"});
  EXPECT_TRUE(absl::StrContains(set.help_text, "Usage: falconctl settings set"));
  EXPECT_TRUE(absl::StrContains(set.help_text, "KEY=VALUE"));

  auto exp = Usage("export");
  ASSERT_TRUE(exp.ok());
  EXPECT_TRUE(absl::StrContains(*exp, "--out"));
  EXPECT_TRUE(absl::StrContains(*exp, "--max-points"));
  ASSERT_TRUE(Usage("settings get").ok());
  EXPECT_TRUE(absl::StrContains(*Usage("settings get"), "Usage: falconctl settings get"));
  EXPECT_FALSE(Usage("frob").ok());
}

TEST(ParseArgs, ErrorsNameTheOffendingArgument) {
  EXPECT_ERROR_NAMES(Args{}, "no command");
  EXPECT_ERROR_NAMES(Args{"jobz"}, "unknown command 'jobz'");
  EXPECT_ERROR_NAMES((Args{"jobs", "--frob"}), "--frob");
  EXPECT_ERROR_NAMES((Args{"jobs", "--frob"}), "falconctl jobs --help");  // Where to look.
  EXPECT_ERROR_NAMES((Args{"--frob", "jobs"}), "--frob");
  EXPECT_ERROR_NAMES((Args{"jobs", "-x"}), "-x");
  EXPECT_ERROR_NAMES((Args{"jobs", "extra"}), "extra");
  EXPECT_ERROR_NAMES((Args{"jobs", "job"}), "job");  // One command per line.
  EXPECT_ERROR_NAMES(Args{"job"}, "JOB is required");
  EXPECT_ERROR_NAMES((Args{"job", "a", "b"}), "b");
  EXPECT_ERROR_NAMES((Args{"event", "twelve"}), "twelve");
  EXPECT_ERROR_NAMES((Args{"event", "-1"}), "-1");
  EXPECT_ERROR_NAMES((Args{"events", "--limit"}), "--limit");
  EXPECT_ERROR_NAMES((Args{"events", "--limit", "-3"}), "--limit");
  EXPECT_ERROR_NAMES((Args{"events", "--watch", "--count=-1"}), "--count");
  EXPECT_ERROR_NAMES((Args{"events", "--limit", "99999999999"}), "--limit");  // > uint32.
  EXPECT_ERROR_NAMES((Args{"events", "--active=maybe"}), "--active");
  EXPECT_ERROR_NAMES((Args{"events", "--count", "2"}), "--watch");
  EXPECT_ERROR_NAMES((Args{"events", "--watch", "--active"}), "--active");
  EXPECT_ERROR_NAMES((Args{"jobs", "--timeout", "soon"}), "--timeout");
  EXPECT_ERROR_NAMES((Args{"jobs", "--timeout", "0s"}), "--timeout");
  EXPECT_ERROR_NAMES((Args{"jobs", "--timeout", "inf"}), "--timeout");
  EXPECT_ERROR_NAMES((Args{"plan", "j"}), "--dry-run");
  EXPECT_ERROR_NAMES((Args{"export", "j", "--csv", "--json"}), "--csv");
  EXPECT_ERROR_NAMES((Args{"export", "j", "--from", "-1"}), "--from");
  EXPECT_ERROR_NAMES((Args{"export", "j", "--out="}), "--out");
  EXPECT_ERROR_NAMES((Args{"help", "nope"}), "nope");
  EXPECT_ERROR_NAMES((Args{"directives", "--watch"}), "--watch");
}

TEST(ParseArgs, PlanHypotheticalVerdict) {
  Invocation p = MustParse({"plan", "j", "--dry-run", "--cause", "communication",
                            "--slow-links=1-3,2-3", "--slowdown", "1.5"});
  const falcon::v1::DryRunPlanRequest& req = p.plan;
  EXPECT_EQ(req.job(), "j");
  EXPECT_EQ(req.cause(), falcon::v1::CAUSE_COMMUNICATION);
  ASSERT_EQ(req.slow_links_size(), 2);
  EXPECT_EQ(req.slow_links(1).src_rank(), 2u);
  EXPECT_EQ(req.slow_links(1).dst_rank(), 3u);
  EXPECT_DOUBLE_EQ(req.slowdown_ratio(), 1.5);
  Invocation ranks = MustParse({"plan", "j", "--dry-run", "--slow-ranks", "5,6", "--cause=comm"});
  ASSERT_EQ(ranks.plan.slow_ranks_size(), 2);
  EXPECT_EQ(ranks.plan.slow_ranks(1), 6u);
  EXPECT_EQ(ranks.plan.cause(), falcon::v1::CAUSE_COMMUNICATION);
  Invocation nic = MustParse({"plan", "j", "--dry-run", "--slow-nodes=node2,node5"});
  ASSERT_EQ(nic.plan.slow_nodes_size(), 2);
  EXPECT_EQ(nic.plan.slow_nodes(1), "node5");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slow-nodes="}), "--slow-nodes");
  EXPECT_EQ(MustParse({"plan", "j", "--dry-run", "--cause", "compute"}).plan.cause(),
            falcon::v1::CAUSE_COMPUTE);
  Invocation bare = MustParse({"plan", "j", "--dry-run"});  // No hypothesis: nothing set.
  EXPECT_EQ(bare.plan.cause(), falcon::v1::DryRunPlanRequest().cause());
  EXPECT_EQ(bare.plan.slow_ranks_size() + bare.plan.slow_links_size(), 0);
  EXPECT_EQ(bare.plan.slowdown_ratio(), 0);
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--cause", "cosmic"}), "--cause");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slow-links", "1-x"}), "--slow-links");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slow-links", "13"}), "'13'");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slow-links", "1-99999999999"}),
                     "--slow-links");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slow-ranks", "a"}), "--slow-ranks");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slow-ranks", "1,-1"}), "'-1'");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slowdown", "0.5"}), "--slowdown");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slowdown", "nan"}), "--slowdown");
}

// Integers are decimal and within their type: CLI11 alone read "010" as octal 8 and clamped
// 99999999999999999999 to 2^64 - 1 (the hand-written parser before it wrapped --limit 4294967297
// to 1).
TEST(ParseArgs, IntegersAreDecimalAndRangeChecked) {
  EXPECT_EQ(Error({"events", "--limit", "4294967297"}),
            "--limit: '4294967297' is not an integer in [0, 4294967295] (see: falconctl events "
            "--help)");
  EXPECT_EQ(MustParse({"events", "--limit", "4294967295"}).limit, 4294967295u);
  EXPECT_EQ(MustParse({"events", "--limit", "010"}).limit, 10u);
  EXPECT_EQ(MustParse({"directives", "--limit=0008"}).limit, 8u);
  EXPECT_ERROR_NAMES((Args{"events", "--limit", "0x10"}), "--limit: '0x10' is not an integer");
  EXPECT_ERROR_NAMES((Args{"event", "99999999999999999999"}),
                     "'99999999999999999999' is not an integer in [0, 18446744073709551615]");
  EXPECT_EQ(MustParse({"event", "18446744073709551615"}).event_id, UINT64_MAX);
  EXPECT_ERROR_NAMES((Args{"events", "--watch", "--count", "18446744073709551616"}), "--count");
  EXPECT_ERROR_NAMES((Args{"export", "j", "--from", "9223372036854775808"}),
                     "--from: '9223372036854775808' is not an integer in [0, 9223372036854775807]");
  EXPECT_EQ(MustParse({"export", "j", "--from", "9223372036854775807"}).from_iteration, INT64_MAX);
  EXPECT_ERROR_NAMES((Args{"export", "j", "--max-points", "4294967296"}), "--max-points");
  EXPECT_ERROR_NAMES((Args{"plan", "j", "--dry-run", "--slow-ranks", "1,4294967296"}),
                     "--slow-ranks: '4294967296' is not an integer in [0, 4294967295]");
  EXPECT_EQ(
      MustParse({"plan", "j", "--dry-run", "--slow-ranks", "07,4294967295"}).plan.slow_ranks(0),
      7u);
}

// A job name that is not one (a non-UTF-8 one made protobuf log an error and send it anyway).
TEST(ParseArgs, JobNamesFollowTheRule) {
  EXPECT_ERROR_NAMES((Args{"job", "\xff"}),
                     "JOB: '\\xff' is not a job name (1 to 128 bytes of [A-Za-z0-9._-])");
  EXPECT_ERROR_NAMES((Args{"job", ""}), "JOB: '' is not a job name");
  EXPECT_ERROR_NAMES((Args{"export", "a b"}), "'a b' is not a job name");
  EXPECT_ERROR_NAMES((Args{"events", "--job", std::string(129, 'j')}), "--job");
  EXPECT_ERROR_NAMES((Args{"directives", "--job="}), "--job");
  EXPECT_ERROR_NAMES((Args{"validate", "j/k"}), "'j/k' is not a job name");
  EXPECT_EQ(MustParse({"settings", "get", "job-1.a_b"}).job, "job-1.a_b");
}

TEST(ParseArgs, ControllerHostIsChecked) {
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", "a b:7070"}),
                     "--controller: 'a b:7070': host 'a b' is not a DNS name");
  EXPECT_ERROR_NAMES((Args{"jobs", "--controller", "127.0.0.1:99999"}),
                     "--controller: '127.0.0.1:99999': port '99999' is not in [1, 65535]");
}

TEST(ParseTimeout, NamesWhatIsWrong) {
  EXPECT_EQ(*ParseTimeout("1m", "t"), absl::Minutes(1));
  EXPECT_EQ(*ParseTimeout("2.5", "t"), absl::Milliseconds(2500));
  EXPECT_FALSE(ParseTimeout("inf", "t").ok());
  EXPECT_FALSE(ParseTimeout("-1s", "t").ok());
  EXPECT_TRUE(
      absl::StrContains(ParseTimeout("soon", "--timeout").status().message(), "--timeout: 'soon'"));
}

}  // namespace
}  // namespace falcon::cli::ctl
