#pragma once
// The table of RunConfig's options: one entry per field, naming it once for the CLI
// (`--key`), the JSON config object ("key") and help text. Both the CLI and sweep files
// set fields through it, so they accept and reject exactly the same input.
#include <filesystem>
#include <functional>
#include <set>
#include <utility>
#include <vector>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "harness/control/run_config.hpp"
#include "reports/result_proof.hpp"

namespace ddpbench {

struct RunOption {
  std::string key;         // kebab-case; `--key` on the command line
  std::string help;
  std::string value_name;  // shown in --help: N, X, PATH, or the enum's choices
  bool is_switch = false;  // a CLI flag without a value (`--sync-bn`); true/false in JSON
  std::function<void(RunConfig&, std::string_view)> set;  // throws InputError naming --key
  std::function<nlohmann::json(const RunConfig&)> get;
  std::string doc;            // its line in the reference, docs/options.md (Markdown)
  std::string shown_default;  // the reference's default where the value alone would not say it; empty: the value
};

std::span<const RunOption> run_options();
const RunOption* find_run_option(std::string_view key);

/// A row of the reference's tables of options (docs/options.md): the option as written with
/// its value, its default as the reference says it (empty: none to say), what it means (Markdown).
struct ReferenceLine {
  std::string written;
  std::string shown_default;
  std::string meaning;
};

/// The reference's table of `lines`: option, default, meaning, one Markdown row each.
std::string reference_table_markdown(std::span<const ReferenceLine> lines);

/// The reference's table of every run option (docs/options.md holds it, and `ddpbench list
/// --options` prints it).
std::string run_options_markdown();

/// Every option of `config` as a JSON object keyed by option name.
nlohmann::json run_config_to_json(const RunConfig& config);

/// The command-line arguments that reproduce `config`: every option, as --key value
/// (switches as --key / --no-key; unset as none). Every option is given, so a child process
/// gets exactly this configuration: a preset it re-applies finds nothing left to set.
std::vector<std::string> run_config_to_args(const RunConfig& config);

/// The options a preset sets, by key and value text.
const std::vector<std::pair<std::string, std::string>>& preset_options(Preset preset);

/// Applies config.preset's options except those in `explicit_keys` (given by the user).
void apply_preset(RunConfig& config, const std::set<std::string>& explicit_keys);

/// Sets the options present in `object` (a JSON object keyed by option name); `where`
/// prefixes errors (for example "sweep.json, row 'ddp-2gpu'"). Unknown keys are errors, and so
/// is a value not of the JSON type a result file holds it as ("16" for a count).
void apply_run_config_json(RunConfig& config, const nlohmann::json& object, std::string_view where);

/// A result file's row configuration as this build reads it: each option it knows of holding
/// a value of the JSON type it writes (options it does not know, a newer writer's, are left to
/// the writer), ranges and combinations validate() allows (but the placement: a launcher's
/// ranks record the nodes they spanned); for a row that `ran`, what a CUDA graph captures.
/// Throws InputError naming the option.
void prove_run_config(const nlohmann::json& config, bool ran);

/// read_proven_results (reports/result_proof.hpp) as every command of this build reads a
/// result file: with this build's option defaults and prove_run_config.
ProvenResults read_results_here(const std::filesystem::path& path, const std::string& side);

}  // namespace ddpbench
