#pragma once
// The dataset a row trains on, as --dataset chooses it.
#include "data/image_set.hpp"
#include "harness/run_config.hpp"

namespace ddpbench {

/// cifar10: the binary files under --data-dir (InputError when absent or corrupt);
/// synthetic: the generated stand-in; auto: CIFAR-10 where found, else synthetic with a
/// warning on stderr (when `announce`: one rank says it for all). The result says which.
DatasetSplits load_dataset(const RunConfig& config, bool announce = true);

}  // namespace ddpbench
