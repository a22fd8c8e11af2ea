#include "data/dataset.hpp"

#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include <ATen/ATen.h>

#include "data/cifar10.hpp"
#include "data/synthetic.hpp"
#include "data/synthetic_cache_files.hpp"
#include "harness/base/atomic_file.hpp"
#include "harness/base/gzip.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

bool uses_cifar(const DatasetOptions& options, bool announce) {
  const bool cifar = options.kind == DatasetKind::cifar10 ||
                     (options.kind == DatasetKind::auto_detect && !find_cifar10(options.data_dir).empty());
  if (!cifar && options.kind == DatasetKind::auto_detect && announce) {
    std::cerr << "ddpbench: no CIFAR-10 under '" << options.data_dir
              << "': using the synthetic dataset (scripts/fetch-cifar10 fetches the real one; "
                 "--dataset synthetic silences this)\n";
  }
  return cifar;
}

SyntheticOptions synthetic_options(const DatasetOptions& options) {
  return SyntheticOptions{options.seed, options.synthetic_train_images, options.synthetic_test_images};
}

ImageSet read_whole(const std::filesystem::path& file) {
  return read_cifar10_file(file, static_cast<int64_t>(std::filesystem::file_size(file)) / kCifar10RecordBytes);
}

// The synthetic cache proves its files: the CRC-32 of each as it was written, in this file beside
// them ("train.bin 1234\n"), written after them. A file the cache cannot prove is regenerated.
constexpr const char* kCacheSums = "crc32.txt";

std::map<std::string, uint32_t> read_cache_sums(const std::filesystem::path& file) {
  std::map<std::string, uint32_t> sums;
  std::ifstream in(file);
  std::string name;
  uint32_t crc = 0;
  while (in >> name >> crc) sums[name] = crc;
  return sums;
}

std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Why a cached file of `records` records is not the one the cache wrote: "absent", cut short or
// too long, without a checksum, or of another content (zeroed, edited); "" where it is.
std::string cached_file_problem(const std::filesystem::path& file, int64_t records,
                                const std::map<std::string, uint32_t>& sums) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return "absent";
  const auto size = static_cast<int64_t>(std::filesystem::file_size(file, ec));
  const int64_t whole = records * kCifar10RecordBytes;
  const std::string named = "'" + file.string() + "'";
  if (ec || size != whole) {
    return named + " is " + (size < whole ? "truncated" : "too long") + ": " + std::to_string(size) + " bytes, expected " +
           std::to_string(whole) + " (" + std::to_string(records) + " records of " +
           std::to_string(kCifar10RecordBytes) + " bytes)";
  }
  const auto sum = sums.find(file.filename().string());
  if (sum == sums.end()) return named + " carries no checksum (" + kCacheSums + ")";
  if (crc32_of(read_bytes(file)) != sum->second) return named + " does not match its checksum: damaged";
  return "";
}

// The cache's files as the generator makes them: regenerated (and said where `announce`) unless
// every one is proven; each rank may do it at once, writing the same bytes atomically.
void prove_synthetic_cache(const std::filesystem::path& dir, const SyntheticOptions& synthetic, bool announce) {
  const auto sums = read_cache_sums(dir / kCacheSums);
  std::string problem;
  for (const auto& [name, records] : {std::pair<std::string, int64_t>{"train.bin", synthetic.train_images},
                                      std::pair<std::string, int64_t>{"test.bin", synthetic.test_images}}) {
    if (problem.empty()) problem = cached_file_problem(dir / name, records, sums);
  }
  if (problem.empty()) return;
  if (announce && problem != "absent") {
    std::cerr << "ddpbench: the synthetic cache's " << problem << ": regenerated, not trained on\n";
  }
  const DatasetSplits splits = make_synthetic(synthetic);
  const uint32_t train = write_records(dir / "train.bin", splits.train, 0, splits.train.size());
  const uint32_t test = write_records(dir / "test.bin", splits.test, 0, splits.test.size());
  write_file_atomically(dir / kCacheSums, "train.bin " + std::to_string(train) + "\ntest.bin " + std::to_string(test) + "\n");
}

}  // namespace

DatasetFiles dataset_files(const DatasetOptions& options, bool announce) {
  if (uses_cifar(options, announce)) {
    const auto dir = find_cifar10(options.data_dir);
    if (dir.empty()) load_cifar10(options.data_dir);  // throws the reader's message
    auto files = cifar10_files(dir);
    DatasetFiles out{{files.begin(), files.end() - 1}, {files.back()}, "cifar10", dir.string()};
    return out;
  }
  return synthetic_files(options, announce);
}

DatasetFiles synthetic_files(const DatasetOptions& options, bool announce) {
  if (options.cache_dir.empty()) throw InputError("synthetic data as files needs a cache folder (--cache-dir)");
  const SyntheticOptions synthetic = synthetic_options(options);
  const auto dir = synthetic_cache_folder(options.cache_dir, synthetic.seed, synthetic.train_images,
                                          synthetic.test_images);
  DatasetFiles out{{dir / "train.bin"}, {dir / "test.bin"}, "synthetic", ""};
  prove_synthetic_cache(dir, synthetic, announce);
  out.origin = make_synthetic_origin(synthetic) + " (" + dir.string() + ")";
  return out;
}

DatasetSplits load_dataset(const DatasetOptions& options, bool announce) {
  if (uses_cifar(options, announce)) return load_cifar10(options.data_dir);
  if (options.cache_dir.empty()) return make_synthetic(synthetic_options(options));
  const DatasetFiles files = synthetic_files(options, announce);
  return DatasetSplits{read_whole(files.train.front()), read_whole(files.test.front()), files.kind, files.origin};
}

}  // namespace ddpbench
