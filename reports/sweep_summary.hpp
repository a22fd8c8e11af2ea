#pragma once
// A sweep's rows summarised for people and gates: the median of each row's repetitions,
// their spread, speed-up and scaling efficiency against the baseline row of the same mode,
// and how each row's setup differs from the baseline's. Derived from the result document
// alone, so any reporter, and `compare`, sees the same numbers.
#include <optional>
#include <string>
#include <vector>

#include "harness/base/statistics.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// A row whose repetitions spread wider than this fraction of their median is flagged.
inline constexpr double kUnstableRelativeSpread = 0.10;

/// One planned repetition of a row as it ended: its status and reason, and what a report of each
/// repetition shows of it; no status where the document has no result for it (the sweep was
/// stopped before it ran, or is still running).
struct RepetitionOutcome {
  int64_t repetition = 0;
  std::optional<RunStatus> status;
  std::string reason;
  int64_t steps = 0;
  double train_time_s = kNotMeasured;
  double images_per_s = kNotMeasured;
  [[nodiscard]] bool ran_ok() const { return status == RunStatus::ok; }
};

/// The row's status over every planned repetition: ok only where every one ran ok; else the
/// worst of the others (failed, then interrupted, then skipped; a repetition with no result
/// counts as skipped, "not run").
RunStatus status_over_repetitions(const std::vector<RepetitionOutcome>& outcomes);

/// The devices a row's record says it ran on (or, for a row that did not run, was planned on):
/// DataParallel's devices (strategy_details, else its --devices list), one per rank of a
/// distributed row, else one. Never a sweep file's "devices", which only says what a row needs.
int64_t devices_ran_on(const RunResult& run);

struct RowSummary {
  std::string name;
  std::string mode;
  double tutorial_seconds = kNotMeasured;
  int64_t devices = 1;  // that the row ran on (devices_ran_on), for its GPUs and its scaling
  int64_t world_size = 1;
  std::string placement;  // the ranks over nodes, "2 nodes x 2 ranks"; empty on one node
  RunStatus status = RunStatus::skipped;  // over every planned repetition (status_over_repetitions)
  std::string reason;                     // the first reason for that status
  // Every planned repetition as it ended, in order; the figures below are over those that ran ok.
  std::vector<RepetitionOutcome> outcomes;
  int64_t planned_repetitions = 1;
  int64_t repetitions = 0;  // that ran ok: what the figures are over
  [[nodiscard]] bool has_figures() const { return repetitions > 0; }
  std::string device;
  std::string dataset;

  // Medians over the repetitions that ran.
  double train_time_s = kNotMeasured;
  double images_per_s = kNotMeasured;
  double steady_images_per_s = kNotMeasured;
  double step_time_p50_s = kNotMeasured;
  double test_accuracy = kNotMeasured;
  int64_t peak_memory_bytes = 0;  // the largest
  // Where a step's time goes: the mean per step after warm-up, averaged over repetitions;
  // and the step-time distribution (medians over repetitions of each quantile) beside the
  // first repetition's warm-up steps (rank 0), which the steady figures leave out.
  PhaseSeconds phase_s;
  double step_time_p90_s = kNotMeasured;
  double step_time_max_s = kNotMeasured;
  std::vector<double> warmup_step_s;
  // Compute: the model's training FLOPs per image, the FLOP/s achieved at the steady images/s
  // (median over repetitions), and that against the peak for the row's precision: a GPU's
  // data sheet (reports/device_peaks.hpp), or the CPU's cores from what the CPU reports.
  double train_flops_per_image = kNotMeasured;
  double achieved_flops_per_s = kNotMeasured;
  std::string precision;
  double peak_flops_per_s = kNotMeasured;  // per device (on CPUs: per core)
  double flops_utilisation = kNotMeasured;  // achieved / row_peak_flops_per_s
  // The peak of everything the row computed on: peak_flops_per_s x its GPUs, or x the CPU
  // cores its ranks' threads could use (reports/cpu_peak.hpp); where each number came from,
  // in words, or why there is no peak; and whether it is an upper bound (a turbo clock).
  double row_peak_flops_per_s = kNotMeasured;
  int64_t peak_cores = 0;  // CPU rows: the cores counted
  std::string peak_unit;   // "H200 (data sheet)", "AVX-512 FMA", ...
  std::string peak_source;
  bool peak_upper_bound = false;
  // The ranks of a distributed row, from its repetition with the median spread: each rank's
  // compute, data and wait per step, the slowest rank by its own time (compute + data), slowest
  // over fastest, and where the slowest rank's excess lies.
  std::vector<RankTiming> ranks;
  int64_t slowest_rank = -1;  // -1: not measured
  double rank_spread = kNotMeasured;
  std::string straggler_cause;
  bool straggler = false;
  [[nodiscard]] bool has_straggler() const { return straggler; }
  double train_time_min_s = kNotMeasured;
  double train_time_max_s = kNotMeasured;
  bool unstable = false;

  // Against the baseline row of the same mode: throughput ratio (the epoch's images/s in
  // faithful mode, the steady-state images/s in controlled mode), that per device, and
  // what this row does differently.
  double speedup = kNotMeasured;
  double scaling_efficiency = kNotMeasured;
  std::vector<std::string> differences;

  // PyTorch's own implementation of the row (--reference), on the same data, initial
  // weights and clock, where it was planned; and ddpbench's side of the comparison: the row
  // itself, or its run as the twin runs it where the twin cannot run the row (on CPUs, both
  // without SyncBatchNorm: `compared_without` says what both left out).
  struct PyTorchTwin {
    std::string name;
    RunStatus status = RunStatus::skipped;
    std::string reason;
    std::vector<RepetitionOutcome> outcomes = {};
    double train_time_s = kNotMeasured;
    double steady_images_per_s = kNotMeasured;
    std::string ddpbench_name = {};
    std::string compared_without = {};  // empty: compared with the row as it is
    RunStatus ddpbench_status = RunStatus::skipped;
    std::string ddpbench_reason = {};
    std::vector<RepetitionOutcome> ddpbench_outcomes = {};
    double ddpbench_train_time_s = kNotMeasured;
    double ddpbench_steady_images_per_s = kNotMeasured;
  };
  std::optional<PyTorchTwin> pytorch;
  // Medians over repetitions of each back-to-back pair's ratio (repetition i of the row
  // against repetition i of its twin); above 1, ddpbench is faster.
  double vs_pytorch_train_time = kNotMeasured;  // PyTorch's epoch time / this row's
  double vs_pytorch_steady = kNotMeasured;      // this row's steady images/s / PyTorch's

  /// The mode's headline throughput: images/s over the epoch (faithful), steady (controlled).
  [[nodiscard]] double headline_images_per_s() const;
};

/// One summary per planned row (document.sweep), or per distinct name and mode of the runs
/// when the document has no sweep section. A PyTorch twin row is not a summary of its own:
/// it is the `pytorch` of the row it is the reference for; nor is ddpbench's run of a row for
/// that comparison alone (is_comparison_run).
std::vector<RowSummary> summarize_sweep(const ResultDocument& document);

/// The modes of `rows`, in order of first appearance.
std::vector<std::string> sweep_modes(const std::vector<RowSummary>& rows);

/// How `row` is set up differently from `baseline`, one phrase per difference, e.g.
/// "4 processes", "global batch 1024 (baseline 256)", "SyncBatchNorm", "max-steps 4 (baseline
/// unset)": every option that changes the work or the clock (an option a row does not set is the
/// writer's default, `option_defaults`); never where the output or the data lies.
std::vector<std::string> differences_from_baseline(const RunResult& row, const RunResult& baseline,
                                                   const nlohmann::json& option_defaults = nlohmann::json::object());

}  // namespace ddpbench
