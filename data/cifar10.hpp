#pragma once
// The CIFAR-10 binary version: cifar-10-batches-bin/data_batch_{1..5}.bin and test_batch.bin,
// each a sequence of records of 1 label byte and 3072 pixel bytes (CHW).
#include <filesystem>
#include <vector>

#include "data/cifar10_files.hpp"
#include "data/cifar10_records.hpp"
#include "data/image_set.hpp"

namespace ddpbench {

struct Cifar10Layout {
  int64_t records_per_file = kCifar10RecordsPerFile;  // the official files; tests write smaller ones
};

/// Reads and checks both splits. Throws InputError naming the file and, for bad content,
/// the record: a missing file, a size that is not the layout's, a label outside 0..9.
DatasetSplits load_cifar10(const std::filesystem::path& data_dir, Cifar10Layout layout = {});

/// Reads one batch file of exactly `records` records.
ImageSet read_cifar10_file(const std::filesystem::path& file, int64_t records);

/// Writes records [first, first + count) of `set` to `file` in the binary record format, atomically.
/// Returns the CRC-32 of what it wrote (a cache's proof of its file).
uint32_t write_records(const std::filesystem::path& file, const ImageSet& set, int64_t first, int64_t count);

/// Writes `splits` as CIFAR-10 binary files into `data_dir/cifar-10-batches-bin`: the
/// train split must hold 5 files' worth of records and the test split one.
void write_cifar10(const std::filesystem::path& data_dir, const DatasetSplits& splits,
                   Cifar10Layout layout = {});

}  // namespace ddpbench
