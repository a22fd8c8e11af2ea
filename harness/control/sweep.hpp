#pragma once
// `ddpbench sweep`: the tutorial's table as a list of rows, each a RunConfig built from the
// sweep's defaults, its mode (faithful or controlled), the row's own options, the platform
// (the CPU preset where no GPU is) and the command line's overrides, in that order. Every
// row runs as its own `ddpbench run` process, so a crash costs one row; each result is
// written as soon as the row ends, atomically, and the reports are rewritten after every
// row, so a killed sweep loses nothing and --resume carries on. No LibTorch.
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/control/cli.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// A PyTorch twin row is named after its row with this suffix: ddp-2gpu.torch.
inline constexpr const char* kPyTorchTwinSuffix = ".torch";

struct SweepRowSpec {
  std::string name;
  int64_t devices = 1;                     // GPUs the row needs, over all its nodes
  double tutorial_seconds = kNotMeasured;  // the tutorial's published time, if it has the row
  nlohmann::json options = nlohmann::json::object();       // run options, every mode
  nlohmann::json mode_options = nlohmann::json::object();  // {"faithful": {...}, "controlled": {...}}
  std::string no_twin = {};  // why --reference gives this row no PyTorch twin (its twin is skipped); empty: it has one
  int64_t nodes = 1;         // nodes its ranks spread over, evenly (--launcher srun)
};

struct SweepDefinition {
  std::string name;
  std::string baseline_row;
  int64_t controlled_global_batch = 1024;  // the tutorial's DDP-4 global batch, for every row
  nlohmann::json defaults = nlohmann::json::object();
  std::vector<SweepRowSpec> rows;
};

/// single, dp-4gpu, ddp-2gpu, ddp-4gpu, ddp-4gpu-amp, with the tutorial's published times.
SweepDefinition tutorial_sweep();

/// {"name", "baseline", "controlled_global_batch", "defaults": {options}, "rows": [{"name",
/// "devices", "tutorial_seconds", "options": {...}, "faithful": {...}, "controlled": {...}}]}.
/// Throws InputError naming the file and the row or key at fault.
SweepDefinition read_sweep_file(const std::filesystem::path& path);
/// The same from the file's text; `source` names it in errors (and is the sweep's name when
/// the file gives none).
SweepDefinition parse_sweep_file(std::string_view text, const std::string& source);

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
  std::vector<std::string> strategies;  // the strategies this build has
  std::map<std::string, std::string> pytorch_twins;  // strategy -> PyTorch's own (ddp -> torch-ddp)
  Environment machine;
  std::string tool_version;
  // The SLURM allocation the sweep runs in (--launcher srun): its nodes, and srun's path.
  std::vector<std::string> allocation_nodes;
  std::string srun;
  // Called once the plan is made, before its first row runs (never on --dry-run): what the
  // rows will need ready on this machine (the LibTorch side starts PyTorch's preloaded Python).
  std::function<void(const SweepPlan&)> before_rows;
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
SweepPlan plan_sweep(const SweepCommand& command, const SweepEnvironment& environment);

/// How the configuration a row ran with (its result's) differs from the planned one, option
/// by option; empty when it ran what was planned. A row that differs is reported failed.
std::string plan_difference(const RunConfig& planned, const RunResult& ran);

/// Runs the plan and writes results.json, results.md and results.html into --out-dir (and
/// --gbench-json). Returns 0 when every row ran or was skipped, 1 when one failed or the
/// sweep was interrupted.
int run_sweep(const SweepCommand& command, const std::vector<std::string>& argv, const SweepEnvironment& environment);

}  // namespace ddpbench
