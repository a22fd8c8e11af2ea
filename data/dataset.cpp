#include "data/dataset.hpp"

#include <iostream>

#include "data/cifar10.hpp"
#include "data/synthetic.hpp"

namespace ddpbench {

DatasetSplits load_dataset(const DatasetOptions& options, bool announce) {
  const bool use_cifar = options.kind == DatasetKind::cifar10 ||
                         (options.kind == DatasetKind::auto_detect && !find_cifar10(options.data_dir).empty());
  if (use_cifar) return load_cifar10(options.data_dir);
  if (options.kind == DatasetKind::auto_detect && announce) {
    std::cerr << "ddpbench: no CIFAR-10 under '" << options.data_dir
              << "': using the synthetic dataset (scripts/fetch-cifar10 fetches the real one; "
                 "--dataset synthetic silences this)\n";
  }
  return make_synthetic(SyntheticOptions{options.seed, options.synthetic_train_images, options.synthetic_test_images});
}

}  // namespace ddpbench
