// falconctl's commands over a Control stub: each runs its RPC(s) with the invocation's deadline,
// prints a table (or one JSON document with --json) to `out` and errors to `err`, and returns the
// process exit code:
//   0 ok; 1 NOT_FOUND; 2 usage or INVALID_ARGUMENT/OUT_OF_RANGE (bad settings key or value, bad
//   --out file); 3 the controller cannot be reached, the deadline passed, UNIMPLEMENTED, or any
//   other server error.
#ifndef FALCON_CLI_CTL_COMMANDS_H_
#define FALCON_CLI_CTL_COMMANDS_H_

#include <grpcpp/grpcpp.h>

#include <ostream>

#include "cli/ctl/args.h"
#include "proto/falcon/v1/control.grpc.pb.h"

namespace falcon::cli::ctl {

constexpr int kExitOk = 0;
constexpr int kExitNotFound = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnavailable = 3;
constexpr int kExitDenied = 4;  // PERMISSION_DENIED / UNAUTHENTICATED: the identity, not an outage.

// The exit code for a failed RPC.
int ExitCodeFor(grpc::StatusCode code);

// Runs `inv` (already parsed; not a help request) against `stub`.
int RunCommand(const Invocation& inv, falcon::v1::Control::StubInterface& stub, std::ostream& out,
               std::ostream& err);

// Parses, connects to --controller and runs: the whole program. `env_controller` is
// $FALCON_CONTROLLER (or empty).
int Main(const std::vector<std::string>& args, const std::string& env_controller, std::ostream& out,
         std::ostream& err);

}  // namespace falcon::cli::ctl

#endif  // FALCON_CLI_CTL_COMMANDS_H_
