#include "data/cifar10.hpp"

#include <fstream>
#include <iterator>
#include <string>

#include <ATen/ATen.h>

#include "harness/base/atomic_file.hpp"
#include "harness/base/gzip.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

constexpr int kTrainFiles = static_cast<int>(kCifar10TrainFiles);

}  // namespace

ImageSet read_cifar10_file(const std::filesystem::path& file, int64_t records) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw InputError("CIFAR-10 file '" + file.string() + "' is missing");
  }
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError("cannot read CIFAR-10 file '" + file.string() + "'");

  ImageSet set{at::empty({records, kImageChannels, kImageSide, kImageSide}, at::kByte),
               at::empty({records}, at::kLong)};
  auto* pixels = set.images.data_ptr<uint8_t>();
  auto* labels = set.labels.data_ptr<int64_t>();
  parse_cifar10_records({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, records, file.string(),
                        [&](int64_t r, uint8_t label, const uint8_t* record_pixels) {
                          labels[r] = label;
                          std::copy(record_pixels, record_pixels + kImageBytes, pixels + r * kImageBytes);
                        });
  return set;
}

DatasetSplits load_cifar10(const std::filesystem::path& data_dir, Cifar10Layout layout) {
  std::filesystem::path dir = find_cifar10(data_dir);
  if (dir.empty()) {
    throw InputError("no CIFAR-10 binary files under '" + data_dir.string() + "' (expected " +
                     (data_dir / kCifar10Folder / "data_batch_1.bin").string() +
                     "; scripts/fetch-cifar10 downloads them)");
  }
  const auto files = cifar10_files(dir);
  std::vector<at::Tensor> images, labels;
  for (int i = 0; i < kTrainFiles; ++i) {
    ImageSet part = read_cifar10_file(files[i], layout.records_per_file);
    images.push_back(part.images);
    labels.push_back(part.labels);
  }
  DatasetSplits splits;
  splits.train = {at::cat(images), at::cat(labels)};
  splits.test = read_cifar10_file(files.back(), layout.records_per_file);
  splits.kind = "cifar10";
  splits.origin = dir.string();
  return splits;
}

uint32_t write_records(const std::filesystem::path& file, const ImageSet& set, int64_t first, int64_t count) {
  TORCH_CHECK(first >= 0 && count >= 0 && first + count <= set.size(), "write_records: records ", first, "..",
              first + count, " outside a set of ", set.size());
  const auto images = set.images.contiguous();
  const auto labels = set.labels.contiguous();
  std::string bytes(static_cast<std::size_t>(count * kCifar10RecordBytes), '\0');
  for (int64_t r = 0; r < count; ++r) {
    char* record = bytes.data() + r * kCifar10RecordBytes;
    record[0] = static_cast<char>(labels.data_ptr<int64_t>()[first + r]);
    const auto* src = images.data_ptr<uint8_t>() + (first + r) * kImageBytes;
    std::copy(src, src + kImageBytes, reinterpret_cast<uint8_t*>(record + 1));
  }
  write_file_atomically(file, bytes);
  return crc32_of(bytes);
}

void write_cifar10(const std::filesystem::path& data_dir, const DatasetSplits& splits,
                   Cifar10Layout layout) {
  const int64_t per_file = layout.records_per_file;
  TORCH_CHECK(splits.train.size() == kTrainFiles * per_file, "write_cifar10: the train split has ",
              splits.train.size(), " images, the layout needs ", kTrainFiles * per_file);
  TORCH_CHECK(splits.test.size() == per_file, "write_cifar10: the test split has ",
              splits.test.size(), " images, the layout needs ", per_file);
  const auto files = cifar10_files(data_dir / kCifar10Folder);
  for (int f = 0; f < kTrainFiles; ++f) write_records(files[f], splits.train, f * per_file, per_file);
  write_records(files.back(), splits.test, 0, per_file);
}

}  // namespace ddpbench
