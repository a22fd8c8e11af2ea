#pragma once
// The launcher's view of its ranks' progress: it serves the run's store, so the records
// outlive any rank, reads them a few times a second while the ranks run, and, when the first
// rank fails, says whom they blame. A backend that aborts the healthy ranks on a timeout
// (NCCL's watchdog) then cannot make the launcher name a victim.
#include <chrono>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "harness/distributed/run_store.hpp"
#include "harness/launch/rank_progress.hpp"

namespace ddpbench {

class ProgressWatch {
 public:
  explicit ProgressWatch(const LauncherStore& store);
  /// Reads the records, at most every half second (call it as often as you like).
  void poll();
  /// The verdict as of now: now's records against the last ones read at least a silence
  /// window earlier (without such, silence cannot be told and only progress counts).
  void judge_now();
  /// The verdict judge_now() reached, if it was called.
  [[nodiscard]] const std::optional<ProgressVerdict>& verdict() const { return verdict_; }

 private:
  using Records = std::vector<std::optional<RankProgress>>;
  const LauncherStore& store_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, Records>> history_;
  std::optional<ProgressVerdict> verdict_;
};

}  // namespace ddpbench
