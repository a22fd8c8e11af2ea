#pragma once
// The subcommands' bodies. Each returns the process exit code: 0 ok, 1 a failed row,
// and throws InputError for bad input (exit 2).
#include <string>
#include <vector>

#include "harness/cli.hpp"

namespace ddpbench {

int run_command(const RunCommand& command, const std::vector<std::string>& argv);
int list_command();

}  // namespace ddpbench
