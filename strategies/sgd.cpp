#include "strategies/sgd.hpp"

#include <ATen/ATen.h>

namespace ddpbench {

MultiTensorSgd::MultiTensorSgd(std::vector<at::Tensor> parameters, torch::optim::SGDOptions options, SgdImpl impl)
    : torch::optim::SGD(std::move(parameters), options), impl_(impl) {
  TORCH_CHECK(impl != SgdImpl::loop, "MultiTensorSgd is the foreach and fused step; loop is torch::optim::SGD");
  TORCH_CHECK(options.weight_decay() == 0 && options.dampening() == 0 && !options.nesterov(),
              "the tutorial's SGD: no weight decay, dampening or Nesterov");
}

at::Tensor MultiTensorSgd::step(LossClosure closure) {
  TORCH_CHECK(closure == nullptr, "closures are not supported");
  update(std::nullopt, std::nullopt);
  return {};
}

void MultiTensorSgd::scaled_step(const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  TORCH_CHECK(impl_ == SgdImpl::fused, "scaled_step needs --sgd fused");
  update(grad_scale, found_inf);
}

void MultiTensorSgd::update(const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  at::NoGradGuard no_grad;
  const auto& options = static_cast<const torch::optim::SGDOptions&>(param_groups().front().options());
  std::vector<at::Tensor> params, grads;
  for (const auto& p : param_groups().front().params()) {
    if (p.grad().defined()) {
      params.push_back(p);
      grads.push_back(p.grad());
    }
  }
  if (params.empty()) return;
  const double lr = options.lr();
  const double momentum = options.momentum();
  // Without momentum there are no buffers (the fused kernel insists on an empty list).
  if (momentum != 0 && momentum_.empty()) {
    for (const auto& g : grads) momentum_.push_back(at::zeros_like(g));
  }
  TORCH_CHECK(momentum == 0 || momentum_.size() == params.size(),
              "the set of parameters with gradients changed between steps");
  if (impl_ == SgdImpl::fused) {
    at::_fused_sgd_(params, grads, momentum_, 0.0, momentum, lr, 0.0, false, false, first_step_, grad_scale, found_inf);
  } else if (momentum == 0) {
    at::_foreach_add_(params, grads, -lr);
  } else {
    // torch.optim.SGD's foreach path: buf = grad on the first step, else momentum * buf + grad.
    if (first_step_) {
      for (std::size_t i = 0; i < grads.size(); ++i) momentum_[i].copy_(grads[i]);
    } else {
      at::_foreach_mul_(momentum_, momentum);
      at::_foreach_add_(momentum_, grads);
    }
    at::_foreach_add_(params, momentum_, -lr);
  }
  first_step_ = false;
}

std::unique_ptr<torch::optim::Optimizer> make_sgd(std::vector<at::Tensor> parameters, double lr, double momentum,
                                                  SgdImpl impl) {
  const auto options = torch::optim::SGDOptions(lr).momentum(momentum);
  if (impl == SgdImpl::loop) return std::make_unique<torch::optim::SGD>(std::move(parameters), options);
  return std::make_unique<MultiTensorSgd>(std::move(parameters), options, impl);
}

}  // namespace ddpbench
