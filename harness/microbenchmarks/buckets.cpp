// Gradient-bucket flatten and unflatten over ResNet-50's parameter shapes (the copies DDP's
// reducer and DataParallel's coalesced broadcast make), in bytes per second; and what a DDP
// row pays per step to record when backward made each gradient ready (the tuning advisor's input).
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <torch/csrc/utils/tensor_flatten.h>

#include "models/registry.hpp"
#include "strategies/bucket_allreduce_hook.hpp"

namespace ddpbench::microbench {
namespace {

std::vector<at::Tensor> resnet50_gradients() {
  std::vector<at::Tensor> grads;
  for (const auto& p : find_model("resnet50").make(1000).ptr()->parameters()) grads.push_back(at::randn_like(p));
  return grads;
}

int64_t bytes_of(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const auto& t : tensors) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

void BM_FlattenGradients(benchmark::State& state) {
  static const auto grads = resnet50_gradients();
  for (auto _ : state) benchmark::DoNotOptimize(torch::utils::flatten_dense_tensors(grads));
  state.SetBytesProcessed(state.iterations() * bytes_of(grads));
}
BENCHMARK(BM_FlattenGradients)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_UnflattenIntoGradients(benchmark::State& state) {
  static const auto grads = resnet50_gradients();
  const auto flat = torch::utils::flatten_dense_tensors(grads);
  for (auto _ : state) {
    const auto views = torch::utils::unflatten_dense_tensors(flat, grads);
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i].copy_(views[i]);
  }
  state.SetBytesProcessed(state.iterations() * bytes_of(grads));
}
BENCHMARK(BM_UnflattenIntoGradients)->UseRealTime()->Unit(benchmark::kMillisecond);

// One step's marks of ResNet-50's 161 gradients (state.range(0)) as the DDP row records them
// (BucketTimeline::gradient_ready from autograd's hooks), handed over and resolved into seconds,
// against the same step without them (Arg 0): the difference is the recording's cost per step.
void BM_GradientReadyMarks(benchmark::State& state) {
  BucketTimeline timeline(c10::Device(c10::kCPU));
  const auto gradients = static_cast<std::size_t>(state.range(0));
  int64_t step = 0;
  for (auto _ : state) {
    timeline.start_step(step++);
    timeline.backward_started();
    for (std::size_t g = 0; g < gradients; ++g) timeline.gradient_ready(gradients - 1 - g);
    timeline.bucket_ready(0);
    timeline.completed(timeline.launched(0));
    timeline.last_gradient_ready();
    benchmark::DoNotOptimize(timeline.finish_step()());
  }
  state.counters["gradients"] = static_cast<double>(gradients);
}
BENCHMARK(BM_GradientReadyMarks)->Arg(0)->Arg(161)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ddpbench::microbench
