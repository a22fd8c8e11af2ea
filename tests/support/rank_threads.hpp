#pragma once
// Runs `body(rank, communicator)` on `world` threads of this process, each joined to the
// others through its own process group (Gloo on CPUs by default) over loopback; rethrows
// the first failure. Ranks that share a CUDA device are refused as threads: autograd keeps one
// worker thread per CUDA device for every graph in the process (engine.cpp: "CUDA device ready
// queues are shared across all graph tasks"), so one rank's backward blocked in a collective
// (SyncBatchNorm's allreduce, the Reducer's wait) holds the worker the other rank's backward
// needs, and both wait out the timeout. Such ranks must be processes.
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness/distributed/communicator.hpp"
#include "harness/launch/launcher.hpp"

namespace ddpbench::testing {

inline void run_ranks(int64_t world, const std::function<void(int64_t, std::shared_ptr<Communicator>)>& body,
                      std::chrono::seconds timeout = std::chrono::seconds(60), CommBackend backend = CommBackend::gloo,
                      c10::Device device = c10::kCPU) {
  if (device.is_cuda() && world > 1) {
    throw std::invalid_argument("run_ranks: " + std::to_string(world) + " rank threads sharing " + device.str() +
                                " would deadlock in backward (autograd runs every graph's CUDA work on one thread per "
                                "device): start the ranks as processes (ddpbench run --nproc)");
  }
  const int64_t port = free_port();
  std::mutex mutex;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto comm = std::make_shared<Communicator>(
            CommunicatorOptions{local_rank_environment(rank, world, port), backend, device, timeout});
        body(rank, comm);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ddpbench::testing
