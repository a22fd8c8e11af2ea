#include "harness/control/trace_command.hpp"

#include <algorithm>
#include <iostream>
#include <regex>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/output_rule.hpp"
#include "harness/control/run_options.hpp"
#include "reports/result_proof.hpp"
#include "reports/trace_merge.hpp"
#include "harness/base/units.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

std::string label(const RunResult& run) {
  std::string text = run.name;
  if (!run.mode.empty()) text += " (" + run.mode + ", repetition " + std::to_string(run.repetition) + ")";
  return text;
}

bool named_by(const RunResult& run, const TraceCommand& command) {
  return command.row.empty() || run.name == command.row;
}

// The traced runs the user may mean, for the error that says none or several were found.
std::string traced_names(const ResultDocument& document, const TraceCommand& command, std::size_t traced_count) {
  std::string names;
  for (const auto& run : document.runs) {
    if (!run.trace.traced() || (traced_count > 1 && !named_by(run, command))) continue;
    names += (names.empty() ? "" : ", ") + label(run);
  }
  return names;
}

// A run asked to trace that saved none (it failed or was stopped) says why, not "run it traced".
void refuse_a_trace_never_saved(const ResultDocument& document, const TraceCommand& command) {
  for (const auto& run : document.runs) {
    const bool asked = run.config.is_object() && run.config.value("trace-steps", json("")) != json("");
    if (asked && !run.trace.traced() && named_by(run, command)) {
      throw InputError("'" + command.results + "': " + label(run) + " ran with --trace-steps " +
                       run.config.at("trace-steps").dump() + " but saved no trace: it is " +
                       std::string(status_name(run.status)) + (run.reason.empty() ? "" : " (" + run.reason + ")"));
    }
  }
}

// The traced row the user means: --row, or the file's only traced row; never one of several
// runs of that name (a sweep's modes and repetitions), which would be a guess.
const RunResult& traced_row(const ResultDocument& document, const TraceCommand& command) {
  std::vector<const RunResult*> traced;
  for (const auto& run : document.runs) {
    if (run.trace.traced() && named_by(run, command)) traced.push_back(&run);
  }
  if (traced.size() == 1) return *traced.front();
  const std::string names = traced_names(document, command, traced.size());
  if (traced.empty()) {
    refuse_a_trace_never_saved(document, command);
    if (command.row.empty()) {
      throw InputError("'" + command.results + "': no row in it was traced (run it with --trace-steps A:B)");
    }
    throw InputError("--row '" + command.row + "': no traced row of that name in '" + command.results + "'" +
                     (names.empty() ? std::string(" (none was traced)") : " (traced: " + names + ")"));
  }
  throw InputError("'" + command.results + "' holds several traced runs" +
                   (command.row.empty() ? std::string() : " named '" + command.row + "'") + " (" + names +
                   "): give the run's own JSON (a sweep's rows/MODE/NAME.json)" +
                   (command.row.empty() ? std::string(", or --row NAME") : std::string()));
}

// Where the row's traces lie: beside the results, or, for a sweep's combined file, beside the
// row's own JSON under the sweep's rows folder (its rows_href: rows/ beside the reports, or
// --out-dir's rows/ seen from --reports-dir), in MODE/.
std::filesystem::path trace_folder(const std::filesystem::path& results_folder, const ResultDocument& document,
                                   const RunResult& row) {
  const auto beside = [&](const std::filesystem::path& folder) {
    return std::all_of(row.trace.files.begin(), row.trace.files.end(),
                       [&](const std::string& file) { return std::filesystem::is_regular_file(folder / file); });
  };
  const std::string rows_href = document.sweep ? document.sweep->rows_href : "rows";
  const std::filesystem::path rows = (results_folder / rows_href / row.mode).lexically_normal();
  if (!row.mode.empty() && !beside(results_folder) && beside(rows)) return rows;
  return results_folder;
}

// The merged trace's own name beside the row's traces: the results file's, or the row's for a
// file of several rows (a sweep's), so that each row merged from it keeps its own.
std::string merged_name(const std::filesystem::path& results, const ResultDocument& document, const RunResult& row) {
  const std::string stem = document.runs.size() > 1 ? row.name : results.stem().string();
  return stem + ".merged.trace.json";
}

}  // namespace

int trace_command(const TraceCommand& command) {
  const std::filesystem::path results = std::filesystem::absolute(command.results);
  const ProvenResults proven = read_results_here(results, "the results");
  const RunResult& row = traced_row(proven.document(), command);
  const std::filesystem::path folder = trace_folder(results.parent_path(), proven.document(), row);
  const std::filesystem::path out = std::filesystem::absolute(
      command.out.empty() ? folder / merged_name(results, proven.document(), row) : std::filesystem::path(command.out));
  // The merged trace never replaces what it was made from, nor another file (an earlier merge
  // of its own is replaced); nor is it named as a rank's trace, which a traced run would replace.
  std::vector<CommandInput> inputs{{"RESULTS", results}};
  for (const auto& file : row.trace.files) inputs.push_back({"RESULTS (its row's rank trace)", folder / file});
  check_command_files(inputs, {{"--out", out, "a merged trace", own_kind_by_text(is_merged_trace)}});
  static const std::regex rank_trace(R"(.*\.rank[0-9]+\.trace\.json(\.gz)?)");
  if (std::regex_match(out.filename().string(), rank_trace)) {
    throw InputError("--out '" + out.string() + "': a rank's trace (of this row or another): give another path");
  }
  const MergedTrace merged = merge_row_traces(row, folder);
  require_writable(out, "--out");  // only now, every rank's trace read and proven: a refused one leaves no folder
  write_file_atomically(out, merged.trace.dump());
  std::cout << "row " << row.name << ": steps " << row.trace.first_step << "-" << row.trace.last_step << ", "
            << merged.ranks.size() << (merged.ranks.size() == 1 ? " rank" : " ranks") << "\n";
  std::cout << "clock: " << merged.clock << "\n";
  for (const auto& rank : merged.ranks) {
    std::cout << "  rank " << rank.rank << "  " << rank.file << "  host " << rank.host << "  " << rank.events
              << " events  shift " << format_fixed(rank.shift_us / 1e3, 3) << " ms\n";
  }
  std::cout << "merged: " << out.string() << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

}  // namespace ddpbench
