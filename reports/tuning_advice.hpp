#pragma once
// The DDP settings to use at N ranks, from one measured DDP row: for each setting of a grid
// (bucket caps, communication hooks, overlap), the buckets DDP would build (the Reducer's
// assignment, reports/bucket_assignment.hpp, over the gradients in the order and at the times
// the row measured them), each ready when its last gradient is and launched in order, costed
// by the projection's ring model on a fabric (reports/projection.hpp); compression halves the
// bytes on the wire and costs its measured cast and copy back; overlap off holds every bucket
// to backward's end; where backward and the allreduces shared the host (CPU ranks), each runs
// slower while the other does, by what the row measured (each alone after its steps, against
// both in them); on a `measured` fabric the link is the row's allreduce alone. Settings within the model's own error
// of the fastest are a tie. Left out: compression's effect on accuracy, memory, stragglers,
// topologies of more than two levels, collectives other than the ring. No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/projection.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// One choice of DDP's knobs, named as the run flags name them.
struct TuningSetting {
  double bucket_mb = 25;                 // --bucket-mb
  std::string comm_hook = "allreduce";   // --comm-hook: allreduce (none), fp16, bf16
  bool overlap = true;                   // --overlap / --no-overlap
  bool operator==(const TuningSetting&) const = default;
};

/// PyTorch's defaults: 25 MB, no hook, overlap.
inline const TuningSetting kPyTorchDefaults{};
/// The values a grid crosses; by default bucket caps 1, 5, 10, 25, 50, 100 MB x hooks none,
/// fp16, bf16 x overlap on, off.
struct TuningGridValues {
  std::vector<double> bucket_mb = {1, 5, 10, 25, 50, 100};
  std::vector<std::string> comm_hooks = {"allreduce", "fp16", "bf16"};
  std::vector<bool> overlap = {true, false};
};
/// Every combination (overlap outermost, then hooks, then caps, each in the order given,
/// duplicates once), and PyTorch's defaults last where the values leave them out: every
/// advice is weighed against them.
std::vector<TuningSetting> tuning_grid(const TuningGridValues& values);
std::vector<TuningSetting> default_tuning_grid();
/// "5 MB, fp16, overlap"
std::string setting_label(const TuningSetting& setting);
/// The flags that choose it: "--bucket-mb 5 --comm-hook fp16" (nothing for a default).
std::string setting_flags(const TuningSetting& setting);

/// Settings whose projected steps are within this fraction of each other are a tie, at least:
/// a band narrower than the spread of a row run twice would pick among equals.
inline constexpr double kMinimumTieBand = 0.02;

struct SettingProjection {
  TuningSetting setting;
  int64_t buckets = 0;
  double step_s = kNotMeasured;
  double images_per_s = kNotMeasured;
  double comm_s = kNotMeasured;          // every bucket's allreduce (and copy back), one after another
  double exposed_comm_s = kNotMeasured;  // what backward's compute did not hide
};

struct RankAdvice {
  int64_t ranks = 0;
  std::vector<SettingProjection> settings;  // the grid's order
  std::size_t best = 0;                     // the fastest
  std::size_t advised = 0;                  // the fastest, or PyTorch's defaults where they tie with it
  std::vector<std::size_t> ties;            // within the tie band of the fastest, fastest first (best included)
  std::size_t defaults = 0;                 // PyTorch's defaults, in the grid
  double gain_over_defaults = kNotMeasured;  // the defaults' step / the advised one's - 1 (0 where they are advised)
  double fastest_gain_over_defaults = kNotMeasured;  // the defaults' step / the fastest's - 1
  [[nodiscard]] bool defaults_tie() const;
};

struct RowAdvice {
  std::string row;
  std::string mode;
  int64_t repetition = 0;
  int64_t measured_ranks = 1;
  TuningSetting measured_setting;
  double measured_step_s = kNotMeasured;
  double model_step_s = kNotMeasured;  // the advisor's model of the measured setting where it was measured
  double model_error = kNotMeasured;   // model_step_s / measured_step_s - 1
  double step_spread = 0;              // its steady steps' p90 / p50 - 1, or its repetitions' apart if more
  bool step_spread_measured = false;   // else taken as 0
  int64_t repetitions_left_out = 0;    // those that did not run to a steady state
  double tie_band = kMinimumTieBand;   // the larger of |model_error|, step_spread and kMinimumTieBand
  std::string unchecked;               // why the model could not be held against its own step
  bool compression_cost_measured = false;  // else compressed settings pay nothing for their casts
  // Where backward and the allreduces shared the host (CPU ranks): the share of its speed each
  // lost while the other ran, as the row measured it (0 where it could not tell).
  bool contention_measured = false;       // an allreduce ran beside backward and backward alone
  bool allreduce_alone_measured = false;
  double compute_slowdown = 0;
  double comm_slowdown = 0;
  // An fp16 (bf16) allreduce's time against fp32's on the same elements, measured alone (0.5 unmeasured).
  double fp16_wire_fraction = 0.5;
  double bf16_wire_fraction = 0.5;
  Fabric measured_link;
  Fabric fabric;
  std::vector<RankAdvice> ranks;
  std::string not_advised;  // why, when the row cannot be
};

/// The bytes of each bucket DDP builds at `bucket_mb` from the gradients `row` recorded (its
/// gradient_timeline): the advisor's layout, the Reducer's own for a cap it ran.
std::vector<int64_t> ddp_bucket_bytes(const RunResult& row, double bucket_mb);

/// Whether the advice is not to be acted on: its model more than kModelTolerance off the step
/// its row measured, or not checked there.
bool advice_off(const RowAdvice& advice);

/// What the advice does not model, said in every report of it.
extern const char* const kAdviceLeavesOut;

/// The advice for one row (the repetition the projection takes: the median), or why there is none.
RowAdvice advise_row(const std::vector<const RunResult*>& repetitions, const ProjectionOptions& options,
                     const std::vector<TuningSetting>& grid);

/// Every DDP row of the document (ranks below 2 are left out of options.ranks: nothing to tune).
std::vector<RowAdvice> advise_document(const ResultDocument& document, const ProjectionOptions& options,
                                       const std::vector<TuningSetting>& grid = default_tuning_grid());

/// The advice `sweep --project` asks for (at 8, 64 and 512 ranks on its fabric), or nullopt.
std::optional<std::vector<RowAdvice>> sweep_advice(const ResultDocument& document);

nlohmann::json advice_json(const std::vector<RowAdvice>& advice);
/// The recommendation per rank count, and with `every_setting` the whole grid's steps.
std::string markdown_advice(const std::vector<RowAdvice>& advice, bool every_setting);

}  // namespace ddpbench
