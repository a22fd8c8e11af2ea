#pragma once
// BatchNorm2d with torchvision's names (weight, bias, running_mean, running_var,
// num_batches_tracked) that becomes SyncBatchNorm once given a process group: in training,
// its batch statistics (forward) and gradient statistics (backward) are then reduced over
// every process, so N processes with batch B normalise exactly as one with batch N*B.
#include <memory>
#include <vector>

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include "harness/distributed/cross_process_sum.hpp"

namespace ddpbench {

class SyncBatchNorm2dImpl : public torch::nn::Cloneable<SyncBatchNorm2dImpl> {
 public:
  explicit SyncBatchNorm2dImpl(int64_t features, double eps = 1e-5, double momentum = 0.1);

  void reset() override;
  at::Tensor forward(const at::Tensor& input);

  /// Statistics are reduced over `group` from now on; nullptr makes it a local BatchNorm.
  void set_process_group(std::shared_ptr<CrossProcessSum> group) { group_ = std::move(group); }
  [[nodiscard]] bool synchronised() const { return group_ != nullptr; }

  int64_t features;
  double eps;
  double momentum;
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  std::shared_ptr<CrossProcessSum> group_;
};
TORCH_MODULE(SyncBatchNorm2d);

/// convert_sync_batchnorm: hands `group` to every SyncBatchNorm2d in `module`; returns
/// how many it converted.
int64_t convert_sync_batch_norm(torch::nn::Module& module, const std::shared_ptr<CrossProcessSum>& group);

/// The channels of each SyncBatchNorm2d in `module` that reduces over a group, in the order
/// modules() visits them: each one's forward gathers 2C+1 values a rank, its backward sums 2C.
std::vector<int64_t> synchronised_features(torch::nn::Module& module);

}  // namespace ddpbench
