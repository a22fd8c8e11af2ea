#pragma once
// The runner: one row's epochs, timing and evaluation around any strategy.
#include <chrono>
#include <span>
#include <string>
#include <vector>

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

/// Where a rank's steps went, in seconds per step: its own work, its loader, and waiting for
/// the other ranks (StepRecord::compute_s, PhaseSeconds::wait_s).
struct StepShares {
  double compute_s = kNotMeasured;
  double data_s = kNotMeasured;
  double wait_s = kNotMeasured;
};
StepShares mean_shares(std::span<const StepRecord> steps);

/// One rank's epoch time, its step times after warm-up, and where those steps' time went.
struct RankSteps {
  double train_time_s = 0;
  std::vector<double> steady_step_times_s;
  int64_t peak_memory_bytes = 0;  // over the rank's devices
  StepShares steady_shares;       // means per step after warm-up; not measured for PyTorch's rows
  std::vector<double> steady_own_times_s = {};  // each steady step's compute + data: who was slowest, step by step
};

/// What rank 0 measured of a row, whichever implementation trained it (the runner's loop,
/// or PyTorch's in harness/runner/pytorch_rank.cpp).
struct RowMeasurements {
  std::vector<StepRecord> steps;  // every step, in order
  double train_time_s = 0;        // this rank's, summed over epochs
  int64_t steps_per_epoch = 0;    // as run (--max-steps may cut the epoch)
  int64_t full_steps_per_epoch = 0;
  int64_t local_images = 0;       // trained by this rank
  int64_t eval_correct = 0;       // over all ranks
  int64_t eval_seen = 0;
  bool eval_cut = false;
  int64_t peak_memory_bytes = 0;  // this rank's, over its devices (dp: every replica's)
  std::string peak_memory_source;
  std::string device;
  std::string dataset;
  std::string dataset_origin;
  int64_t train_images = 0;       // the training set's images the loader found (the sampler divides them)
  std::vector<RankSteps> ranks;  // every rank's, for a row with ranks
  double train_flops_per_image = kNotMeasured;  // rank 0 counts it (model_train_flops); the others need not
};

/// The steps steady-state figures are made of: those after --warmup-steps, less the steps
/// --trace-steps traced (the profiler slows them).
std::vector<StepRecord> steady_steps(const std::vector<StepRecord>& steps, const RunConfig& config);

/// The row's model's training FLOPs per image (models/flop_count.hpp), or kNotMeasured when
/// the count cannot run: a figure for the report, never a reason to fail the row.
double model_train_flops(const RunConfig& config);

/// The row's result from its measurements over `world_size` ranks: steady-state figures
/// after --warmup-steps, quantiles, mean phases, achieved FLOP/s, and the train time of the
/// slowest rank.
RunResult assemble_result(const RunConfig& config, int64_t world_size, RowMeasurements measurements);

/// A row that did not run to the end: skipped or failed, with the reason, over
/// `world_size` processes.
RunResult unfinished_result(const RunConfig& config, RunStatus status, std::string reason, int64_t world_size = 1);

}  // namespace ddpbench
