#pragma once
// Whether a row's straggler test could have flagged a straggler at all. The test (the rank picked
// as the slowest, the slowest step after step beyond chance for a rank so picked: p below
// kStragglerAlpha by slowest_of_ranks_p) can never reach alpha over too few steady steps: 5 steps
// of 2 ranks give at best p = 2 x 0.5^5 = 0.0625, so such a row's "no straggler" says nothing.
// Derived from what every result records (straggler_of_steps, world_size); no LibTorch.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/base/statistics.hpp"
#include "harness/base/units.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// The smallest p the test can give, by the same bound: one of `ranks` ranks slowest in all `steps` steps.
inline double best_straggler_p(int64_t steps, int64_t ranks) { return slowest_of_ranks_p(steps, steps, ranks); }

/// The fewest steady steps over which the test can reach kStragglerAlpha at `ranks` ranks (2 or more).
inline int64_t steps_to_judge_straggler(int64_t ranks) {
  int64_t steps = 1;
  while (best_straggler_p(steps, ranks) >= kStragglerAlpha) ++steps;
  return steps;
}

/// Why the row's straggler could not be judged (empty where it could: a row that ran one rank,
/// failed, recorded no per-step times, or flagged one, is not this case).
inline std::string straggler_not_judged(const RunResult& r) {
  const int64_t steps = r.straggler_of_steps, ranks = r.world_size;
  if (r.status != RunStatus::ok || r.straggler || ranks < 2 || steps <= 0) return "";
  const double best_p = best_straggler_p(steps, ranks);
  if (best_p < kStragglerAlpha) return "";
  return "could not be judged: " + std::to_string(steps) + " steady steps of " + std::to_string(ranks) +
         " ranks (some rank the slowest in every one is p = " + format_fixed(best_p, 3) + " by chance, not below " +
         format_fixed(kStragglerAlpha, 2) + "; the test needs " + std::to_string(steps_to_judge_straggler(ranks)) +
         " steady steps or more): a straggler there would not have been flagged";
}

/// The rows (name and mode, each once, in the order first met) whose straggler could not be
/// judged, with why: their first such repetition's words.
inline std::vector<std::pair<std::string, std::string>> rows_without_straggler_verdict(const std::vector<RunResult>& runs) {
  std::vector<std::pair<std::string, std::string>> found;
  for (const RunResult& r : runs) {
    const std::string why = straggler_not_judged(r);
    const std::string label = row_label(r.name, r.mode);
    const bool listed = std::any_of(found.begin(), found.end(), [&](const auto& f) { return f.first == label; });
    if (!why.empty() && !listed) found.emplace_back(label, why);
  }
  return found;
}

}  // namespace ddpbench
