#include <gtest/gtest.h>

#include <fstream>

#include <ATen/ATen.h>

#include "data/cifar10.hpp"
#include "data/synthetic.hpp"
#include "harness/base/input_error.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

constexpr Cifar10Layout kSmall{20};  // 20 records per file keeps these tests fast

DatasetSplits small_splits(uint64_t seed = 3) {
  return make_synthetic({seed, 5 * kSmall.records_per_file, kSmall.records_per_file});
}

std::string load_error(const std::filesystem::path& dir, Cifar10Layout layout = kSmall) {
  try {
    load_cifar10(dir, layout);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Cifar10, WrittenFilesReadBackExactly) {
  TempDir dir;
  const auto splits = small_splits();
  write_cifar10(dir.path(), splits, kSmall);
  EXPECT_EQ(std::filesystem::file_size(dir / "cifar-10-batches-bin/data_batch_3.bin"), 20u * 3073u);
  const auto back = load_cifar10(dir.path(), kSmall);
  EXPECT_EQ(back.kind, "cifar10");
  EXPECT_TRUE(at::equal(back.train.images, splits.train.images));
  EXPECT_TRUE(at::equal(back.train.labels, splits.train.labels));
  EXPECT_TRUE(at::equal(back.test.images, splits.test.images));
  EXPECT_TRUE(at::equal(back.test.labels, splits.test.labels));
  EXPECT_EQ(back.train.images.sizes(), (std::vector<int64_t>{100, 3, 32, 32}));
  EXPECT_EQ(back.train.images.scalar_type(), at::kByte);
}

TEST(Cifar10, RecordLayoutIsLabelThenChwPixels) {
  TempDir dir;
  auto splits = small_splits();
  splits.train.labels[21] = 7;
  splits.train.images[21][2][0][5] = 201;  // blue channel, row 0, column 5
  write_cifar10(dir.path(), splits, kSmall);
  std::ifstream in(dir / "cifar-10-batches-bin/data_batch_2.bin", std::ios::binary);
  std::vector<char> record(3073);
  in.seekg(3073);  // record 1 of the second file is image 21
  in.read(record.data(), 3073);
  EXPECT_EQ(record[0], 7);
  EXPECT_EQ(static_cast<uint8_t>(record[1 + 2 * 1024 + 5]), 201);
}

TEST(Cifar10, FindsTheFolderEitherWay) {
  TempDir dir;
  write_cifar10(dir.path(), small_splits(), kSmall);
  EXPECT_EQ(find_cifar10(dir.path()), dir / "cifar-10-batches-bin");
  EXPECT_EQ(find_cifar10(dir / "cifar-10-batches-bin"), dir / "cifar-10-batches-bin");
  EXPECT_TRUE(find_cifar10(dir / "elsewhere").empty());
  EXPECT_NO_THROW(load_cifar10(dir / "cifar-10-batches-bin", kSmall));
}

TEST(Cifar10, MissingFolderAndMissingFileAreNamed) {
  TempDir dir;
  EXPECT_NE(load_error(dir.path()).find("no CIFAR-10 binary files under"), std::string::npos);
  write_cifar10(dir.path(), small_splits(), kSmall);
  std::filesystem::remove(dir / "cifar-10-batches-bin/test_batch.bin");
  const std::string error = load_error(dir.path());
  EXPECT_NE(error.find("test_batch.bin' is missing"), std::string::npos) << error;
}

TEST(Cifar10, TruncatedFileIsNamedWithWhatItHolds) {
  TempDir dir;
  write_cifar10(dir.path(), small_splits(), kSmall);
  const auto file = dir / "cifar-10-batches-bin/data_batch_4.bin";
  std::filesystem::resize_file(file, 19 * 3073 + 100);
  const std::string error = load_error(dir.path());
  EXPECT_NE(error.find("data_batch_4.bin' is truncated"), std::string::npos) << error;
  EXPECT_NE(error.find("19 whole records and 100 bytes of record 19"), std::string::npos) << error;
  EXPECT_NE(error.find("expected 20 records (61,460 bytes)"), std::string::npos) << error;
}

TEST(Cifar10, OfficialSizeIsRequiredByDefault) {
  TempDir dir;
  write_cifar10(dir.path(), small_splits(), kSmall);
  const std::string error = load_error(dir.path(), Cifar10Layout{});
  EXPECT_NE(error.find("data_batch_1.bin' is truncated"), std::string::npos) << error;
  EXPECT_NE(error.find("expected 10,000 records (30,730,000 bytes)"), std::string::npos) << error;
}

TEST(Cifar10, BadLabelNamesFileAndRecord) {
  TempDir dir;
  write_cifar10(dir.path(), small_splits(), kSmall);
  const auto file = dir / "cifar-10-batches-bin/data_batch_5.bin";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(13 * 3073);
  f.put(static_cast<char>(17));
  f.close();
  const std::string error = load_error(dir.path());
  EXPECT_NE(error.find("data_batch_5.bin': record 13 (byte offset 39,949) has label 17, expected 0-9"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace ddpbench
