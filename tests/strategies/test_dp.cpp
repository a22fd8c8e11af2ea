#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "data/synthetic.hpp"
#include "harness/base/input_error.hpp"
#include "harness/control/run_config.hpp"
#include "models/registry.hpp"
#include "strategies/dp.hpp"
#include "strategies/sgd.hpp"
#include "strategies/single.hpp"

namespace ddpbench {
namespace {

Batch batch_of(int64_t n) {
  static const auto data = make_synthetic({6, 64, 8});
  return Batch{(data.train.images.narrow(0, 0, n).to(at::kFloat) / 255.0 - 0.5) / 0.5, data.train.labels.narrow(0, 0, n)};
}

struct TrainedModel {
  std::vector<at::Tensor> parameters, buffers;
  double loss = 0;
};

TrainedModel train_dp(RunConfig config, c10::Device primary, const Batch& batch) {
  config.model = "tiny";
  torch::manual_seed(9);
  auto model = find_model(config.model).make(10);
  model.ptr()->to(primary);
  auto optimizer = make_sgd(model.ptr()->parameters(), 0.1, 0.9, SgdImpl::loop);
  auto timer = make_phase_timer(primary);
  MixedPrecision precision(config.amp, primary);
  DistContext dist;
  dist.device = primary;
  const StrategyOptions options = strategy_options(config);
  auto strategy = find_strategy(config.strategy).make(options);
  TrainingSetup setup{model, *optimizer, dist, options, *timer, precision};
  strategy->prepare(setup);
  TrainedModel run;
  run.loss = strategy->train_step(Batch{batch.images.to(primary), batch.labels.to(primary)}).item<double>();
  for (const auto& p : model.ptr()->parameters()) run.parameters.push_back(p.detach().cpu());
  for (const auto& b : model.ptr()->buffers()) run.buffers.push_back(b.detach().cpu());
  return run;
}

// DataParallel's arithmetic on one device: each chunk through the model on its own (batch
// norm normalises each chunk by its own statistics), outputs concatenated, one loss, one
// step. Only the first chunk's running statistics survive DataParallel (the replicas' are
// dropped), so the expected buffers come from a second model that sees the first chunk alone.
TrainedModel chunked_reference(int64_t chunks, const Batch& batch) {
  torch::manual_seed(9);
  auto model = find_model("tiny").make(10);
  auto first_chunk_only = model.clone();
  auto optimizer = make_sgd(model.ptr()->parameters(), 0.1, 0.9, SgdImpl::loop);
  const auto parts = batch.images.chunk(chunks, 0);
  std::vector<at::Tensor> outputs;
  for (const auto& part : parts) outputs.push_back(model.forward<at::Tensor>(part));
  const auto loss = classification_loss(at::cat(outputs, 0), batch.labels);
  loss.backward();
  optimizer->step();
  {
    torch::NoGradGuard no_grad;
    first_chunk_only.forward<at::Tensor>(parts[0]);
  }
  TrainedModel run;
  run.loss = loss.item<double>();
  for (const auto& p : model.ptr()->parameters()) run.parameters.push_back(p.detach().clone());
  for (const auto& b : first_chunk_only.ptr()->buffers()) run.buffers.push_back(b.detach().clone());
  return run;
}

void expect_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::allclose(a[i].to(at::kDouble), b[i].to(at::kDouble), 1e-5, 1e-6)) << what << " " << i;
  }
}

TEST(Dp, ReplicasOnTwoCpuDevicesDoDataParallelsArithmetic) {
  RunConfig config;
  config.strategy = "dp";
  config.devices = "cpu,cpu";
  const Batch batch = batch_of(32);
  const TrainedModel dp = train_dp(config, c10::kCPU, batch);
  const TrainedModel reference = chunked_reference(2, batch);
  EXPECT_NEAR(dp.loss, reference.loss, 1e-6);
  expect_close(dp.parameters, reference.parameters, "parameter");
  expect_close(dp.buffers, reference.buffers, "buffer");
}

TEST(Dp, OneDeviceIsTheSingleStrategy) {
  RunConfig config;
  config.strategy = "dp";
  config.devices = "cpu";
  config.allow_single_device = true;
  RunConfig single_config;
  const Batch batch = batch_of(32);
  const TrainedModel dp = train_dp(config, c10::kCPU, batch);
  const TrainedModel single = train_dp(single_config, c10::kCPU, batch);
  expect_close(dp.parameters, single.parameters, "parameter");
  config.dp_impl = DpImpl::libtorch;  // LibTorch's data_parallel over one device runs forward as is
  expect_close(train_dp(config, c10::kCPU, batch).parameters, single.parameters, "parameter");
}

TEST(Dp, AutocastReachesTheReplicaThreads) {
  RunConfig config;
  config.strategy = "dp";
  config.devices = "cpu,cpu";
  config.amp = AmpMode::bf16;
  const TrainedModel run = train_dp(config, c10::kCPU, batch_of(32));
  EXPECT_TRUE(std::isfinite(run.loss));
}

TEST(Dp, PreflightSkipsOrRejects) {
  RunConfig config;
  config.strategy = "dp";
  config.devices = "cpu";
  const auto reason = dp_preflight(strategy_options(config));
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("needs at least 2 devices, 1 available (--allow-single-device"), std::string::npos);
  config.allow_single_device = true;
  EXPECT_FALSE(dp_preflight(strategy_options(config)).has_value());
  config.devices = "cpu,cpu,cpu";
  config.batch_size = 256;
  EXPECT_THROW(dp_preflight(strategy_options(config)), InputError);  // 256 does not divide over 3
  config.devices = "cpu,0";
  EXPECT_THROW(dp_preflight(strategy_options(config)), InputError);
  config.devices = "7";
  EXPECT_THROW(dp_preflight(strategy_options(config)), InputError);
  if (!torch::cuda::is_available()) {
    config.devices = "all";
    EXPECT_NE(dp_preflight(strategy_options(config)).value_or("").find("needs CUDA devices"), std::string::npos);
  }
}

TEST(GpuDp, ReplicasOnOneGpuMatchSingle) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  RunConfig config;
  config.strategy = "dp";
  config.devices = "0";
  config.allow_single_device = true;
  RunConfig single_config;
  const Batch batch = batch_of(32);
  for (DpImpl impl : {DpImpl::replicas, DpImpl::libtorch}) {
    config.dp_impl = impl;
    expect_close(train_dp(config, cuda, batch).parameters, train_dp(single_config, cuda, batch).parameters, "parameter");
  }
}

TEST(GpuChannelsLast, MatchesContiguousOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  auto model = find_model("resnet18").make(10);
  model.ptr()->to(cuda);
  model.ptr()->eval();
  auto nhwc = model.clone();
  for (auto& p : nhwc.ptr()->parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
  const auto x = at::randn({8, 3, 32, 32}, at::TensorOptions().device(cuda));
  at::globalContext().setAllowTF32CuDNN(false);
  const auto a = model.forward<at::Tensor>(x);
  const auto b = nhwc.forward<at::Tensor>(x.contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(at::allclose(a, b, 1e-4, 1e-4)) << (a - b).abs().max().item<double>();
  at::globalContext().setAllowTF32CuDNN(true);
}

}  // namespace
}  // namespace ddpbench
