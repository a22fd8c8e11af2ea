#pragma once
// Where CIFAR-10's binary version lies and whether its files are whole: data_batch_{1..5}.bin and
// test_batch.bin, each 10,000 records of 3,073 bytes, in cifar-10-batches-bin/ under --data-dir (or
// in --data-dir itself). Header-only and LibTorch-free, so that the one check of a row's
// configuration (harness/control/row_check.hpp) finds what the reader will read, before any work.
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "data/cifar10_records.hpp"

namespace ddpbench {

inline constexpr const char* kCifar10Folder = "cifar-10-batches-bin";
inline constexpr int64_t kCifar10TrainFiles = 5;
inline constexpr int64_t kCifar10RecordsPerFile = 10000;  // the official files'

/// The files of the binary version, train files first.
inline std::vector<std::filesystem::path> cifar10_files(const std::filesystem::path& batches_dir) {
  std::vector<std::filesystem::path> files;
  for (int64_t i = 1; i <= kCifar10TrainFiles; ++i)
    files.push_back(batches_dir / ("data_batch_" + std::to_string(i) + ".bin"));
  files.push_back(batches_dir / "test_batch.bin");
  return files;
}

/// The folder holding the batch files: `data_dir/cifar-10-batches-bin`, or `data_dir`
/// itself when the files lie there; empty when neither holds any of them.
inline std::filesystem::path find_cifar10(const std::filesystem::path& data_dir) {
  for (const auto& candidate : {data_dir / kCifar10Folder, data_dir}) {
    for (const auto& file : cifar10_files(candidate)) {
      std::error_code ec;
      if (std::filesystem::exists(file, ec)) return candidate;
    }
  }
  return {};
}

/// What is wrong with the official files under `batches_dir`, as the reader would say it: the
/// first file missing, or of another size than 10,000 whole records (truncated or too long);
/// empty where every file is whole. Their labels are the reader's to check.
inline std::string cifar10_files_problem(const std::filesystem::path& batches_dir) {
  for (const auto& file : cifar10_files(batches_dir)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return "CIFAR-10 file '" + file.string() + "' is missing";
    const auto size = static_cast<int64_t>(std::filesystem::file_size(file, ec));
    if (ec) return "cannot read CIFAR-10 file '" + file.string() + "': " + ec.message();
    constexpr int64_t kWhole = kCifar10RecordsPerFile * kCifar10RecordBytes;
    if (size != kWhole) {
      return "CIFAR-10 file '" + file.string() + "' is " + (size < kWhole ? "truncated" : "too long") + ": " +
             std::to_string(size) + " bytes, expected " + std::to_string(kWhole) + " (" +
             std::to_string(kCifar10RecordsPerFile) + " records of " + std::to_string(kCifar10RecordBytes) + " bytes)";
    }
  }
  return "";
}

}  // namespace ddpbench
