#include "models/sync_batch_norm.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/nn/init.h>

namespace ddpbench {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor per_channel(const at::Tensor& v) { return v.view({1, -1, 1, 1}); }

at::Tensor keep_channels_last_or_contiguous(const at::Tensor& t) {
  return t.is_contiguous(at::MemoryFormat::ChannelsLast) ? t : t.contiguous();
}

// Explicit forward and backward, as torch.nn.modules._functions.SyncBatchNorm: on CUDA
// with ATen's fused SyncBN kernels; elsewhere (they have no CPU kernels) with the same
// arithmetic from composite ops, combining per-process statistics as Welford/Chan do.
struct SyncBatchNormFunction : torch::autograd::Function<SyncBatchNormFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& given_input, const at::Tensor& given_weight,
                               const at::Tensor& bias, at::Tensor running_mean, at::Tensor running_var,
                               double eps, double momentum, CrossProcessSum* group) {
    // As PyTorch's: a channels-last input keeps its layout, anything else becomes contiguous.
    const at::Tensor input = keep_channels_last_or_contiguous(given_input);
    const at::Tensor weight = given_weight.contiguous();
    const int64_t channels = input.size(1);
    const double local_count = static_cast<double>(input.numel() / channels);
    at::Tensor mean, invstd, output, counts;
    if (input.is_cuda()) {
      auto [local_mean, local_invstd] = at::batch_norm_stats(input, eps);
      auto row = at::cat({local_mean, local_invstd, at::full({1}, local_count, local_mean.options())});
      auto all = all_gather_rows(*group, row, "SyncBN forward");
      auto means = all.narrow(1, 0, channels).contiguous();
      auto invstds = all.narrow(1, channels, channels).contiguous();
      counts = all.select(1, 2 * channels).contiguous();
      std::tie(mean, invstd) = at::batch_norm_gather_stats_with_counts(
          input, means, invstds, running_mean, running_var, momentum, eps, counts);
      output = at::batch_norm_elemt(input, weight, bias, mean, invstd, eps);
    } else {
      const auto x = input.to(at::kFloat);
      auto [local_var, local_mean] = at::var_mean(x, {0, 2, 3}, /*correction=*/0);
      auto row = at::cat({local_mean, local_var, at::full({1}, local_count, local_mean.options())});
      auto all = all_gather_rows(*group, row, "SyncBN forward");
      auto means = all.narrow(1, 0, channels);
      auto vars = all.narrow(1, channels, channels);
      counts = all.select(1, 2 * channels);
      const auto n = counts.sum();
      mean = (counts.unsqueeze(1) * means).sum(0) / n;
      const auto var = (counts.unsqueeze(1) * (vars + (means - mean).square())).sum(0) / n;
      invstd = (var + eps).rsqrt();
      {
        at::NoGradGuard no_grad;
        running_mean.mul_(1 - momentum).add_(mean, momentum);
        running_var.mul_(1 - momentum).add_(var * n / (n - 1), momentum);
      }
      output = ((x - per_channel(mean)) * per_channel(invstd * weight) + per_channel(bias)).to(input.scalar_type());
    }
    ctx->save_for_backward({input, weight, mean, invstd, counts});
    // The group outlives the graph (the module holds it); autograd's saved_data stores
    // IValues only, so the pointer travels as an integer.
    ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(group));
    return {output};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto& input = saved[0];
    const auto& weight = saved[1];
    const auto& mean = saved[2];
    const auto& invstd = saved[3];
    const auto& counts = saved[4];
    auto* group = reinterpret_cast<CrossProcessSum*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
    // Channels-last gradients stay channels-last, as in PyTorch's SyncBatchNorm.
    const auto grad_output = keep_channels_last_or_contiguous(grad_outputs[0]);
    const int64_t channels = input.size(1);

    at::Tensor grad_input, grad_weight, grad_bias;
    if (input.is_cuda()) {
      // The reduced statistics are fp32 (the mean's dtype) whatever the input's: under fp16
      // loss scaling, sums of scaled half-precision gradients would overflow.
      auto [sum_dy, sum_dy_xmu, gw, gb] = at::batch_norm_backward_reduce(
          grad_output, input, mean, invstd, weight, true, true, true);
      auto both = at::cat({sum_dy, sum_dy_xmu});
      group->sum(both, "SyncBN backward");
      grad_input = at::batch_norm_backward_elemt(grad_output, input, mean, invstd, weight.to(mean.scalar_type()),
                                                 both.narrow(0, 0, channels), both.narrow(0, channels, channels),
                                                 counts.to(at::kInt));
      grad_weight = gw;
      grad_bias = gb;
    } else {
      const auto x = input.to(at::kFloat);
      const auto dy = grad_output.to(at::kFloat);
      const auto xmu = x - per_channel(mean);
      const auto sum_dy_local = dy.sum({0, 2, 3});
      const auto sum_dy_xmu_local = (dy * xmu).sum({0, 2, 3});
      grad_weight = sum_dy_xmu_local * invstd;
      grad_bias = sum_dy_local;
      auto both = at::cat({sum_dy_local, sum_dy_xmu_local});
      group->sum(both, "SyncBN backward");
      const auto n = counts.sum();
      const auto mean_dy = both.narrow(0, 0, channels) / n;
      const auto mean_dy_xmu = both.narrow(0, channels, channels) / n;
      grad_input = ((dy - per_channel(mean_dy) - xmu * per_channel(invstd.square() * mean_dy_xmu)) *
                    per_channel(invstd * weight))
                       .to(input.scalar_type());
    }
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

SyncBatchNorm2dImpl::SyncBatchNorm2dImpl(int64_t features_, double eps_, double momentum_)
    : features(features_), eps(eps_), momentum(momentum_) {
  reset();
}

void SyncBatchNorm2dImpl::reset() {
  weight = register_parameter("weight", torch::ones({features}));
  bias = register_parameter("bias", torch::zeros({features}));
  running_mean = register_buffer("running_mean", torch::zeros({features}));
  running_var = register_buffer("running_var", torch::ones({features}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

at::Tensor SyncBatchNorm2dImpl::forward(const at::Tensor& input) {
  TORCH_CHECK(input.dim() == 4, "SyncBatchNorm2d: expected a 4-D input, got ", input.dim(), "-D");
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  if (is_training() && group_ && group_->world_size() > 1) {
    return SyncBatchNormFunction::apply(input, weight, bias, running_mean, running_var, eps, momentum,
                                        group_.get())[0];
  }
  return at::batch_norm(input, weight, bias, running_mean, running_var, is_training(), momentum, eps,
                        at::globalContext().userEnabledCuDNN());
}

int64_t convert_sync_batch_norm(torch::nn::Module& module, const std::shared_ptr<CrossProcessSum>& group) {
  int64_t converted = 0;
  for (const auto& child : module.modules(/*include_self=*/true)) {
    if (auto bn = std::dynamic_pointer_cast<SyncBatchNorm2dImpl>(child)) {
      bn->set_process_group(group);
      ++converted;
    }
  }
  return converted;
}

std::vector<int64_t> synchronised_features(torch::nn::Module& module) {
  std::vector<int64_t> features;
  for (const auto& child : module.modules(/*include_self=*/true)) {
    if (auto bn = std::dynamic_pointer_cast<SyncBatchNorm2dImpl>(child); bn && bn->synchronised()) {
      features.push_back(bn->features);
    }
  }
  return features;
}

}  // namespace ddpbench
