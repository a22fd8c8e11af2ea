#include "data/dataset.hpp"

#include <iostream>

#include "data/cifar10.hpp"
#include "data/synthetic.hpp"

namespace ddpbench {

DatasetSplits load_dataset(const RunConfig& config, bool announce) {
  const bool use_cifar = config.dataset == DatasetKind::cifar10 ||
                         (config.dataset == DatasetKind::auto_detect && !find_cifar10(config.data_dir).empty());
  if (use_cifar) return load_cifar10(config.data_dir);
  if (config.dataset == DatasetKind::auto_detect && announce) {
    std::cerr << "ddpbench: no CIFAR-10 under '" << config.data_dir
              << "': using the synthetic dataset (scripts/fetch-cifar10 fetches the real one; "
                 "--dataset synthetic silences this)\n";
  }
  return make_synthetic(SyntheticOptions{config.seed, config.synthetic_train_images, config.synthetic_test_images});
}

}  // namespace ddpbench
