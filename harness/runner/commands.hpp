#pragma once
// The subcommands that need LibTorch (compare's is harness/control/compare_command.hpp).
// Each returns the process exit code: 0 ok, 1 a failed row, and throws InputError for bad
// input (exit 2).
#include <string>
#include <vector>

#include "harness/control/cli.hpp"

namespace ddpbench {

/// What only LibTorch's side knows of a row's input, before anything is made: the model is one
/// of the build's, and --init-from a checkpoint of that model (names and shapes); a rank that
/// found otherwise left the row's folders and the synthetic cache behind. Throws InputError.
void check_model_inputs(const RunConfig& config);

int run_command(const RunCommand& command, const std::vector<std::string>& argv);
int list_command();
int sweep_command(const SweepCommand& command, const std::vector<std::string>& argv);

}  // namespace ddpbench
