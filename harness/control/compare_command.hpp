#pragma once
// `ddpbench compare`: the CI gate over two result files. No LibTorch.
#include "harness/control/cli.hpp"

namespace ddpbench {

/// 0 no regression, 1 a regression, 2 cannot judge (the table printed, the reasons listed);
/// InputError (2) for unreadable, unproven or incomparable files.
int compare_command(const CompareCommand& command);

}  // namespace ddpbench
