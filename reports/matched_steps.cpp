#include "reports/matched_steps.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "harness/base/statistics.hpp"

namespace ddpbench {
namespace {

std::span<const StepRecord> steady(const RunResult& run) {
  const auto skip = std::min(run.step_records.size(), static_cast<std::size_t>(std::max<int64_t>(0, run.warmup_steps)));
  return std::span<const StepRecord>(run.step_records).subspan(skip);
}

}  // namespace

std::optional<double> matched_step_log_ratio(const RunResult& baseline, const RunResult& candidate) {
  const auto base = steady(baseline);
  const auto cand = steady(candidate);
  if (base.size() < 2 || base.size() != cand.size()) return std::nullopt;
  // Pair k's order is the run's first build's when k is even, the other's when odd (ABBA): each
  // parity's own trimmed mean, then their mean, so the effect of going first in a pair cancels
  // exactly and adds nothing to the spread.
  std::vector<double> parity[2];
  const std::size_t first = baseline.step_records.size() - base.size();  // the first steady step's position
  for (std::size_t k = 0; k < base.size(); ++k) {
    const StepRecord& b = base[k];
    const StepRecord& c = cand[k];
    if (b.epoch != c.epoch || b.step != c.step) return std::nullopt;
    if (!(std::isfinite(b.time_s) && std::isfinite(c.time_s) && b.time_s > 0 && c.time_s > 0)) return std::nullopt;
    parity[(first + k) % 2].push_back(std::log(c.time_s / b.time_s));
  }
  return (trimmed_mean(parity[0]) + trimmed_mean(parity[1])) / 2;
}

}  // namespace ddpbench
