#include "harness/control/compare_command.hpp"

#include <iostream>

#include "harness/base/atomic_file.hpp"
#include "harness/base/output_rule.hpp"
#include "reports/compare.hpp"
#include "reports/paired_compare.hpp"
#include "harness/control/run_options.hpp"
#include "reports/result_proof.hpp"

namespace ddpbench {

using nlohmann::json;

namespace {

// The output rule (harness/base/output_rule.hpp) before any work: --out and --undecided-out never
// replace a file compare reads or another file, only an earlier one of their own.
void check_compare_files(const CompareCommand& command) {
  check_command_files({{"BASELINE", command.baseline}, {"CURRENT", command.current}},
                      {{"--out", command.out, "a comparison compare wrote", own_kind_by_text(is_comparison_text)},
                       {"--undecided-out", command.undecided_out, "a list of undecided rows compare wrote",
                        own_kind_by_text(is_undecided_rows_text)}});
}

// Once the files are read and compared: a comparison is cheap, so the folders the outputs need
// are made only where there is something to write (bad input leaves none behind), and every one
// is found writable before any is written (an unwritable --undecided-out left a new --out).
struct Output {
  const std::string& path;
  const char* flag;
  std::string text;
};
void write_outputs(const std::vector<Output>& outputs) {
  std::vector<std::pair<std::filesystem::path, std::string>> given;
  for (const Output& o : outputs) {
    if (!o.path.empty()) given.emplace_back(o.path, o.flag);
  }
  require_all_writable(given);
  for (const Output& o : outputs) {
    if (!o.path.empty()) write_file_atomically(o.path, o.text);
  }
}

int paired_compare_command(const CompareCommand& command) {
  PairedOptions options;
  if (command.threshold_given) options.threshold = command.threshold;
  if (command.metrics_given) options.metrics = command.metrics;
  options.alpha = command.alpha;
  options.min_rounds = command.min_rounds;
  options.max_rounds = command.max_rounds;
  options.coarse_metrics = command.coarse_metrics;
  options.allow_env_mismatch = command.allow_env_mismatch;
  options.allow_missing = command.allow_missing;
  const ProvenResults baseline = read_results_here(command.baseline, "the baseline build's file");
  const ProvenResults candidate = read_results_here(command.current, "the candidate's file");
  const PairedResult result = compare_paired(baseline, candidate, options);
  const std::string text = markdown_paired(result, options);
  write_outputs({{command.out, "--out", comparison_file(text)},
                 {command.undecided_out, "--undecided-out", undecided_rows_file(result.undecided_rows())}});
  std::cout << text << std::flush;
  return result.exit_code();
}

}  // namespace

int compare_command(const CompareCommand& command) {
  check_compare_files(command);
  if (command.paired) return paired_compare_command(command);
  CompareOptions options;
  options.threshold = command.threshold;
  options.metrics = command.metrics;
  options.allow_env_mismatch = command.allow_env_mismatch;
  options.alpha = command.alpha;
  if (!command.normalize_by.empty()) options.normalize_by = command.normalize_by;
  if (command.min_vs_pytorch > 0) options.min_vs_pytorch = command.min_vs_pytorch;
  options.allow_missing = command.allow_missing;
  const ProvenResults baseline = read_results_here(command.baseline, "the baseline");
  const ProvenResults current = read_results_here(command.current, "the current file");
  const Comparison comparison = compare_results(baseline, current, options);
  const std::string table = markdown_comparison(comparison, options);
  write_outputs({{command.out, "--out", comparison_file(table)}});
  std::cout << table << std::flush;
  return comparison.exit_code();
}

}  // namespace ddpbench
