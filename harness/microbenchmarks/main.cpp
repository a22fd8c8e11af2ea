// ddpbench_microbench: Google Benchmark microbenchmarks of the pieces a training step is
// made of (allreduce, loaders, one ResNet-50 step, a DataParallel step in each
// implementation, gradient-bucket flattening). JSON with
// --benchmark_format=json; each runs in seconds.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "harness/launch/launcher.hpp"
#include "harness/microbenchmarks/world.hpp"

namespace ddpbench::microbench {
namespace {

std::array<std::shared_ptr<Communicator>, 2> g_ranks;

}  // namespace

Communicator& gloo_rank(int rank) { return *g_ranks.at(static_cast<std::size_t>(rank)); }

void form_gloo_world() {
  const int64_t port = free_port();
  std::array<std::thread, 2> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads[static_cast<std::size_t>(rank)] = std::thread([rank, port] {
      g_ranks[static_cast<std::size_t>(rank)] = std::make_shared<Communicator>(CommunicatorOptions{
          local_rank_environment(rank, 2, port), CommBackend::gloo, c10::kCPU, std::chrono::seconds(60)});
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace ddpbench::microbench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ddpbench::microbench::form_gloo_world();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // The communicators (the Gloo ranks, NCCL's world of one) live in statics: their process
  // groups' destructors at exit would join NCCL's watchdog after CUDA's own exit handlers may
  // have run. The results are written; the process leaves without them.
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(0);
}
