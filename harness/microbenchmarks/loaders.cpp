// The host and device loaders in images per second, on synthetic CIFAR-shaped data.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "data/batch_loader.hpp"
#include "data/sampler.hpp"
#include "data/synthetic.hpp"

namespace ddpbench::microbench {
namespace {

const DatasetSplits& data() {
  static const DatasetSplits splits = make_synthetic({1, 8192, 16});
  return splits;
}

void run_epochs(benchmark::State& state, LoaderKind kind, c10::Device device, int64_t workers) {
  LoaderOptions options;
  options.batch_size = 256;
  options.workers = workers;
  options.device = device;
  auto loader = make_loader(kind, data().train, options);
  int64_t images = 0;
  int64_t epoch = 0;
  for (auto _ : state) {
    loader->start_epoch({train_shard_indices(data().train.size(), 1, epoch, {0, 1}),
                         random_augmentation(1, epoch, AugmentationStream::train, data().train.size(), 4)});
    ++epoch;
    while (auto batch = loader->next()) images += batch->size();
    if (device.is_cuda()) torch::cuda::synchronize();
  }
  state.counters["images_per_s"] = benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}

void BM_HostLoader(benchmark::State& state) { run_epochs(state, LoaderKind::host, c10::kCPU, state.range(0)); }
BENCHMARK(BM_HostLoader)->Arg(0)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_DeviceLoaderOnCpu(benchmark::State& state) { run_epochs(state, LoaderKind::device, c10::kCPU, 0); }
BENCHMARK(BM_DeviceLoaderOnCpu)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_DeviceLoaderOnGpu(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  run_epochs(state, LoaderKind::device, c10::Device(c10::kCUDA, 0), 0);
}
BENCHMARK(BM_DeviceLoaderOnGpu)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ddpbench::microbench
