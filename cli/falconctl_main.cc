// falconctl: Falcon's operator CLI (`./falcon ctl`). See cli/ctl/README.md and `falconctl --help`.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/ctl/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const char* env = std::getenv("FALCON_CONTROLLER");
  return falcon::cli::ctl::Main(args, env == nullptr ? "" : env, std::cout, std::cerr);
}
