#pragma once
// Runs `body(rank, communicator)` on `world` threads of this process, each joined to the
// others through its own process group (Gloo on CPUs by default) over loopback; rethrows
// the first failure.
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "harness/distributed/communicator.hpp"
#include "harness/launch/launcher.hpp"

namespace ddpbench::testing {

inline void run_ranks(int64_t world, const std::function<void(int64_t, std::shared_ptr<Communicator>)>& body,
                      std::chrono::seconds timeout = std::chrono::seconds(60), CommBackend backend = CommBackend::gloo,
                      c10::Device device = c10::kCPU) {
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
