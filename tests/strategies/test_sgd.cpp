#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "models/registry.hpp"
#include "strategies/sgd.hpp"

namespace ddpbench {
namespace {

// Parameters after `steps` SGD steps with momentum on fixed random gradients.
std::vector<at::Tensor> run(SgdImpl impl, int steps) {
  torch::manual_seed(5);
  auto model = find_model("tiny").make(10);
  auto params = model.ptr()->parameters();
  auto optimizer = make_sgd(params, 0.1, 0.9, impl);
  for (int s = 0; s < steps; ++s) {
    optimizer->zero_grad();
    for (auto& p : params) p.mutable_grad() = at::randn_like(p);
    optimizer->step();
  }
  std::vector<at::Tensor> out;
  for (auto& p : params) out.push_back(p.detach().clone());
  return out;
}

TEST(Sgd, ForeachAndFusedMatchLibTorchsSgd) {
  const auto loop = run(SgdImpl::loop, 5);
  for (SgdImpl impl : {SgdImpl::foreach, SgdImpl::fused}) {
    const auto other = run(impl, 5);
    for (std::size_t i = 0; i < loop.size(); ++i) {
      EXPECT_TRUE(at::allclose(loop[i], other[i], 1e-6, 1e-6)) << "parameter " << i << ", impl " << static_cast<int>(impl);
    }
  }
}

TEST(Sgd, FirstStepIsPlainGradientDescent) {
  auto p = at::zeros({2}).requires_grad_(true);
  auto optimizer = make_sgd({p}, 0.5, 0.9, SgdImpl::foreach);
  p.mutable_grad() = at::tensor({2.0f, -4.0f});
  optimizer->step();
  EXPECT_TRUE(at::equal(p.detach(), at::tensor({-1.0f, 2.0f})));
  optimizer->step();  // momentum: buf = 0.9 * g + g
  EXPECT_TRUE(at::allclose(p.detach(), at::tensor({-1.0f - 0.5f * 3.8f, 2.0f + 0.5f * 7.6f})));
}

TEST(Sgd, ScaledStepNeedsTheFusedKernel) {
  auto p = at::zeros({2}).requires_grad_(true);
  MultiTensorSgd optimizer({p}, torch::optim::SGDOptions(0.1).momentum(0.9), SgdImpl::foreach);
  EXPECT_THROW(optimizer.scaled_step(at::ones({1}), at::zeros({1})), c10::Error);
}

}  // namespace
}  // namespace ddpbench
