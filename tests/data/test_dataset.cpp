#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "data/cifar10.hpp"
#include "data/dataset.hpp"
#include "data/synthetic.hpp"
#include "harness/base/input_error.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

DatasetOptions config_for(const std::filesystem::path& dir, DatasetKind kind) {
  DatasetOptions c;
  c.data_dir = dir.string();
  c.kind = kind;
  c.synthetic_train_images = 100;
  c.synthetic_test_images = 20;
  return c;
}

TEST(Dataset, AutoUsesCifar10WhereFoundAndTheRealReaderReadsIt) {
  TempDir dir;
  // The official layout, written from synthetic data: 50,000 + 10,000 records.
  const auto written = make_synthetic({8, 50000, 10000});
  write_cifar10(dir.path(), written);
  const auto loaded = load_dataset(config_for(dir.path(), DatasetKind::auto_detect));
  EXPECT_EQ(loaded.kind, "cifar10");
  EXPECT_EQ(loaded.origin, (dir / "cifar-10-batches-bin").string());
  EXPECT_EQ(loaded.train.size(), 50000);
  EXPECT_TRUE(at::equal(loaded.test.images, written.test.images));
}

TEST(Dataset, AutoFallsBackToSyntheticAndSaysSo) {
  TempDir dir;
  ::testing::internal::CaptureStderr();
  const auto loaded = load_dataset(config_for(dir.path(), DatasetKind::auto_detect));
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(loaded.kind, "synthetic");
  EXPECT_EQ(loaded.train.size(), 100);
  EXPECT_NE(warning.find("using the synthetic dataset"), std::string::npos);
}

TEST(Dataset, ExplicitChoicesAreObeyed) {
  TempDir dir;
  EXPECT_THROW(load_dataset(config_for(dir.path(), DatasetKind::cifar10)), InputError);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(load_dataset(config_for(dir.path(), DatasetKind::synthetic)).kind, "synthetic");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

DatasetOptions cached(const TempDir& dir) {
  DatasetOptions c = config_for(dir.path(), DatasetKind::synthetic);
  c.cache_dir = (dir / "cache").string();
  return c;
}

// Loads with stderr captured: the set, and what was said.
std::pair<DatasetSplits, std::string> load_saying(const DatasetOptions& options) {
  ::testing::internal::CaptureStderr();
  DatasetSplits splits = load_dataset(options);
  return {std::move(splits), ::testing::internal::GetCapturedStderr()};
}

// A cache file replaced by zeros of the right size trained "ok" on all-zero images labelled 0; a
// truncated one failed with "too long ... expected 0 records". Each is regenerated and said, never
// read; a proven cache is read as it is, silently.
TEST(Dataset, TheSyntheticCacheIsProvenAndADamagedFileRegenerated) {
  TempDir dir;
  const DatasetOptions options = cached(dir);
  const auto [first, said_first] = load_saying(options);
  EXPECT_EQ(said_first, "") << "a new cache is written without a word";
  const auto files = synthetic_files(options, false);
  const auto train = files.train.front();
  const auto test = files.test.front();
  EXPECT_EQ(load_saying(options).second, "") << "a proven cache is read as it is";

  testing::write_text(train, std::string(100 * 3073, '\0'));
  const auto [zeroed, said_zeroed] = load_saying(options);
  EXPECT_NE(said_zeroed.find("'" + train.string() + "' does not match its checksum: damaged: regenerated, not trained "
                             "on"),
            std::string::npos)
      << said_zeroed;
  EXPECT_TRUE(at::equal(zeroed.train.images, first.train.images));
  EXPECT_TRUE(at::equal(zeroed.train.labels, first.train.labels));

  testing::write_text(test, std::string(5 * 3073 + 7, '\1'));
  const auto [cut, said_cut] = load_saying(options);
  EXPECT_NE(said_cut.find("'" + test.string() + "' is truncated: 15372 bytes, expected 61460 (20 records of 3073 bytes)"),
            std::string::npos)
      << said_cut;
  EXPECT_TRUE(at::equal(cut.test.images, first.test.images));

  std::filesystem::remove(train.parent_path() / "crc32.txt");
  EXPECT_NE(load_saying(options).second.find("carries no checksum (crc32.txt)"), std::string::npos)
      << "a cache from before it was proven is regenerated once";
  EXPECT_EQ(load_saying(options).second, "");
}

}  // namespace
}  // namespace ddpbench
