#pragma once
// A CIFAR-shaped stand-in for timing where CIFAR-10 is absent: uint8 3x32x32 images in 10
// classes, a pure function of the seed, and learnable: each class has its own smooth
// colour pattern, each image shows it shifted, rescaled and brightened, under pixel noise.
#include <cstdint>
#include <string>

#include "data/image_set.hpp"

namespace ddpbench {

struct SyntheticOptions {
  uint64_t seed = 0;
  int64_t train_images = 50000;
  int64_t test_images = 10000;
};

DatasetSplits make_synthetic(const SyntheticOptions& options);

/// How reports name this synthetic set.
std::string make_synthetic_origin(const SyntheticOptions& options);

}  // namespace ddpbench
