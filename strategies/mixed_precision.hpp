#pragma once
// Mixed precision as torch.autocast and torch.cuda.amp.GradScaler: autocast for forward and
// loss (fp16 or bf16; CUDA, or the CPU so it can be tested anywhere), and for fp16 a dynamic
// loss scale: initial 2^16, doubled after 2,000 clean steps, halved on a step whose
// gradients hold inf/NaN, which is then skipped. The ops are ATen's own
// (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_). Every strategy's step
// goes through one of these, so --amp applies to single, dp and ddp alike.
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include "strategies/strategy_options.hpp"

namespace ddpbench {

struct LossScalerOptions {
  double initial_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class MixedPrecision {
 public:
  MixedPrecision(AmpMode mode, c10::Device device, LossScalerOptions scaler = {});

  /// Autocast on the calling thread for the scope's lifetime (nothing with --amp off).
  class Autocast {
   public:
    Autocast(AmpMode mode, c10::DeviceType device);
    ~Autocast();
    Autocast(const Autocast&) = delete;
    Autocast& operator=(const Autocast&) = delete;

   private:
    bool active_ = false;
    c10::DeviceType device_;
    bool previous_enabled_ = false;
    at::ScalarType previous_dtype_ = at::kFloat;
  };
  [[nodiscard]] Autocast autocast() const { return Autocast(mode_, device_.type()); }

  /// The loss to call backward() on: multiplied by the loss scale with fp16.
  [[nodiscard]] at::Tensor scale(const at::Tensor& loss) const;

  /// The optimizer step with fp16's unscaling and inf/NaN skipping, then the scale update.
  /// Call after the gradients are complete (under DDP: after their allreduce, so every
  /// rank sees the same gradients and agrees on skipping).
  void step(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& parameters);

  [[nodiscard]] double current_scale() const;  // 1 without a scaler
  [[nodiscard]] int64_t skipped_steps() const;

 private:
  AmpMode mode_;
  c10::Device device_;
  LossScalerOptions options_;
  at::Tensor scale_;           // float [1] on the device
  at::Tensor growth_tracker_;  // int [1]
  at::Tensor skipped_;         // float [1]: steps skipped so far, counted on the device
};

}  // namespace ddpbench
