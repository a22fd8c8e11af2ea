// Allreduce over c10d across message sizes, with nccl-tests' metrics: algorithm bandwidth
// (bytes / time) and bus bandwidth (algbw * 2(n-1)/n, what each link carries in a ring).
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "harness/launch/launcher.hpp"
#include "harness/launch/rank_environment.hpp"
#include "harness/microbenchmarks/world.hpp"

namespace ddpbench::microbench {
namespace {

// Set by one thread only: Google Benchmark sums counters over threads, and every rank
// takes part in the same collectives. With one rank nothing crosses a link: the bus
// bandwidth is not applicable (not 0), and the label says so.
void set_bandwidth(benchmark::State& state, int64_t bytes, int64_t world) {
  if (state.thread_index() != 0) return;
  state.SetBytesProcessed(state.iterations() * bytes);
  const double algbw = static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.counters["algbw_GBps"] = benchmark::Counter(algbw / 1e9, benchmark::Counter::kIsRate);
  if (world > 1) {
    state.counters["busbw_GBps"] = benchmark::Counter(
        algbw / 1e9 * 2.0 * static_cast<double>(world - 1) / static_cast<double>(world), benchmark::Counter::kIsRate);
  } else {
    state.SetLabel("busbw n/a: one rank, no link crossed");
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["ranks"] = static_cast<double>(world);
}

// Two ranks on two benchmark threads: each iteration is one allreduce both take part in.
void BM_GlooAllreduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  Communicator& comm = gloo_rank(static_cast<int>(state.thread_index()));
  auto tensor = at::ones({bytes / 4}, at::kFloat);
  for (auto _ : state) comm.sum(tensor, "allreduce");
  set_bandwidth(state, bytes, 2);
}
BENCHMARK(BM_GlooAllreduce)->RangeMultiplier(16)->Range(1 << 10, 64 << 20)->Threads(2)->UseRealTime()->Iterations(20);

// One rank of a world someone else started (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as
// torchrun sets them): the allreduce between those processes, over the link between them.
// Every rank runs the same sizes and iterations in step; `ddpbench project --calibrate` fits
// the ring model's latency and bandwidth to rank 0's JSON. Skipped outside such a world.
void BM_RankAllreduce(benchmark::State& state) {
  static const std::shared_ptr<Communicator> comm = []() -> std::shared_ptr<Communicator> {
    const auto env = rank_environment_from_process();
    if (!env || env->world_size < 2) return nullptr;
    return std::make_shared<Communicator>(
        CommunicatorOptions{*env, CommBackend::gloo, c10::kCPU, std::chrono::seconds(120)});
  }();
  if (!comm) {
    state.SkipWithError("not a rank of a world of 2 or more (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
    return;
  }
  const int64_t bytes = state.range(0);
  auto tensor = at::ones({bytes / 4}, at::kFloat);
  comm->sum(tensor, "allreduce");  // every rank here before the clock starts
  for (auto _ : state) comm->sum(tensor, "allreduce");
  set_bandwidth(state, bytes, comm->world_size());
}
BENCHMARK(BM_RankAllreduce)->RangeMultiplier(4)->Range(64 << 10, 16 << 20)->UseRealTime()->Iterations(6);

// Gloo with one rank: the collective's own overhead, and the "n/a" bus bandwidth of a world
// with no link.
void BM_GlooAllreduceOneRank(benchmark::State& state) {
  static std::shared_ptr<Communicator> comm = [] {
    return std::make_shared<Communicator>(CommunicatorOptions{local_rank_environment(0, 1, free_port()),
                                                              CommBackend::gloo, c10::kCPU, std::chrono::seconds(60)});
  }();
  const int64_t bytes = state.range(0);
  auto tensor = at::ones({bytes / 4}, at::kFloat);
  for (auto _ : state) comm->sum(tensor, "allreduce");
  set_bandwidth(state, bytes, 1);
}
BENCHMARK(BM_GlooAllreduceOneRank)->Arg(1 << 20)->UseRealTime()->Iterations(20);

// NCCL with one rank where a GPU is (a world of one: the code path, not a network): the cost
// of the collective's launch and a device copy.
void BM_NcclAllreduceOneGpu(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  static std::shared_ptr<Communicator> comm = [] {
    return std::make_shared<Communicator>(CommunicatorOptions{
        local_rank_environment(0, 1, free_port()), CommBackend::nccl, c10::Device(c10::kCUDA, 0), std::chrono::seconds(60)});
  }();
  const int64_t bytes = state.range(0);
  auto tensor = at::ones({bytes / 4}, at::TensorOptions().dtype(at::kFloat).device(c10::kCUDA));
  for (auto _ : state) {
    comm->sum(tensor, "allreduce");
    torch::cuda::synchronize();
  }
  set_bandwidth(state, bytes, 1);
}
BENCHMARK(BM_NcclAllreduceOneGpu)->RangeMultiplier(16)->Range(1 << 10, 256 << 20)->UseRealTime();

}  // namespace
}  // namespace ddpbench::microbench
