#pragma once
// What makes two result files comparable: the machine and the software stack a row's
// numbers depend on. Two files whose fingerprints differ measured different things, and the
// CI gate refuses them (exit 2) unless told otherwise. No LibTorch.
#include <string>
#include <vector>

#include "reports/run_result.hpp"

namespace ddpbench {

/// Each way `current` differs from `baseline`, one phrase each ("GPU count: 1 vs 2",
/// "CPU model: AMD EPYC vs Intel Xeon", "NCCL: 2.28.9 vs 2.27.3"): GPU count and every GPU's
/// name, CPU model and core count, LibTorch, CUDA, cuDNN and NCCL versions, the driver.
/// Empty when they match. Host name, OS, compiler and git revision are not compared: they
/// change between runs of one gate without changing what is measured.
std::vector<std::string> environment_differences(const Environment& baseline, const Environment& current);

}  // namespace ddpbench
