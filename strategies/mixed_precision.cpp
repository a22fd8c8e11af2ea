#include "strategies/mixed_precision.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "strategies/sgd.hpp"

namespace ddpbench {

MixedPrecision::Autocast::Autocast(AmpMode mode, c10::DeviceType device) : device_(device) {
  if (mode == AmpMode::off) return;
  active_ = true;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, mode == AmpMode::fp16 ? at::kHalf : at::kBFloat16);
  at::autocast::increment_nesting();
}

MixedPrecision::Autocast::~Autocast() {
  if (!active_) return;
  // As torch.autocast's __exit__: the cast cache lives as long as the outermost region.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
}

MixedPrecision::MixedPrecision(AmpMode mode, c10::Device device, LossScalerOptions scaler)
    : mode_(mode), device_(device), options_(scaler) {
  if (mode_ != AmpMode::fp16) return;
  const auto on_device = at::TensorOptions().device(device_);
  scale_ = at::full({1}, options_.initial_scale, on_device.dtype(at::kFloat));
  growth_tracker_ = at::zeros({1}, on_device.dtype(at::kInt));
  skipped_ = at::zeros({1}, on_device.dtype(at::kFloat));
}

at::Tensor MixedPrecision::scale(const at::Tensor& loss) const {
  return mode_ == AmpMode::fp16 ? loss * scale_.to(loss.scalar_type()) : loss;
}

void MixedPrecision::step(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& parameters) {
  if (mode_ != AmpMode::fp16) {
    optimizer.step();
    return;
  }
  at::NoGradGuard no_grad;
  auto found_inf = at::zeros({1}, scale_.options());
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  auto* fused = dynamic_cast<MultiTensorSgd*>(&optimizer);
  if (fused != nullptr && fused->impl() == SgdImpl::fused) {
    // As GradScaler with a fused optimizer: check only (inverse scale 1), then the kernel
    // unscales and skips on found_inf itself, all on the device: no host synchronisation.
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, at::ones_like(scale_));
    fused->scaled_step(scale_, found_inf);
  } else {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, scale_.reciprocal());
    // As GradScaler with an optimizer that cannot skip on its own: ask the host.
    if (found_inf.item<float>() == 0.0f) optimizer.step();
  }
  skipped_.add_(found_inf);
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
}

double MixedPrecision::current_scale() const { return mode_ == AmpMode::fp16 ? scale_.item<double>() : 1.0; }

int64_t MixedPrecision::skipped_steps() const {
  return mode_ == AmpMode::fp16 ? static_cast<int64_t>(skipped_.item<float>()) : 0;
}

}  // namespace ddpbench
