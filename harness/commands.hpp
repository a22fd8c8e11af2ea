#pragma once
// The subcommands' bodies. Each returns the process exit code: 0 ok, 1 a failed row or a
// regression, and throws InputError for bad input (exit 2). compare_command needs no LibTorch.
#include <string>
#include <vector>

#include "harness/cli.hpp"

namespace ddpbench {

int run_command(const RunCommand& command, const std::vector<std::string>& argv);
int list_command();
/// 0 no regression, 1 a regression; InputError (2) for unreadable or incomparable files.
int compare_command(const CompareCommand& command);
int sweep_command(const SweepCommand& command, const std::vector<std::string>& argv);

}  // namespace ddpbench
