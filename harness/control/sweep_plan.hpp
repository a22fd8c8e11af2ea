#pragma once
// A sweep's plan: every row, mode and repetition the command asks for, each a RunConfig built
// from the sweep's defaults, its mode (faithful or controlled), the row's own options, the
// platform (the CPU preset where no GPU is) and the command line's overrides, in that order.
// Built by named rules, each deciding one thing of a row, so a new kind of row touches one
// rule. No LibTorch.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/base/output_rule.hpp"
#include "harness/control/cli.hpp"
#include "harness/control/sweep_file.hpp"
#include "harness/launch/rank_environment.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// A PyTorch twin row is named after its row with this suffix: ddp-2gpu.torch.
inline constexpr const char* kPyTorchTwinSuffix = ".torch";

struct SweepPlan;

/// What the sweep needs to know of the machine it runs on.
struct SweepEnvironment {
  int64_t visible_gpus = 0;
  // The CPU computes bf16 / fp16 in hardware. The CPU preset runs an fp16 row in bf16 where
  // bf16 is native (and says so: LibTorch's CPU fp16 is slow even where the CPU has it), and
  // skips a mixed-precision row otherwise, unless --rows names it or --amp is given
  // (emulated half precision is ~40x slower than fp32).
  bool cpu_native_bf16 = false;
  bool cpu_native_fp16 = false;
  // This machine's memory (0: unknown, not checked): the rows that run here must fit in it.
  int64_t memory_bytes = 0;
  std::vector<std::string> strategies;  // the strategies this build has
  std::map<std::string, std::string> pytorch_twins;  // strategy -> PyTorch's own (ddp -> torch-ddp)
  Environment machine;
  std::string tool_version;
  // The world a launcher made this process a rank of (launcher_world_from_process): a sweep runs
  // once, starting each row's processes itself, so one of several is refused.
  std::optional<RankEnvironment> launcher_world;
  // The SLURM allocation the sweep runs in (--launcher srun): its nodes, and srun's path.
  std::vector<std::string> allocation_nodes;
  std::string srun;
  // Called once the plan is made, before its first row runs (never on --dry-run): what the
  // rows will need ready on this machine (the LibTorch side starts PyTorch's preloaded Python).
  std::function<void(const SweepPlan&)> before_rows;
  // What only LibTorch's side can check of a row's input (its model, its --init-from's weights),
  // before any row runs; unset, nothing.
  std::function<void(const RunConfig&)> check_model_inputs;
  // What a row's --save-checkpoint may replace: an earlier checkpoint (models' recogniser, which
  // the LibTorch side gives); unset, nothing that exists.
  OwnKind is_checkpoint;
};

/// The SLURM allocation this process runs in, for --launcher srun: its nodes (from
/// SLURM_JOB_NODELIST, else SLURM_NODELIST) and srun's path in PATH. Throws InputError naming
/// what is missing: no allocation (SLURM_JOB_ID unset), no srun.
void read_slurm_allocation(SweepEnvironment& environment);

struct PlannedRow {
  SweepRowInfo info;
  int64_t repetition = 0;
  RunConfig config;
  std::optional<std::string> skip_reason;  // set: the row is reported skipped, not run
  std::vector<std::string> notes;          // what the plan changed, added to the row's notes
  std::filesystem::path result_file;
  // --launcher srun: the row runs as `srun <launch...> ddpbench run ...`, its ranks srun's
  // tasks (then config.nproc is 1: each task is one rank); empty: the row runs here.
  std::vector<std::string> launch;
  int64_t world_size = 1;  // the ranks the row runs as (srun's tasks, or its --nproc)
};

struct SweepPlan {
  SweepInfo info;
  std::vector<PlannedRow> rows;
};

/// Every row, mode and repetition the command asks for, fully configured and validated.
/// Throws InputError for an unknown row, a bad sweep file or an invalid resulting config.
/// The processes a row runs as: its --nproc ranks where its strategy is DDP's, else one.
int64_t planned_ranks(const RunConfig& config);

SweepPlan plan_sweep(const SweepCommand& command, const SweepEnvironment& environment);

// The rules plan_sweep applies, in its order; each is tested on its own.

/// What every rule reads: the command, the machine, the sweep's rows, the table's scale.
struct PlanContext {
  const SweepCommand& command;
  const SweepEnvironment& environment;
  const SweepDefinition& definition;
  bool cpu = false;            // the CPU preset: --table cpu, or auto on a machine without GPUs
  bool overrides_amp = false;  // --amp is among the command line's overrides
};
PlanContext plan_context(const SweepCommand& command, const SweepEnvironment& environment,
                         const SweepDefinition& definition);

/// --rows names rows the sweep has. Throws InputError listing the rows it has.
void check_named_rows(const SweepCommand& command, const SweepDefinition& definition);

/// The sweep's heading: preset, baseline, repetitions, projection, the CPU preset's note.
SweepInfo plan_info(const PlanContext& context);

/// The row's configuration in one mode: every layer applied, the CPU preset's cuts (each setting
/// at most the preset's), the overrides, the controlled mode's global batch split over the
/// row's final processes, the preset's fill-ins, validated. Throws InputError prefixed with `where`.
RunConfig configure_row(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode,
                        const std::string& where);

/// What the CPU preset changed in the row's configuration in one mode (where the plan applies it):
/// "option before → after", option by option, the configuration without the preset against the
/// one with it; empty without the preset.
std::vector<std::string> preset_changes(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode,
                                        const std::string& where);

/// The CPU preset's mixed precision: fp16 becomes bf16 where the CPU computes bf16 (not with
/// --amp given). Returns the notes that say so.
std::vector<std::string> cpu_mixed_precision(const PlanContext& context, RunConfig& config);

/// Why the row cannot run on this machine (strategy, GPUs, nodes, the CPU's half precision);
/// none when it can.
std::optional<std::string> skip_reason(const PlanContext& context, const SweepRowSpec& spec, const RunConfig& config);

/// A row in one mode with what --reference adds beside it, before repetitions and files.
struct PlannedRowGroup {
  PlannedRow row;
  std::optional<PlannedRow> compared;  // ddpbench's row without SyncBatchNorm, where its twin cannot run it
  std::optional<PlannedRow> twin;      // PyTorch's own implementation of the row
  std::vector<const PlannedRow*> members() const;  // in the order they run: row, compared, twin
};
PlannedRowGroup plan_row(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode);

/// --reference: the twin (and the comparison run) of `group.row`. Throws InputError when its
/// strategy has no PyTorch twin.
void add_reference_rows(const PlanContext& context, const SweepRowSpec& spec, PlannedRowGroup& group);

/// The one check of a row's configuration (harness/control/row_check.hpp) for a planned row that
/// will run: the world it runs as (srun's tasks or its --nproc), this machine's memory and data
/// where it runs here. A skipped row is not checked. Throws InputError prefixed with `where`.
void check_planned_row(const PlanContext& context, const SweepRowSpec& spec, const PlannedRow& row,
                       const std::string& where);

/// Each repetition of each member, with its result file under --out-dir/rows/MODE/.
void append_repetitions(const SweepCommand& command, const SweepRowSpec& spec, const PlannedRowGroup& group,
                        std::vector<PlannedRow>& rows);

/// No two rows of one mode share a name (a row named like another's twin would share its
/// result file). Throws InputError naming the row.
void check_unique_names(const SweepInfo& info, const std::string& sweep_name);

}  // namespace ddpbench
