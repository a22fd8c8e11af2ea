#pragma once
// BatchNorm2d with torchvision's names (weight, bias, running_mean, running_var,
// num_batches_tracked) that becomes SyncBatchNorm once given a process group: in training,
// its batch statistics (forward) and gradient statistics (backward) are then reduced over
// every process, so N processes with batch B normalise exactly as one with batch N*B.
#include <memory>
#include <vector>

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace ddpbench {

/// Element-wise sum over all processes of a group, in place, blocking. Every process calls
/// it in the same order with tensors of the same shape.
class CrossProcessSum {
 public:
  virtual ~CrossProcessSum() = default;
  virtual void sum(at::Tensor& tensor) = 0;
  [[nodiscard]] virtual int64_t rank() const = 0;
  [[nodiscard]] virtual int64_t world_size() const = 0;
};

/// Every process's `row` (same length everywhere) stacked by rank, [world_size, numel], on
/// every process: each fills its own row of zeros and the rows are summed.
at::Tensor all_gather_rows(CrossProcessSum& group, const at::Tensor& row);

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

}  // namespace ddpbench
