#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/parallel/data_parallel.h>
#include <torch/cuda.h>

#include "data/synthetic.hpp"
#include "harness/base/input_error.hpp"
#include "harness/control/run_config.hpp"
#include "models/registry.hpp"
#include "models/tiny_cnn.hpp"
#include "strategies/dp.hpp"
#include "strategies/sgd.hpp"
#include "strategies/single.hpp"

namespace ddpbench {
namespace {

Batch batch_of(int64_t n, int64_t first = 0) {
  static const auto data = make_synthetic({6, 64, 8});
  return Batch{(data.train.images.narrow(0, first, n).to(at::kFloat) / 255.0 - 0.5) / 0.5,
               data.train.labels.narrow(0, first, n)};
}

struct TrainedModel {
  std::vector<at::Tensor> parameters, buffers;
  std::vector<double> losses;  // per step
  std::vector<at::ScalarType> output_dtypes;  // of the forward, per step
  PhaseSeconds phases;                         // summed over the steps
};

Batch on(const Batch& b, const c10::Device& device) { return Batch{b.images.to(device), b.labels.to(device)}; }

// The tiny model, recording the dtype of every output it computes, on any thread.
std::mutex g_outputs_mutex;
std::vector<at::ScalarType> g_output_dtypes;

struct RecordingCnnImpl : torch::nn::Cloneable<RecordingCnnImpl> {
  RecordingCnnImpl() { reset(); }
  void reset() override { inner = register_module("inner", TinyCnn(10)); }
  at::Tensor forward(const at::Tensor& x) {
    auto out = inner->forward(x);
    std::lock_guard lock(g_outputs_mutex);
    g_output_dtypes.push_back(out.scalar_type());
    return out;
  }
  TinyCnn inner{nullptr};
};
TORCH_MODULE(RecordingCnn);

// `config`'s strategy over `batches`, one step each, from the tiny model seeded 9 (or the
// recording one).
TrainedModel train_dp(RunConfig config, c10::Device primary, const std::vector<Batch>& batches,
                      bool recording = false) {
  config.model = "tiny";
  torch::manual_seed(9);
  auto model = recording ? torch::nn::AnyModule(RecordingCnn()) : find_model(config.model).make(10);
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
  {
    std::lock_guard lock(g_outputs_mutex);
    g_output_dtypes.clear();
  }
  for (const auto& batch : batches) {
    run.losses.push_back(strategy->train_step(on(batch, primary)).item<double>());
    run.phases += timer->collect();
  }
  {
    std::lock_guard lock(g_outputs_mutex);
    run.output_dtypes = g_output_dtypes;
  }
  for (const auto& p : model.ptr()->parameters()) run.parameters.push_back(p.detach().cpu());
  for (const auto& b : model.ptr()->buffers()) run.buffers.push_back(b.detach().cpu());
  return run;
}

TrainedModel train_dp(RunConfig config, c10::Device primary, const Batch& batch) {
  return train_dp(std::move(config), primary, std::vector<Batch>{batch});
}

// DataParallel's arithmetic in one process on one device, step by step: each chunk through
// the model on its own (batch norm normalises each chunk by its own statistics), outputs
// concatenated, one loss, one step. Only the first chunk's running statistics survive
// DataParallel (the replicas' are dropped): the expected buffers come from a second model,
// given the first's parameters every step, that sees the first chunk alone.
TrainedModel chunked_reference(int64_t chunks, const std::vector<Batch>& batches) {
  torch::manual_seed(9);
  auto model = find_model("tiny").make(10);
  auto first_chunk_only = model.clone();
  auto optimizer = make_sgd(model.ptr()->parameters(), 0.1, 0.9, SgdImpl::loop);
  TrainedModel run;
  for (const auto& batch : batches) {
    {
      torch::NoGradGuard no_grad;
      const auto from = model.ptr()->parameters();
      const auto to = first_chunk_only.ptr()->parameters();
      for (std::size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    optimizer->zero_grad();
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
    run.losses.push_back(loss.item<double>());
  }
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

void expect_same_steps(const TrainedModel& dp, const TrainedModel& reference) {
  ASSERT_EQ(dp.losses.size(), reference.losses.size());
  for (std::size_t i = 0; i < dp.losses.size(); ++i) EXPECT_NEAR(dp.losses[i], reference.losses[i], 1e-6) << "step " << i;
  expect_close(dp.parameters, reference.parameters, "parameter");
  expect_close(dp.buffers, reference.buffers, "buffer");
}

// Several steps, so that refreshing the replicas and zeroing their gradients between steps
// matter: a replica that kept its gradient or its old parameters would diverge by step 2.
TEST(Dp, ReplicasOnTwoCpuDevicesDoDataParallelsArithmeticStepByStep) {
  RunConfig config;
  config.strategy = "dp";
  config.devices = "cpu,cpu";
  const std::vector<Batch> batches = {batch_of(32), batch_of(32, 32), batch_of(32, 16), batch_of(16, 48)};
  expect_same_steps(train_dp(config, c10::kCPU, batches), chunked_reference(2, batches));
}

// A last batch smaller than the device count scatters over fewer replicas, as PyTorch's
// scatter does (3 images over 4 devices: 3 chunks, 3 replicas).
TEST(Dp, ASmallLastBatchScattersOverFewerReplicas) {
  RunConfig config;
  config.strategy = "dp";
  config.devices = "cpu,cpu,cpu,cpu";
  config.batch_size = 8;
  const std::vector<Batch> batches = {batch_of(8), batch_of(3, 8), batch_of(8, 16)};
  expect_same_steps(train_dp(config, c10::kCPU, batches), chunked_reference(4, batches));
}

// LibTorch's data_parallel on CPU replicas (chunk and cat for its CUDA-only Scatter and
// Gather): the same steps as DataParallel's arithmetic, its replicas' running statistics lost,
// and the clone it makes every step timed as forward's replicate part.
TEST(Dp, LibTorchsDataParallelOnCpuReplicasDoesDataParallelsArithmetic) {
  RunConfig config;
  config.strategy = "dp";
  config.devices = "cpu,cpu";
  config.dp_impl = DpImpl::libtorch;
  const std::vector<Batch> batches = {batch_of(32), batch_of(32, 32), batch_of(32, 16), batch_of(16, 48)};
  const TrainedModel dp = train_dp(config, c10::kCPU, batches);
  const TrainedModel reference = chunked_reference(2, batches);
  ASSERT_EQ(dp.losses.size(), reference.losses.size());
  for (std::size_t i = 0; i < dp.losses.size(); ++i) EXPECT_NEAR(dp.losses[i], reference.losses[i], 1e-6) << "step " << i;
  expect_close(dp.parameters, reference.parameters, "parameter");
  torch::manual_seed(9);
  const auto untouched = find_model("tiny").make(10).ptr()->buffers();
  ASSERT_EQ(dp.buffers.size(), untouched.size());
  for (std::size_t i = 0; i < dp.buffers.size(); ++i) EXPECT_TRUE(at::equal(dp.buffers[i], untouched[i])) << i;
  EXPECT_GT(dp.phases.replicate_s, 0.0);
  EXPECT_LT(dp.phases.replicate_s, dp.phases.forward_s);
  EXPECT_DOUBLE_EQ(dp.phases.total_s(), dp.phases.data_s + dp.phases.forward_s + dp.phases.backward_s +
                                            dp.phases.comm_s + dp.phases.optimizer_s);
  config.dp_impl = DpImpl::replicas;  // the control: replicas kept across steps are never re-made
  EXPECT_EQ(train_dp(config, c10::kCPU, batches).phases.replicate_s, 0.0);
}

// LibTorch's parallel_apply is at::parallel_for, a header template: compiled without OpenMP
// (as ddpbench is, and as TorchConfig leaves a LibTorch user), it runs every replica on the
// caller's thread, one after another. So autocast reaches every replica (with OpenMP the
// workers would start without it and compute in fp32), and the replicas never overlap.
TEST(Dp, LibTorchsParallelApplyRunsTheReplicasOnTheCallersThreadHere) {
  struct ThreadRecordingImpl : torch::nn::Cloneable<ThreadRecordingImpl> {
    ThreadRecordingImpl() { reset(); }
    void reset() override { inner = register_module("inner", TinyCnn(10)); }
    at::Tensor forward(const at::Tensor& x) {
      threads.push_back(std::this_thread::get_id());
      return inner->forward(x);
    }
    TinyCnn inner{nullptr};
    std::vector<std::thread::id> threads;
  };
  torch::manual_seed(9);
  std::vector<std::shared_ptr<ThreadRecordingImpl>> replicas = {std::make_shared<ThreadRecordingImpl>(),
                                                                std::make_shared<ThreadRecordingImpl>()};
  const auto inputs = batch_of(16).images.chunk(2, 0);
  MixedPrecision precision(AmpMode::bf16, c10::kCPU);
  std::vector<at::Tensor> outputs;
  {
    const auto autocast = precision.autocast();
    outputs = torch::nn::parallel::parallel_apply(replicas, inputs, std::vector<c10::Device>{c10::kCPU, c10::kCPU});
  }
  ASSERT_EQ(outputs.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(replicas[i]->threads.size(), 1u);
    EXPECT_EQ(replicas[i]->threads[0], std::this_thread::get_id()) << "replica " << i << " ran on another thread";
    EXPECT_EQ(outputs[i].scalar_type(), at::kBFloat16) << "replica " << i;
  }
}

// Through the registry's data_parallel, as the libtorch row runs it: under bf16 autocast both
// replicas' outputs are bf16 (a replica in fp32 would promote the gathered output to fp32).
TEST(Dp, AutocastReachesEveryReplicaOfLibTorchsDataParallel) {
  torch::manual_seed(9);
  auto model = find_model("tiny").make(10);
  MixedPrecision precision(AmpMode::bf16, c10::kCPU);
  int replicated = 0;
  const ModelInfo::Section replicating = [&](const std::function<void()>& replicate) {
    ++replicated;
    replicate();
  };
  const auto autocast = precision.autocast();
  const auto out = find_model("tiny").data_parallel(model, batch_of(16).images, {c10::kCPU, c10::kCPU}, replicating);
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_EQ(out.size(0), 16);
  EXPECT_EQ(replicated, 1);
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
  const TrainedModel run =
      train_dp(config, c10::kCPU, {batch_of(32), batch_of(32, 32), batch_of(32, 16)}, /*recording=*/true);
  // Both devices' outputs, every step, in autocast's dtype: the replica's thread inherited
  // autocast (without it the replica computes in fp32).
  ASSERT_EQ(run.output_dtypes.size(), 6u);
  for (const auto dtype : run.output_dtypes) EXPECT_EQ(dtype, at::kBFloat16);
  for (double loss : run.losses) EXPECT_TRUE(std::isfinite(loss));
  config.amp = AmpMode::off;  // the control: the same probe sees fp32 without autocast
  const TrainedModel fp32 = train_dp(config, c10::kCPU, {batch_of(32)}, /*recording=*/true);
  ASSERT_EQ(fp32.output_dtypes.size(), 2u);
  for (const auto dtype : fp32.output_dtypes) EXPECT_EQ(dtype, at::kFloat);
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

// The multi-device path on one GPU: two replicas on cuda:0 (--devices 0,0) scatter, run on
// their own threads, gather and reduce exactly as DataParallel's arithmetic says, step by
// step, in both implementations (strict fp32, so the CUDA kernels agree with the reference).
TEST(GpuDp, TwoReplicasOnOneGpuDoDataParallelsArithmeticStepByStep) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  RunConfig config;
  config.strategy = "dp";
  config.devices = "0,0";
  const std::vector<Batch> batches = {batch_of(32), batch_of(32, 32), batch_of(32, 16)};
  const TrainedModel reference = chunked_reference(2, batches);
  for (DpImpl impl : {DpImpl::replicas, DpImpl::libtorch}) {
    SCOPED_TRACE(enum_name(kDpImplNames, impl));
    config.dp_impl = impl;
    const TrainedModel dp = train_dp(config, cuda, batches);
    ASSERT_EQ(dp.losses.size(), reference.losses.size());
    for (std::size_t i = 0; i < dp.losses.size(); ++i) EXPECT_NEAR(dp.losses[i], reference.losses[i], 1e-4);
    for (std::size_t i = 0; i < dp.parameters.size(); ++i) {
      EXPECT_TRUE(at::allclose(dp.parameters[i].to(at::kDouble), reference.parameters[i].to(at::kDouble), 1e-4, 1e-5))
          << "parameter " << i;
    }
  }
  at::globalContext().setAllowTF32CuDNN(true);
  at::globalContext().setAllowTF32CuBLAS(true);
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
