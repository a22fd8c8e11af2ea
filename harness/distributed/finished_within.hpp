#pragma once
// A blocking call held to a deadline: c10d's TCPStore client and ncclCommInitRank have none of
// their own that holds. No LibTorch; the distributed layer's .cpp files use it.
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

namespace ddpbench {

/// Runs `query` on a thread of its own and waits for it at most `limit`: nullopt when it has
/// not finished, its exception when it threw. The thread, detached, is left behind when it
/// runs on (it ends with the process): only it is held, never the caller.
template <typename T>
std::optional<T> finished_within(std::chrono::milliseconds limit, std::function<T()> query) {
  auto task = std::make_shared<std::packaged_task<T()>>(std::move(query));
  auto result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

/// The same, with an error taken as no answer.
template <typename T>
std::optional<T> within(std::chrono::milliseconds limit, std::function<T()> query) {
  try {
    return finished_within<T>(limit, std::move(query));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ddpbench
