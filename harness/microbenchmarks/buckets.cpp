// Gradient-bucket flatten and unflatten over ResNet-50's parameter shapes (the copies DDP's
// reducer and DataParallel's coalesced broadcast make), in bytes per second.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <torch/csrc/utils/tensor_flatten.h>

#include "models/registry.hpp"

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

}  // namespace
}  // namespace ddpbench::microbench
