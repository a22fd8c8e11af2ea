#pragma once
// What the data layer is asked for: which dataset and how it is loaded. LibTorch-free, so
// the command line can name these choices and build the options without LibTorch.
#include <cstdint>
#include <string>

#include "harness/base/enum_names.hpp"

namespace ddpbench {

enum class DatasetKind { cifar10, synthetic, auto_detect };
enum class LoaderKind { host, device };

inline constexpr EnumName<DatasetKind> kDatasetKindNames[] = {
    {DatasetKind::cifar10, "cifar10"},
    {DatasetKind::synthetic, "synthetic"},
    {DatasetKind::auto_detect, "auto"},
};
inline constexpr EnumName<LoaderKind> kLoaderKindNames[] = {
    {LoaderKind::host, "host"},
    {LoaderKind::device, "device"},
};

/// The dataset of a row: CIFAR-10's binary files under `data_dir`, the synthetic stand-in,
/// or CIFAR-10 where found and synthetic otherwise.
struct DatasetOptions {
  DatasetKind kind = DatasetKind::auto_detect;
  std::string data_dir = "data";
  uint64_t seed = 0;  // the synthetic set's content
  int64_t synthetic_train_images = 50000;
  int64_t synthetic_test_images = 10000;
  std::string cache_dir;  // where the synthetic set is kept as record files; empty: in memory only
};

}  // namespace ddpbench
