#pragma once
// Image classification data as loaded: whole splits held as uint8 tensors.
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

#include "data/cifar10_records.hpp"  // kCifar10Classes

namespace ddpbench {

inline constexpr int64_t kImageChannels = 3;
inline constexpr int64_t kImageSide = 32;
inline constexpr int64_t kImageBytes = kImageChannels * kImageSide * kImageSide;  // 3072, CHW
static_assert(kImageBytes == kCifar10PixelBytes);

struct ImageSet {
  at::Tensor images;  // uint8 [N, 3, 32, 32], CHW as CIFAR stores it
  at::Tensor labels;  // int64 [N], in [0, 10)
  [[nodiscard]] int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

struct DatasetSplits {
  ImageSet train;
  ImageSet test;
  std::string kind;    // "cifar10" or "synthetic", as reports name it
  std::string origin;  // the folder read, or the synthetic seed and sizes
};

}  // namespace ddpbench
