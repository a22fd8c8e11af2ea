#pragma once
// The tutorial's optimizer, SGD with momentum and no weight decay, in three implementations
// with the same arithmetic as torch.optim.SGD: `loop` is LibTorch's (one update per
// parameter), `foreach` updates all parameters with multi-tensor ops, `fused` with one
// kernel (at::_fused_sgd_), which can also unscale fp16 gradients and skip a step with
// inf/NaN gradients on the device, with no host synchronisation.
#include <memory>
#include <optional>
#include <vector>

#include <torch/optim/sgd.h>

#include "strategies/strategy_options.hpp"

namespace ddpbench {

class MultiTensorSgd final : public torch::optim::SGD {
 public:
  MultiTensorSgd(std::vector<at::Tensor> parameters, torch::optim::SGDOptions options, SgdImpl impl);
  at::Tensor step(LossClosure closure = nullptr) override;
  /// Fused only: gradients are still multiplied by `grad_scale`, which the kernel divides
  /// out; a non-zero `found_inf` (set by GradScaler's non-finite check) skips the step.
  void scaled_step(const at::Tensor& grad_scale, const at::Tensor& found_inf);
  [[nodiscard]] SgdImpl impl() const { return impl_; }

 private:
  void update(const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf);
  SgdImpl impl_;
  std::vector<at::Tensor> momentum_;  // one per parameter with a gradient, in order
  bool first_step_ = true;
};

std::unique_ptr<torch::optim::Optimizer> make_sgd(std::vector<at::Tensor> parameters, double lr, double momentum,
                                                  SgdImpl impl);

}  // namespace ddpbench
