#include "data/dataset.hpp"

#include <iostream>

#include <ATen/ATen.h>

#include "data/cifar10.hpp"
#include "data/synthetic.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

// Bumped whenever data/synthetic.cpp draws other images for the same seed, so an old cache
// is never read as the new data.
constexpr const char* kSyntheticVersion = "v1";

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

}  // namespace

DatasetFiles dataset_files(const DatasetOptions& options, bool announce) {
  if (uses_cifar(options, announce)) {
    const auto dir = find_cifar10(options.data_dir);
    if (dir.empty()) load_cifar10(options.data_dir);  // throws the reader's message
    auto files = cifar10_files(dir);
    DatasetFiles out{{files.begin(), files.end() - 1}, {files.back()}, "cifar10", dir.string()};
    return out;
  }
  if (options.cache_dir.empty()) throw InputError("synthetic data as files needs a cache folder (--cache-dir)");
  const SyntheticOptions synthetic = synthetic_options(options);
  const auto dir = std::filesystem::path(options.cache_dir) / "synthetic" /
                   (std::string(kSyntheticVersion) + "-seed" + std::to_string(synthetic.seed) + "-train" +
                    std::to_string(synthetic.train_images) + "-test" + std::to_string(synthetic.test_images));
  DatasetFiles out{{dir / "train.bin"}, {dir / "test.bin"}, "synthetic", ""};
  std::error_code ec;
  if (!std::filesystem::exists(out.train.front(), ec) || !std::filesystem::exists(out.test.front(), ec)) {
    const DatasetSplits splits = make_synthetic(synthetic);
    write_records(out.train.front(), splits.train, 0, splits.train.size());
    write_records(out.test.front(), splits.test, 0, splits.test.size());
  }
  out.origin = make_synthetic_origin(synthetic) + " (" + dir.string() + ")";
  return out;
}

DatasetSplits load_dataset(const DatasetOptions& options, bool announce) {
  if (uses_cifar(options, announce)) return load_cifar10(options.data_dir);
  if (options.cache_dir.empty()) return make_synthetic(synthetic_options(options));
  const DatasetFiles files = dataset_files(options, false);
  return DatasetSplits{read_whole(files.train.front()), read_whole(files.test.front()), files.kind, files.origin};
}

}  // namespace ddpbench
