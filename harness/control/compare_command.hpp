#pragma once
// `ddpbench compare`: the CI gate over two result files. No LibTorch.
#include "harness/control/cli.hpp"

namespace ddpbench {

/// 0 no regression, 1 a regression; InputError (2) for unreadable or incomparable files.
int compare_command(const CompareCommand& command);

}  // namespace ddpbench
