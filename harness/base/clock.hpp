#pragma once
// The clock every host-side duration is read from: monotonic, never adjusted.
#include <chrono>

namespace ddpbench {

using Clock = std::chrono::steady_clock;

/// Seconds from `start` to `end`.
inline double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

/// Seconds from `start` to now.
inline double seconds_since(Clock::time_point start) { return seconds_between(start, Clock::now()); }

}  // namespace ddpbench
