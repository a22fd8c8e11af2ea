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

}  // namespace
}  // namespace ddpbench
