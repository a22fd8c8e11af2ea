#include <gtest/gtest.h>

#include <mutex>

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/nn/modules/batchnorm.h>

#include "models/sync_batch_norm.hpp"
#include "models/tiny_cnn.hpp"
#include "support/rank_threads.hpp"

namespace ddpbench {
namespace {

// Ranks hold batches of different sizes (4, 2, 3): the statistics must weight them by count.
constexpr int64_t kChannels = 5;
const std::vector<int64_t> kBatch = {4, 2, 3};

TEST(SyncBatchNorm, MatchesBatchNormOverTheWholeBatch) {
  torch::manual_seed(3);
  const auto full = at::randn({9, kChannels, 3, 3}) * 2 + 1;
  const auto upstream = at::randn({9, kChannels, 3, 3});
  // The reference: one BatchNorm2d over all 9 samples.
  torch::nn::BatchNorm2d reference(kChannels);
  const auto x_ref = full.clone().requires_grad_(true);
  const auto y_ref = reference(x_ref);
  const auto ref_grads = torch::autograd::grad({y_ref}, {x_ref, reference->weight, reference->bias}, {upstream});

  std::mutex mutex;
  at::Tensor weight_grad_sum = at::zeros({kChannels});
  testing::run_ranks(3, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
    int64_t begin = 0;
    for (int64_t r = 0; r < rank; ++r) begin += kBatch[static_cast<std::size_t>(r)];
    const int64_t n = kBatch[static_cast<std::size_t>(rank)];
    SyncBatchNorm2d bn(kChannels);
    bn->set_process_group(comm);
    const auto x = full.narrow(0, begin, n).clone().requires_grad_(true);
    const auto y = bn(x);
    EXPECT_TRUE(at::allclose(y, y_ref.narrow(0, begin, n), 1e-5, 1e-5)) << "rank " << rank;
    const auto grads = torch::autograd::grad({y}, {x, bn->weight}, {upstream.narrow(0, begin, n)});
    EXPECT_TRUE(at::allclose(grads[0], ref_grads[0].narrow(0, begin, n), 1e-5, 1e-5)) << "rank " << rank;
    EXPECT_TRUE(at::allclose(bn->running_mean, reference->running_mean, 1e-6, 1e-6));
    EXPECT_TRUE(at::allclose(bn->running_var, reference->running_var, 1e-5, 1e-6));
    std::lock_guard lock(mutex);
    weight_grad_sum += grads[1];
  });
  // Weight gradients are per process, as in PyTorch; DDP's gradient allreduce sums them.
  EXPECT_TRUE(at::allclose(weight_grad_sum, ref_grads[1], 1e-4, 1e-5));
}

TEST(SyncBatchNorm, ConvertReachesEveryNormLayer) {
  TinyCnn model(10);
  EXPECT_FALSE(model->bn1->synchronised());
  testing::run_ranks(1, [&](int64_t, std::shared_ptr<Communicator> comm) {
    EXPECT_EQ(convert_sync_batch_norm(*model, comm), 2);
  });
  EXPECT_TRUE(model->bn1->synchronised());
  EXPECT_TRUE(model->bn2->synchronised());
}

}  // namespace
}  // namespace ddpbench
