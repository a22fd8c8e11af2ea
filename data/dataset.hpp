#pragma once
// The dataset a row trains on, as --dataset chooses it.
#include "data/data_options.hpp"
#include "data/image_set.hpp"

namespace ddpbench {

/// cifar10: the binary files under data_dir (InputError when absent or corrupt);
/// synthetic: the generated stand-in; auto: CIFAR-10 where found, else synthetic with a
/// warning on stderr (when `announce`: one rank says it for all). The result says which.
DatasetSplits load_dataset(const DatasetOptions& options, bool announce = true);

}  // namespace ddpbench
