// One DataParallel training step over two replicas, in each implementation: ddpbench's
// replicas (kept across steps, the weights copied in) against LibTorch's data_parallel (the
// module cloned onto every replica on every call, each layer re-initialised on the host before
// the weights are copied in). On CPU replicas where there is no GPU, on two GPU replicas
// (cuda:0 twice when there is one) otherwise. Counters: the step, and the part of it spent
// re-making the replicas (forward's replicate part), in seconds.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "harness/control/run_config.hpp"
#include "harness/timing/phase_timer.hpp"
#include "models/registry.hpp"
#include "strategies/sgd.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench::microbench {
namespace {

void BM_DataParallelStep(benchmark::State& state, DpImpl impl, const std::string& model_name) {
  const bool gpu = torch::cuda::is_available();
  const c10::Device primary = gpu ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  const int64_t batch = gpu ? 256 : 16;
  RunConfig config;
  config.strategy = "dp";
  config.model = model_name;
  config.devices = gpu ? (torch::cuda::device_count() > 1 ? "0,1" : "0,0") : "cpu,cpu";
  config.dp_impl = impl;
  config.batch_size = batch;
  torch::manual_seed(0);
  auto model = find_model(model_name).make(1000);
  model.ptr()->to(primary);
  auto optimizer = make_sgd(model.ptr()->parameters(), 0.001, 0.9, SgdImpl::loop);
  auto timer = make_phase_timer(primary);
  MixedPrecision precision(AmpMode::off, primary);
  DistContext dist;
  dist.device = primary;
  const StrategyOptions options = strategy_options(config);
  auto strategy = find_strategy("dp").make(options);
  TrainingSetup setup{model, *optimizer, dist, options, *timer, precision};
  strategy->prepare(setup);
  const auto opts = at::TensorOptions().device(primary);
  const Batch images{at::randn({batch, 3, 32, 32}, opts), at::randint(0, 1000, {batch}, opts.dtype(at::kLong))};
  strategy->train_step(images);  // warm-up: allocator, first clones
  timer->collect();
  PhaseSeconds phases;
  for (auto _ : state) {
    strategy->train_step(images);
    phases += timer->collect();  // waits for the device
  }
  const auto steps = static_cast<double>(state.iterations());
  state.counters["step_s"] = phases.total_s() / steps;
  state.counters["replicate_s"] = phases.replicate_s / steps;
  state.counters["forward_s"] = phases.forward_s / steps;
  state.counters["images_per_s"] = benchmark::Counter(static_cast<double>(batch) * steps, benchmark::Counter::kIsRate);
  state.SetLabel(config.devices + ", batch " + std::to_string(batch));
}
BENCHMARK_CAPTURE(BM_DataParallelStep, replicas_resnet50, DpImpl::replicas, std::string("resnet50"))
    ->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_DataParallelStep, libtorch_resnet50, DpImpl::libtorch, std::string("resnet50"))
    ->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_DataParallelStep, replicas_resnet18, DpImpl::replicas, std::string("resnet18"))
    ->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_DataParallelStep, libtorch_resnet18, DpImpl::libtorch, std::string("resnet18"))
    ->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace ddpbench::microbench
