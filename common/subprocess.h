// Child processes: spawn a program (fork + exec) or a function (fork without exec), optionally in
// a process group of its own and killed when its parent dies; signal it or its group; wait for it
// with or without a timeout; and always reap it (no zombies: a Subprocess that is destroyed while
// its child runs SIGKILLs the child, and its group when it has one, and reaps it).
//
// Shapes:
//   SpawnOptions  argv (argv[0] is the program: a path, or a name looked up in PATH when
//                 search_path), env (nullopt: the caller's environment), cwd ("" : the caller's),
//                 new_process_group, parent_death_signal, cpus, and stdin/stdout/stderr
//                 (Stdio: inherit, /dev/null, a file, a pipe, or stderr into stdout).
//   ExitStatus    how a reaped child ended: exited with a code, or killed by a signal.
//
// Guarantees of Spawn: when it returns OK the child has exec'd the program (a failed exec, chdir,
// dup2, open or affinity call in the child is reported back through a close-on-exec pipe and
// becomes the returned error, the child reaped); stdin/stdout/stderr are set up, the process group
// exists (the child's pid is its id) and PR_SET_PDEATHSIG is armed. The child of Spawn starts with
// an empty signal mask and SIGPIPE at its default action (whatever the caller blocks, e.g. for a
// signalfd, or ignores). The child of SpawnFunction keeps the caller's signal mask and handlers, as
// fork does; it runs `fn` and exits with its return value (_exit: no atexit handlers, no stdio
// flush of the caller's buffers). Only async-signal-safe calls run between fork and exec; argv,
// env and the files are prepared before fork, so a multithreaded caller may Spawn. A function
// child of a multithreaded caller may only do what is safe after fork (its concern, not ours).
// Spawn waits on a close-on-exec pipe: a function child forked meanwhile by another thread holds
// that pipe open until it ends, which delays this Spawn until then (spawn from one thread when
// function children live long).
//
// parent_death_signal: PR_SET_PDEATHSIG, armed in the child and then checked against the caller's
// pid (a caller that died before it was armed makes the child exit 127 at once). Linux delivers
// it when the *thread* that forked ends, so spawn from a thread that outlives the child.
//
// Errors (absl::Status, the message naming the program, or SpawnOptions::name):
//   kInvalidArgument  empty argv / empty name, argv given to SpawnFunction, a Stdio::File without
//                     a path, SameAsStdout for stdin or stdout, a negative CPU;
//   from errno        (absl::ErrnoToStatus: kNotFound for ENOENT, kPermissionDenied for EACCES,
//                     ...) when a file cannot be opened, fork/pipe fail, or the child cannot
//                     chdir, set its affinity or exec the program: "cannot execute 'PROG': REASON",
//                     "cannot open 'PATH' for stdout of 'PROG': REASON", ...;
//   kFailedPrecondition  SignalGroup on a child without a group of its own.
// Signal/Wait on a child already reaped are no-ops returning its ExitStatus / OK.
//
// Thread-compatible: one thread uses a Subprocess at a time. Waiting polls waitpid(WNOHANG) on
// this child's pid only (never waitpid(-1)), so it coexists with other children and other reapers
// of other pids.
#ifndef FALCON_COMMON_SUBPROCESS_H_
#define FALCON_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::common {

// One of the child's standard streams.
struct Stdio {
  enum class Kind {
    kInherit,       // The caller's stream.
    kNull,          // /dev/null.
    kFile,          // `path`, created 0644 if missing; truncated, or appended to when `append`.
    kPipe,          // A pipe whose other end the Subprocess holds (stdin_fd / stdout_fd / ...).
    kSameAsStdout,  // stderr only: where stdout goes (2>&1).
  };
  Kind kind = Kind::kInherit;
  std::string path;
  bool append = false;

  static Stdio Inherit() { return {}; }
  static Stdio Null() { return {Kind::kNull, "", false}; }
  static Stdio File(std::string path, bool append = false) {
    return {Kind::kFile, std::move(path), append};
  }
  static Stdio Pipe() { return {Kind::kPipe, "", false}; }
  static Stdio SameAsStdout() { return {Kind::kSameAsStdout, "", false}; }
};

struct SpawnOptions {
  std::vector<std::string> argv;  // Spawn: non-empty; argv[0] is the program. SpawnFunction: empty.
  std::string name;  // Names the child in errors; "" = argv[0]. SpawnFunction: required.
  std::optional<std::vector<std::string>> env;  // "KEY=VALUE" each; nullopt = the caller's.
  bool search_path = false;        // Look argv[0] up in PATH (of `env`) when it has no '/'.
  std::string cwd;                 // Working directory; "" = the caller's.
  bool new_process_group = false;  // setpgid(0, 0): the child leads a group of id pid().
  int parent_death_signal = 0;     // PR_SET_PDEATHSIG (e.g. SIGKILL); 0 = none.
  std::vector<int> cpus;           // CPU affinity (sched_setaffinity); empty = the caller's.
  Stdio stdin_stream;
  Stdio stdout_stream;
  Stdio stderr_stream;
};

// How a child ended (decoded waitpid status).
class ExitStatus {
 public:
  static ExitStatus Exited(int code) { return ExitStatus(code, 0); }
  static ExitStatus Signaled(int signal) { return ExitStatus(0, signal); }
  // From a waitpid status of an ended child (WIFEXITED or WIFSIGNALED).
  static ExitStatus FromWaitStatus(int status);

  bool exited() const { return signal_ == 0; }
  int code() const { return code_; }      // Exit code, [0, 255]; 0 when signaled.
  int signal() const { return signal_; }  // Terminating signal; 0 when exited.
  bool success() const { return exited() && code_ == 0; }
  // The shell's convention: the exit code, or 128 + signal.
  int ShellCode() const { return exited() ? code_ : 128 + signal_; }
  // "exited with code 3" / "killed by signal 9 (Killed)".
  std::string ToString() const;

  friend bool operator==(const ExitStatus& a, const ExitStatus& b) {
    return a.code_ == b.code_ && a.signal_ == b.signal_;
  }
  friend bool operator!=(const ExitStatus& a, const ExitStatus& b) { return !(a == b); }

 private:
  ExitStatus(int code, int signal) : code_(code), signal_(signal) {}
  int code_;
  int signal_;
};

class Subprocess {
 public:
  // Starts argv[0] with `options` (see the header comment for guarantees and errors).
  static absl::StatusOr<Subprocess> Spawn(const SpawnOptions& options);
  // Forks a child that runs `fn` and _exits with its result. `options.argv`, `env` and
  // `search_path` must be unset; `options.name` names it.
  static absl::StatusOr<Subprocess> SpawnFunction(const SpawnOptions& options,
                                                  absl::FunctionRef<int()> fn);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // A child still running is SIGKILLed (with its group when it has one) and reaped.
  ~Subprocess();

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  bool has_process_group() const { return group_; }

  // The caller's ends of Stdio::Pipe streams (-1 otherwise, or once closed). Owned by this object.
  int stdin_fd() const { return stdin_fd_; }
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  // Closes the stdin pipe (the child reads EOF).
  void CloseStdin();

  // Sends `sig` to the child (no-op once reaped). Errors from kill(2), naming the child.
  absl::Status Signal(int sig);
  // Sends `sig` to the child's process group (kFailedPrecondition without one). Allowed after the
  // child is reaped: it reaches what the child left in its group (Linux does not reuse a pid as a
  // pid while a group of that id has members); no group left is OK.
  absl::Status SignalGroup(int sig);

  // The exit status once the child ended (reaping it), nullopt while it runs. Errors from waitpid.
  absl::StatusOr<std::optional<ExitStatus>> Poll();
  // Blocks until the child ends.
  absl::StatusOr<ExitStatus> Wait();
  // Waits up to `timeout`; nullopt if it still runs then.
  absl::StatusOr<std::optional<ExitStatus>> WaitFor(absl::Duration timeout);
  // Sends `sig` (to the group too when the child has one), waits up to `grace`, then SIGKILLs
  // (group too) and waits. The exit status of the child.
  absl::StatusOr<ExitStatus> Stop(int sig, absl::Duration grace);

  // How the child ended, once reaped.
  const std::optional<ExitStatus>& exit_status() const { return exit_; }

 private:
  Subprocess() = default;
  // fn == nullptr: exec options.argv.
  static absl::StatusOr<Subprocess> Start(const SpawnOptions& options,
                                          const absl::FunctionRef<int()>* fn);
  void CloseFds();
  void KillAndReap();
  void ReapBlocking();  // waitpid(pid, 0); ECHILD (reaped elsewhere) leaves exit_ unset.

  pid_t pid_ = -1;
  std::string name_;
  bool group_ = false;
  std::optional<ExitStatus> exit_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
};

}  // namespace falcon::common

#endif  // FALCON_COMMON_SUBPROCESS_H_
