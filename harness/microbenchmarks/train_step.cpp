// One ResNet-50 training step (forward, backward, SGD) at a few batch sizes: on the GPU
// where there is one (synchronised each step), else on the CPU with small batches.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "models/registry.hpp"
#include "strategies/sgd.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench::microbench {
namespace {

void BM_ResNet50TrainStep(benchmark::State& state) {
  const bool gpu = torch::cuda::is_available();
  const c10::Device device = gpu ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  const int64_t batch = state.range(0);
  if (!gpu && batch > 16) {
    state.SkipWithError("batches above 16 run only on a GPU (seconds per step on a CPU)");
    return;
  }
  auto model = find_model("resnet50").make(1000);
  model.ptr()->to(device);
  auto optimizer = make_sgd(model.ptr()->parameters(), 0.001, 0.9, SgdImpl::loop);
  const auto images = at::randn({batch, 3, 32, 32}, at::TensorOptions().device(device));
  const auto labels = at::randint(0, 1000, {batch}, at::TensorOptions().dtype(at::kLong).device(device));
  for (auto _ : state) {
    optimizer->zero_grad();
    classification_loss(model.forward<at::Tensor>(images), labels).backward();
    optimizer->step();
    if (gpu) torch::cuda::synchronize();
  }
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(batch * state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(device.str());
}
BENCHMARK(BM_ResNet50TrainStep)->Arg(8)->Arg(16)->Arg(64)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

}  // namespace
}  // namespace ddpbench::microbench
