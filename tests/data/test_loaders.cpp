#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "data/batch_loader.hpp"
#include "data/sampler.hpp"
#include "data/synthetic.hpp"

namespace ddpbench {
namespace {

const DatasetSplits& data() {
  static const DatasetSplits splits = make_synthetic({4, 1000, 10});
  return splits;
}

EpochPlan plan(int64_t epoch, int64_t padding) {
  return {train_shard_indices(data().train.size(), 4, epoch, {0, 1}),
          random_augmentation(4, epoch, AugmentationStream::train, data().train.size(), padding)};
}

std::vector<Batch> drain(BatchLoader& loader, EpochPlan p) {
  loader.start_epoch(std::move(p));
  std::vector<Batch> batches;
  while (auto b = loader.next()) batches.push_back(Batch{b->images.cpu(), b->labels.cpu()});
  return batches;
}

LoaderOptions options(int64_t batch, int64_t workers, c10::Device device = c10::kCPU) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = workers;
  o.device = device;
  return o;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i].images, b[i].images)) << "batch " << i;
    EXPECT_TRUE(at::equal(a[i].labels, b[i].labels)) << "batch " << i;
  }
}

TEST(Loaders, HostAndDeviceLoadersProduceIdenticalBatches) {
  for (int64_t padding : {0, 4}) {
    auto host0 = make_host_loader(data().train, options(96, 0));
    auto host3 = make_host_loader(data().train, options(96, 3));
    auto device = make_device_loader(data().train, options(96, 0));
    const auto reference = drain(*host0, plan(1, padding));
    expect_same(reference, drain(*host3, plan(1, padding)));
    expect_same(reference, drain(*device, plan(1, padding)));
  }
}

TEST(Loaders, BatchesFollowThePlanWithAPartialLastBatch) {
  auto loader = make_host_loader(data().train, options(300, 2));
  const auto p = plan(0, 0);
  const auto batches = drain(*loader, p);
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[0].size(), 300);
  EXPECT_EQ(batches[3].size(), 100);
  EXPECT_EQ(batches[0].images.scalar_type(), at::kFloat);
  EXPECT_EQ(batches[0].images.sizes(), (std::vector<int64_t>{300, 3, 32, 32}));
  // Batch 2, sample 5 is dataset index p.indices[605], with its own augmentation.
  const int64_t index = p.indices[605];
  EXPECT_EQ(batches[2].labels[5].item<int64_t>(), data().train.labels[index].item<int64_t>());
  auto expected = at::empty({3, 32, 32}, at::kFloat);
  augment_image(data().train.images[index].contiguous().data_ptr<uint8_t>(), index, p.augmentation,
                expected.data_ptr<float>());
  EXPECT_TRUE(at::equal(batches[2].images[5], expected));
}

TEST(Loaders, EachEpochIsReshuffledAndCoversTheData) {
  auto loader = make_device_loader(data().train, options(1000, 0));
  const auto e0 = drain(*loader, plan(0, 0));
  const auto e1 = drain(*loader, plan(1, 0));
  EXPECT_FALSE(at::equal(e0[0].labels, e1[0].labels));
  EXPECT_TRUE(at::equal(std::get<0>(e0[0].labels.sort()), std::get<0>(data().train.labels.sort())));
  EXPECT_TRUE(at::equal(std::get<0>(e1[0].labels.sort()), std::get<0>(data().train.labels.sort())));
}

TEST(Loaders, MaxBatchesCutsTheEpoch) {
  auto o = options(100, 2);
  o.max_batches = 3;
  auto loader = make_host_loader(data().train, o);
  EXPECT_EQ(drain(*loader, plan(0, 0)).size(), 3u);
  EXPECT_EQ(batches_in_epoch(1000, o), 3);
  EXPECT_EQ(batches_in_epoch(1000, options(300, 0)), 4);
}

TEST(Loaders, HostLoaderStopsCleanlyMidEpoch) {
  auto loader = make_host_loader(data().train, options(10, 4));
  loader->start_epoch(plan(0, 0));
  ASSERT_TRUE(loader->next().has_value());
  loader->start_epoch(plan(1, 0));  // abandons the first epoch's workers
  int n = 0;
  while (loader->next()) ++n;
  EXPECT_EQ(n, 100);
  loader->start_epoch(plan(2, 0));
  loader.reset();  // destroyed with workers running: must join, not hang
}

TEST(GpuLoaders, DeviceLoaderOnCudaMatchesHostLoader) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto host = make_host_loader(data().train, options(128, 2, c10::Device(c10::kCUDA, 0)));
  auto device = make_device_loader(data().train, options(128, 0, c10::Device(c10::kCUDA, 0)));
  host->start_epoch(plan(0, 4));
  auto first = host->next();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->images.is_pinned());
  expect_same(drain(*host, plan(0, 4)), drain(*device, plan(0, 4)));
}

}  // namespace
}  // namespace ddpbench
