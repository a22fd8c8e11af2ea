#pragma once
// A two-convolution CNN with batch norm, for tests: every code path of the big models
// (convolutions, SyncBatchNorm2d, a linear head) in a few thousand parameters.
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "models/sync_batch_norm.hpp"

namespace ddpbench {

class TinyCnnImpl : public torch::nn::Cloneable<TinyCnnImpl> {
 public:
  explicit TinyCnnImpl(int64_t num_classes);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  int64_t num_classes;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  SyncBatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(TinyCnn);

}  // namespace ddpbench
