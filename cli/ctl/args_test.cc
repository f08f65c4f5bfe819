#include "cli/ctl/args.h"

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
std::string Error(const Args& args) {
  auto inv = ParseArgs(args, "");
  EXPECT_FALSE(inv.ok()) << "parsed: " << inv->command;
  if (inv.ok()) return "";
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(inv.status().message());
}

TEST(ParseArgs, GlobalFlagsAnywhereAndDefaults) {
  Invocation a = MustParse({"jobs"});
  EXPECT_EQ(a.command, "jobs");
  EXPECT_EQ(a.controller, "127.0.0.1:7070");
  EXPECT_EQ(a.timeout, absl::Seconds(10));
  EXPECT_FALSE(a.json);
  Invocation b = MustParse({"--json", "job", "j1", "--controller", "h:1", "--timeout=500ms"});
  EXPECT_EQ(b.command, "job");
  EXPECT_EQ(b.positional, Args{"j1"});
  EXPECT_TRUE(b.json);
  EXPECT_EQ(b.controller, "h:1");
  EXPECT_EQ(b.timeout, absl::Milliseconds(500));
  EXPECT_EQ(MustParse({"--timeout", "2.5", "jobs"}).timeout, absl::Milliseconds(2500));
}

TEST(ParseArgs, EnvironmentControllerIsTheDefaultAndTheFlagWins) {
  EXPECT_EQ(MustParse({"jobs"}, "env:9").controller, "env:9");
  EXPECT_EQ(MustParse({"jobs", "--controller=flag:1"}, "env:9").controller, "flag:1");
}

TEST(ParseArgs, CommandFlags) {
  Invocation e = MustParse({"events", "--job", "j", "--active", "--limit=5"});
  EXPECT_EQ(e.Flag("job"), "j");
  EXPECT_TRUE(e.Has("active"));
  EXPECT_EQ(e.Flag("limit"), "5");
  Invocation w = MustParse({"events", "--watch", "--count", "3"});
  EXPECT_TRUE(w.Has("watch"));
  EXPECT_EQ(w.Flag("count"), "3");
  Invocation x = MustParse({"export", "j", "--csv", "--out", "f.csv", "--max_points", "10"});
  EXPECT_EQ(x.positional, Args{"j"});
  EXPECT_EQ(x.Flag("out"), "f.csv");
  EXPECT_EQ(x.Flag("max-points"), "10");  // Snake case accepted.
  EXPECT_TRUE(MustParse({"plan", "j", "--dry_run"}).Has("dry-run"));
}

TEST(ParseArgs, Settings) {
  Invocation g = MustParse({"settings", "get"});
  EXPECT_EQ(g.positional, Args{"get"});
  Invocation gj = MustParse({"settings", "get", "j"});
  EXPECT_EQ(gj.positional, (Args{"get", "j"}));
  Invocation s = MustParse({"settings", "set", "j", "dry_run=true", "hazard=0.01"});
  EXPECT_EQ(s.positional.size(), 4u);
  MustParse({"settings", "set", "dry_run=true"});  // Defaults for new jobs.
  EXPECT_NE(Error({"settings", "put"}).find("'put'"), std::string::npos);
  EXPECT_NE(Error({"settings", "set", "j"}).find("no KEY=VALUE"), std::string::npos);
  EXPECT_NE(Error({"settings", "set", "j", "a=1", "b"}).find("'b'"), std::string::npos);
  EXPECT_NE(Error({"settings", "get", "j", "k"}).find("'k'"), std::string::npos);
}

TEST(ParseArgs, HelpForms) {
  EXPECT_TRUE(MustParse({"help"}).help);
  EXPECT_EQ(MustParse({"--help"}).command, "help");
  Invocation h = MustParse({"help", "events"});
  EXPECT_TRUE(h.help);
  EXPECT_EQ(h.command, "events");
  Invocation hh = MustParse({"event", "-h"});  // No ID needed with --help.
  EXPECT_TRUE(hh.help);
  EXPECT_EQ(hh.command, "event");
  EXPECT_NE(Usage().find("directives"), std::string::npos);
  EXPECT_NE(Usage("export").find("--out"), std::string::npos);
}

TEST(ParseArgs, ErrorsNameTheOffendingArgument) {
  EXPECT_NE(Error({}).find("no command"), std::string::npos);
  EXPECT_NE(Error({"jobz"}).find("'jobz'"), std::string::npos);
  EXPECT_NE(Error({"jobs", "--frob"}).find("'--frob'"), std::string::npos);
  EXPECT_NE(Error({"--frob", "jobs"}).find("'--frob'"), std::string::npos);
  EXPECT_NE(Error({"jobs", "-x"}).find("'-x'"), std::string::npos);
  EXPECT_NE(Error({"jobs", "extra"}).find("'extra'"), std::string::npos);
  EXPECT_NE(Error({"job"}).find("missing argument"), std::string::npos);
  EXPECT_NE(Error({"events", "--limit"}).find("--limit needs a value"), std::string::npos);
  EXPECT_NE(Error({"events", "--limit", "-3"}).find("--limit"), std::string::npos);
  EXPECT_NE(Error({"events", "--active=yes"}).find("--active"), std::string::npos);
  EXPECT_NE(Error({"events", "--count", "2"}).find("--watch"), std::string::npos);
  EXPECT_NE(Error({"events", "--watch", "--active"}).find("--active"), std::string::npos);
  EXPECT_NE(Error({"jobs", "--timeout", "soon"}).find("--timeout"), std::string::npos);
  EXPECT_NE(Error({"jobs", "--timeout", "0s"}).find("--timeout"), std::string::npos);
  EXPECT_NE(Error({"jobs", "--controller="}).find("--controller"), std::string::npos);
  EXPECT_NE(Error({"plan", "j"}).find("--dry-run"), std::string::npos);
  EXPECT_NE(Error({"export", "j", "--csv", "--json"}).find("--csv"), std::string::npos);
  EXPECT_NE(Error({"help", "nope"}).find("'nope'"), std::string::npos);
  EXPECT_NE(Error({"directives", "--watch"}).find("'--watch'"), std::string::npos);
}

TEST(ParseArgs, PlanHypotheticalVerdict) {
  Invocation p = MustParse({"plan", "j", "--dry-run", "--cause", "communication",
                            "--slow-links=1-3,2-3", "--slowdown", "1.5"});
  falcon::v1::DryRunPlanRequest req;
  ASSERT_TRUE(ApplyPlanFlags(p, &req).ok());
  EXPECT_EQ(req.cause(), falcon::v1::CAUSE_COMMUNICATION);
  ASSERT_EQ(req.slow_links_size(), 2);
  EXPECT_EQ(req.slow_links(1).src_rank(), 2u);
  EXPECT_EQ(req.slow_links(1).dst_rank(), 3u);
  EXPECT_DOUBLE_EQ(req.slowdown_ratio(), 1.5);
  falcon::v1::DryRunPlanRequest ranks;
  ASSERT_TRUE(
      ApplyPlanFlags(MustParse({"plan", "j", "--dry-run", "--slow-ranks", "5,6"}), &ranks).ok());
  EXPECT_EQ(ranks.slow_ranks_size(), 2);
  EXPECT_NE(Error({"plan", "j", "--dry-run", "--cause", "cosmic"}).find("--cause"),
            std::string::npos);
  EXPECT_NE(Error({"plan", "j", "--dry-run", "--slow-links", "1-x"}).find("--slow-links"),
            std::string::npos);
  EXPECT_NE(Error({"plan", "j", "--dry-run", "--slow-links", "13"}).find("'13'"),
            std::string::npos);
  EXPECT_NE(Error({"plan", "j", "--dry-run", "--slow-ranks", "a"}).find("--slow-ranks"),
            std::string::npos);
  EXPECT_NE(Error({"plan", "j", "--dry-run", "--slowdown", "0.5"}).find("--slowdown"),
            std::string::npos);
}

TEST(ParseNumbers, NameWhatIsWrong) {
  EXPECT_EQ(*ParseUint("42", "x"), 42u);
  EXPECT_FALSE(ParseUint("-1", "x").ok());
  EXPECT_FALSE(ParseUint("", "x").ok());
  EXPECT_NE(ParseUint("4x", "event ID").status().message().find("event ID"), std::string::npos);
  EXPECT_EQ(*ParseInt("-7", "x"), -7);
  EXPECT_FALSE(ParseInt("7.5", "x").ok());
  EXPECT_EQ(*ParseTimeout("1m", "t"), absl::Minutes(1));
  EXPECT_FALSE(ParseTimeout("inf", "t").ok());
  EXPECT_FALSE(ParseTimeout("-1s", "t").ok());
}

}  // namespace
}  // namespace falcon::cli::ctl
