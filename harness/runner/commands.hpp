#pragma once
// The subcommands that need LibTorch (compare's is harness/control/compare_command.hpp).
// Each returns the process exit code: 0 ok, 1 a failed row, and throws InputError for bad
// input (exit 2).
#include <string>
#include <vector>

#include "harness/control/cli.hpp"

namespace ddpbench {

int run_command(const RunCommand& command, const std::vector<std::string>& argv);
int list_command();
int sweep_command(const SweepCommand& command, const std::vector<std::string>& argv);

}  // namespace ddpbench
