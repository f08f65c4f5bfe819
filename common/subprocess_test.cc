#include "common/subprocess.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace falcon::common {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Everything readable from `fd` until EOF.
std::string ReadAll(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

// Gone: no such process, or a zombie waiting for a parent that is not us.
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] == 'Z';
}

bool GoneWithin(pid_t pid, absl::Duration d) {
  const absl::Time deadline = absl::Now() + d;
  while (!Gone(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST(ExitStatusTest, DecodesAndDescribes) {
  EXPECT_EQ(ExitStatus::Exited(3).ToString(), "exited with code 3");
  EXPECT_EQ(ExitStatus::Signaled(SIGKILL).ToString(), "killed by signal 9 (Killed)");
  EXPECT_EQ(ExitStatus::Signaled(SIGTERM).ShellCode(), 128 + SIGTERM);
  EXPECT_EQ(ExitStatus::Exited(4).ShellCode(), 4);
  EXPECT_TRUE(ExitStatus::Exited(0).success());
  EXPECT_FALSE(ExitStatus::Signaled(SIGINT).success());
  EXPECT_FALSE(ExitStatus::Signaled(SIGINT).exited());
}

TEST(SubprocessTest, ExitCodeAndSignalAreValues) {
  auto p = Subprocess::Spawn(Shell("exit 3"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait().value(), ExitStatus::Exited(3));
  EXPECT_EQ(p->exit_status(), ExitStatus::Exited(3));
  EXPECT_EQ(p->Wait().value(), ExitStatus::Exited(3));  // Reaped once, remembered.
  auto k = Subprocess::Spawn(Shell("kill -9 $$"));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->Wait().value(), ExitStatus::Signaled(SIGKILL));
}

TEST(SubprocessTest, ExecFailuresAreErrorsNamingTheProgram) {
  SpawnOptions o;
  o.argv = {"/no/such/program"};
  auto missing = Subprocess::Spawn(o);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(),
                                "cannot execute '/no/such/program': No such file or directory"))
      << missing.status();
  o.argv = {TempDir()};  // A directory.
  auto dir = Subprocess::Spawn(o);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kPermissionDenied) << dir.status();
  o.argv = {"sh", "-c", "exit 5"};  // No '/': found only through PATH.
  EXPECT_EQ(Subprocess::Spawn(o).status().code(), absl::StatusCode::kNotFound);
  o.search_path = true;
  auto found = Subprocess::Spawn(o);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->Wait().value(), ExitStatus::Exited(5));
}

TEST(SubprocessTest, BadOptionsAreRejected) {
  EXPECT_EQ(Subprocess::Spawn(SpawnOptions{}).status().code(), absl::StatusCode::kInvalidArgument);
  SpawnOptions o = Shell("true");
  o.stdout_stream = Stdio::SameAsStdout();
  EXPECT_EQ(Subprocess::Spawn(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Shell("true");
  o.stdout_stream = Stdio::File("");
  EXPECT_EQ(Subprocess::Spawn(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Shell("true");
  o.stdout_stream = Stdio::File("/no/such/dir/out.log");
  absl::Status s = Subprocess::Spawn(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "'/no/such/dir/out.log' for stdout of '/bin/sh'"))
      << s;
  o = Shell("true");
  o.cwd = "/no/such/dir";
  s = Subprocess::Spawn(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "cannot enter '/no/such/dir' for '/bin/sh'")) << s;
  EXPECT_EQ(Subprocess::SpawnFunction(Shell("true"), [] { return 0; }).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Subprocess::SpawnFunction(SpawnOptions{}, [] { return 0; }).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SubprocessTest, EnvCwdAndPipes) {
  SpawnOptions o = Shell("read line; echo \"$line $FOO $(pwd)\"; echo oops >&2");
  o.env = std::vector<std::string>{"FOO=bar"};
  o.cwd = "/";
  o.stdin_stream = Stdio::Pipe();
  o.stdout_stream = Stdio::Pipe();
  o.stderr_stream = Stdio::Pipe();
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(write(p->stdin_fd(), "hi\n", 3), 3);
  p->CloseStdin();
  EXPECT_EQ(p->stdin_fd(), -1);
  EXPECT_EQ(ReadAll(p->stdout_fd()), "hi bar /\n");
  EXPECT_EQ(ReadAll(p->stderr_fd()), "oops\n");
  EXPECT_TRUE(p->Wait()->success());
}

TEST(SubprocessTest, FileStreamsTruncateOrAppendAndMergeStderr) {
  const std::string log = TempDir() + "/merge.log";
  std::ofstream(log) << "old\n";
  SpawnOptions o = Shell("echo out; echo err >&2");
  o.stdout_stream = Stdio::File(log);
  o.stderr_stream = Stdio::SameAsStdout();
  o.stdin_stream = Stdio::Null();
  ASSERT_TRUE(Subprocess::Spawn(o)->Wait()->success());
  EXPECT_EQ(ReadFile(log), "out\nerr\n");
  o.stdout_stream = Stdio::File(log, /*append=*/true);
  ASSERT_TRUE(Subprocess::Spawn(o)->Wait()->success());
  EXPECT_EQ(ReadFile(log), "out\nerr\nout\nerr\n");
}

TEST(SubprocessTest, WaitForTimesOutAndStopEscalates) {
  auto p = Subprocess::Spawn(Shell("exec sleep 30"));
  ASSERT_TRUE(p.ok()) << p.status();
  const absl::Time start = absl::Now();
  auto waited = p->WaitFor(absl::Milliseconds(100));
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_FALSE(waited->has_value());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_FALSE(p->Poll()->has_value());
  EXPECT_EQ(p->Stop(SIGTERM, absl::Seconds(10)).value(), ExitStatus::Signaled(SIGTERM));
  EXPECT_TRUE(p->Signal(SIGTERM).ok());  // Reaped: a no-op.

  // A child that ignores SIGTERM is SIGKILLed after the grace.
  auto stubborn = Subprocess::Spawn(Shell("trap '' TERM; echo up; sleep 30 & wait; wait"));
  ASSERT_TRUE(stubborn.ok());
  absl::SleepFor(absl::Milliseconds(200));  // Let it install the trap.
  EXPECT_EQ(stubborn->Stop(SIGTERM, absl::Milliseconds(200)).value(),
            ExitStatus::Signaled(SIGKILL));
}

TEST(SubprocessTest, ProcessGroupTakesTheChildsChildren) {
  SpawnOptions o = Shell("sleep 30 & echo $!; wait");
  o.new_process_group = true;
  o.stdout_stream = Stdio::Pipe();
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(getpgid(p->pid()), p->pid());
  std::string line;
  char c;
  while (read(p->stdout_fd(), &c, 1) == 1 && c != '\n') line += c;
  int grandchild = 0;
  ASSERT_TRUE(absl::SimpleAtoi(line, &grandchild)) << line;
  EXPECT_EQ(p->Stop(SIGTERM, absl::Seconds(10)).value(), ExitStatus::Signaled(SIGTERM));
  EXPECT_TRUE(GoneWithin(grandchild, absl::Seconds(10)));
  EXPECT_TRUE(p->SignalGroup(SIGKILL).ok());  // Nothing left in the group: fine.

  auto lone = Subprocess::Spawn(Shell("true"));
  EXPECT_EQ(lone->SignalGroup(SIGTERM).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SubprocessTest, DestructorKillsAndReaps) {
  pid_t pid = -1;
  {
    auto p = Subprocess::Spawn(Shell("exec sleep 30"));
    ASSERT_TRUE(p.ok());
    pid = p->pid();
    Subprocess moved = std::move(*p);  // The moved-from object owns nothing.
    EXPECT_EQ(moved.pid(), pid);
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, WNOHANG), -1);  // Reaped already: not our child any more.
  EXPECT_EQ(errno, ECHILD);
}

TEST(SubprocessTest, FunctionChildExitsWithItsResult) {
  SpawnOptions o;
  o.name = "seven";
  auto p = Subprocess::SpawnFunction(o, [] { return 7; });
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name(), "seven");
  EXPECT_EQ(p->Wait().value(), ExitStatus::Exited(7));
}

TEST(SubprocessTest, ParentDeathSignalKillsTheChildWhenItsParentDies) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  SpawnOptions o;
  o.name = "middle";
  auto middle = Subprocess::SpawnFunction(o, [&]() -> int {
    SpawnOptions g = Shell("exec sleep 30");
    g.parent_death_signal = SIGKILL;
    auto grandchild = Subprocess::Spawn(g);
    if (!grandchild.ok()) _exit(1);
    const pid_t pid = grandchild->pid();
    (void)!write(fds[1], &pid, sizeof(pid));
    _exit(0);  // No destructors: only the death signal can take the grandchild.
  });
  ASSERT_TRUE(middle.ok()) << middle.status();
  close(fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(read(fds[0], &grandchild, sizeof(grandchild)), static_cast<ssize_t>(sizeof(pid_t)));
  close(fds[0]);
  EXPECT_TRUE(middle->Wait()->success());
  EXPECT_TRUE(GoneWithin(grandchild, absl::Seconds(10)));
}

}  // namespace
}  // namespace falcon::common
