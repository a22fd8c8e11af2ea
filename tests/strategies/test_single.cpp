#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include "data/synthetic.hpp"
#include "harness/base/input_error.hpp"
#include "models/registry.hpp"
#include "strategies/single.hpp"

namespace ddpbench {
namespace {

struct Fixture {
  explicit Fixture(c10::Device device, double lr = 0.05)
      : model(find_model("tiny").make(10)),
        optimizer((model.ptr()->to(device), model.ptr()->parameters()), torch::optim::SGDOptions(lr).momentum(0.9)),
        timer(make_phase_timer(device)) {
    dist.device = device;
  }
  torch::nn::AnyModule model;
  torch::optim::SGD optimizer;
  DistContext dist;
  StrategyOptions options;
  std::unique_ptr<PhaseTimer> timer;
};

Batch fixed_batch(c10::Device device) {
  static const auto data = make_synthetic({1, 128, 8});
  return Batch{((data.train.images.to(at::kFloat) / 255.0 - 0.5) / 0.5).to(device), data.train.labels.to(device)};
}

void expect_steps_lower_the_loss(c10::Device device) {
  torch::manual_seed(0);
  Fixture f(device);
  auto strategy = make_single_strategy(f.options);
  MixedPrecision precision(AmpMode::off, f.dist.device);
  TrainingSetup setup{f.model, f.optimizer, f.dist, f.options, *f.timer, precision};
  strategy->prepare(setup);
  const Batch batch = fixed_batch(device);
  const double first = strategy->train_step(batch).item<double>();
  double last = first;
  for (int i = 0; i < 15; ++i) last = strategy->train_step(batch).item<double>();
  EXPECT_LT(last, first * 0.8) << "first " << first << ", last " << last;
  const PhaseSeconds phases = f.timer->collect();
  EXPECT_GT(phases.forward_s, 0);
  EXPECT_GT(phases.backward_s, 0);
  EXPECT_GT(phases.optimizer_s, 0);
  EXPECT_EQ(phases.comm_s, 0);
}

TEST(Single, StepsLowerTheLossAndRecordPhases) { expect_steps_lower_the_loss(c10::kCPU); }

TEST(Single, OneStepIsPlainSgdWithMomentum) {
  torch::manual_seed(0);
  Fixture f(c10::kCPU, 0.1);
  auto reference = f.model.clone();
  auto strategy = make_single_strategy(f.options);
  MixedPrecision precision(AmpMode::off, f.dist.device);
  TrainingSetup setup{f.model, f.optimizer, f.dist, f.options, *f.timer, precision};
  strategy->prepare(setup);
  const Batch batch = fixed_batch(c10::kCPU);
  strategy->train_step(batch);
  // By hand: first momentum step is p - lr * grad.
  const auto loss = classification_loss(reference.forward<at::Tensor>(batch.images), batch.labels);
  loss.backward();
  const auto ours = f.model.ptr()->parameters();
  const auto theirs = reference.ptr()->parameters();
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(at::allclose(ours[i], theirs[i] - 0.1 * theirs[i].grad(), 1e-5, 1e-6)) << i;
  }
}

TEST(StrategyRegistry, UnknownNamesListTheKnownOnes) {
  EXPECT_EQ(find_strategy("single").name, "single");
  try {
    find_strategy("horovod");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown strategy 'horovod' (expected single"), std::string::npos);
  }
}

TEST(GpuSingle, StepsLowerTheLossOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_steps_lower_the_loss(c10::Device(c10::kCUDA, 0));
}

}  // namespace
}  // namespace ddpbench
