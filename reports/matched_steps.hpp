#pragma once
// The per-run statistic of a lockstep run (scripts/lib/lockstep.py), where the two builds took
// turns step by step: their steady steps matched by position, d_k = log(t_candidate,k /
// t_baseline,k); the 20 % trimmed mean of the d_k of even steps and that of odd steps (one step's
// burst moves neither), and the mean of the two: the run's first build opens the even pairs and
// the other build the odd ones (ABBA), so an effect of going first cancels exactly. The machine's
// drift within the run falls on both steps of a pair and cancels. No LibTorch.
#include <optional>
#include <string>

#include "reports/run_result.hpp"

namespace ddpbench {

/// The run's log ratio from the two rows' matched steady steps (rank 0's, after each row's
/// warm-up; a step's parity is its position in the run); nullopt where they do not match: fewer
/// than 2 steady steps, a different number, other (epoch, step) numbers, or a step time that is
/// no time.
std::optional<double> matched_step_log_ratio(const RunResult& baseline, const RunResult& candidate);

}  // namespace ddpbench
