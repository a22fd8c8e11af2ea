#pragma once
// A sweep's rows as a sweep file (or the tutorial's preset) defines them: names, GPUs, nodes,
// the tutorial's times and each row's options, checked in full before anything is planned.
// No LibTorch.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/base/step_record.hpp"

namespace ddpbench {

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

/// The run options a sweep gives each row itself (its name, its result file): the command line
/// and a sweep file both refuse them, with this reason.
bool sweep_sets_itself(std::string_view option_key);
inline constexpr const char* kSweepSetsItself = "not for sweep (rows are named by the sweep; --out-dir says where)";

/// How errors name a row of a sweep: "sweep file 'x.json', row 'ddp-2gpu'".
std::string sweep_row_where(const std::string& origin, const std::string& row);

}  // namespace ddpbench
