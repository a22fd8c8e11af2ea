#pragma once
// The dataset a row trains on, as --dataset chooses it, in memory or as the files it is read
// from (which PyTorch's reference rows read too).
#include <filesystem>
#include <string>
#include <vector>

#include "data/data_options.hpp"
#include "data/image_set.hpp"

namespace ddpbench {

/// cifar10: the binary files under data_dir (InputError when absent or corrupt);
/// synthetic: the generated stand-in, read from the cache's record files when a cache_dir
/// is set; auto: CIFAR-10 where found, else synthetic with a warning on stderr (when
/// `announce`: one rank says it for all). The result says which.
DatasetSplits load_dataset(const DatasetOptions& options, bool announce = true);

/// A dataset as files of CIFAR-10's binary records (1 label byte, 3072 pixel bytes).
struct DatasetFiles {
  std::vector<std::filesystem::path> train;
  std::vector<std::filesystem::path> test;
  std::string kind;    // cifar10 | synthetic
  std::string origin;
};

/// The files `options` names: CIFAR-10's batches, or the synthetic set written into `cache_dir`
/// (atomically, so ranks may race), keyed by generator version, seed and sizes (synthetic_files).
/// Throws InputError as load_dataset does, and when synthetic data has no cache_dir.
DatasetFiles dataset_files(const DatasetOptions& options, bool announce = true);

/// The synthetic set's files in `cache_dir`, proven: each file's size and CRC-32 as the cache
/// wrote them (crc32.txt beside them). A file cut short, damaged (zeroed, edited) or without a
/// checksum is regenerated, never read, and said on stderr where `announce`: "'train.bin' is
/// truncated: ...; regenerated". Throws InputError without a cache_dir.
DatasetFiles synthetic_files(const DatasetOptions& options, bool announce = true);

}  // namespace ddpbench
