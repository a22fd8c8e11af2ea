#pragma once
// The runner: one row's epochs, timing and evaluation around any strategy.
#include <chrono>

#include "data/image_set.hpp"
#include "harness/control/run_config.hpp"
#include "harness/distributed/dist_context.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// Trains `config` for its epochs on `data` and evaluates it, as rank `dist.rank` of the
/// run; every rank returns the row's result (accuracy over all ranks, rank 0's step times).
/// Throws on failure: the caller turns that into a failed row. `row_start` is when the row
/// began (before its data was loaded), for total_time_s.
RunResult run_row(const RunConfig& config, const DistContext& dist, const DatasetSplits& data,
                  std::chrono::steady_clock::time_point row_start);

/// A row that did not run to the end: skipped or failed, with the reason, over
/// `world_size` processes.
RunResult unfinished_result(const RunConfig& config, RunStatus status, std::string reason, int64_t world_size = 1);

}  // namespace ddpbench
