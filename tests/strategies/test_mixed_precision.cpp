#include <gtest/gtest.h>

#include <cmath>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/nn/modules/conv.h>
#include <torch/optim/sgd.h>

#include "models/registry.hpp"
#include "strategies/mixed_precision.hpp"
#include "strategies/sgd.hpp"

namespace ddpbench {
namespace {

TEST(MixedPrecision, Bf16AutocastOnTheCpuChangesAConvsOutputAndRestoresTheState) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 3));
  const auto x = at::randn({2, 3, 8, 8});
  MixedPrecision amp(AmpMode::bf16, c10::kCPU);
  {
    auto scope = amp.autocast();
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::kCPU));
    EXPECT_EQ(conv(x).scalar_type(), at::kBFloat16);
    // The loss stays in float32, as autocast's fp32 list has cross_entropy.
    EXPECT_EQ(at::cross_entropy_loss(conv(x).flatten(1), at::zeros({2}, at::kLong)).scalar_type(), at::kFloat);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
  EXPECT_EQ(conv(x).scalar_type(), at::kFloat);
  EXPECT_EQ(amp.scale(at::ones({})).item<double>(), 1.0);
}

TEST(MixedPrecision, OffDoesNothing) {
  MixedPrecision amp(AmpMode::off, c10::kCPU);
  { auto scope = amp.autocast(); EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU)); }
  EXPECT_EQ(amp.current_scale(), 1.0);
}

// A one-parameter problem: loss = sum(w * x), so the gradient is x.
struct Toy {
  at::Tensor w = at::ones({3}).requires_grad_(true);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  explicit Toy(SgdImpl impl) : optimizer(make_sgd({w}, 0.5, 0.0, impl)) {}
  void backward(MixedPrecision& amp, const at::Tensor& x) {
    optimizer->zero_grad();
    amp.scale((w * x).sum()).backward();
  }
};

void expect_loss_scaler_semantics(SgdImpl impl) {
  LossScalerOptions options;
  options.growth_interval = 3;
  MixedPrecision amp(AmpMode::fp16, c10::kCPU, options);
  Toy toy(impl);
  EXPECT_EQ(amp.current_scale(), 65536.0);
  EXPECT_EQ(amp.scale(at::full({}, 2.0)).item<double>(), 131072.0);

  // A clean step: the gradient is unscaled before the update (w -= 0.5 * x).
  toy.backward(amp, at::tensor({1.0f, 2.0f, 4.0f}));
  EXPECT_EQ(toy.w.grad()[1].item<float>(), 2.0f * 65536.0f);
  amp.step(*toy.optimizer, {toy.w});
  EXPECT_TRUE(at::allclose(toy.w.detach(), at::tensor({0.5f, 0.0f, -1.0f})));
  EXPECT_EQ(amp.current_scale(), 65536.0);

  // An overflowing step is skipped, and the scale backs off.
  toy.backward(amp, at::tensor({1.0f, std::numeric_limits<float>::infinity(), 0.0f}));
  amp.step(*toy.optimizer, {toy.w});
  EXPECT_TRUE(at::allclose(toy.w.detach(), at::tensor({0.5f, 0.0f, -1.0f}))) << "a skipped step changed the weights";
  EXPECT_EQ(amp.current_scale(), 32768.0);
  EXPECT_EQ(amp.skipped_steps(), 1);

  // Three clean steps in a row grow it again.
  for (int i = 0; i < 3; ++i) {
    toy.backward(amp, at::tensor({0.0f, 0.0f, 0.0f}));
    amp.step(*toy.optimizer, {toy.w});
  }
  EXPECT_EQ(amp.current_scale(), 65536.0);
  EXPECT_EQ(amp.skipped_steps(), 1);
}

TEST(MixedPrecision, LossScalerGrowsBacksOffSkipsAndUnscalesWithLibTorchsSgd) {
  expect_loss_scaler_semantics(SgdImpl::loop);
}
TEST(MixedPrecision, LossScalerDoesTheSameInsideTheFusedStep) { expect_loss_scaler_semantics(SgdImpl::fused); }
TEST(MixedPrecision, LossScalerWithForeachSgd) { expect_loss_scaler_semantics(SgdImpl::foreach); }

TEST(GpuMixedPrecision, Fp16AndBf16StepsTrainOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  for (AmpMode mode : {AmpMode::fp16, AmpMode::bf16}) {
    torch::manual_seed(0);
    auto model = find_model("tiny").make(10);
    model.ptr()->to(cuda);
    auto optimizer = make_sgd(model.ptr()->parameters(), 0.05, 0.9, SgdImpl::fused);
    MixedPrecision amp(mode, cuda);
    const auto x = at::randn({64, 3, 32, 32}, at::TensorOptions().device(cuda));
    const auto y = at::randint(0, 10, {64}, at::TensorOptions().dtype(at::kLong).device(cuda));
    double first = 0, last = 0;
    for (int i = 0; i < 20; ++i) {
      optimizer->zero_grad();
      at::Tensor loss;
      {
        auto scope = amp.autocast();
        const auto logits = model.forward<at::Tensor>(x);
        EXPECT_EQ(logits.scalar_type(), mode == AmpMode::fp16 ? at::kHalf : at::kBFloat16);
        loss = at::cross_entropy_loss(logits, y);
      }
      amp.scale(loss).backward();
      amp.step(*optimizer, model.ptr()->parameters());
      (i == 0 ? first : last) = loss.item<double>();
    }
    EXPECT_LT(last, first) << "mode " << static_cast<int>(mode);
    EXPECT_EQ(amp.skipped_steps(), 0);
  }
}

}  // namespace
}  // namespace ddpbench
