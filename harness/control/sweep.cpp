#include "harness/control/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <tuple>

#include "data/cifar10_files.hpp"
#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/output_rule.hpp"
#include "harness/control/progress.hpp"
#include "harness/control/row_outputs.hpp"
#include "harness/control/run_options.hpp"
#include "harness/launch/interruption.hpp"
#include "harness/launch/process_supervisor.hpp"
#include "reports/compare.hpp"
#include "reports/environment_fingerprint.hpp"
#include "reports/reporter.hpp"
#include "reports/result_file.hpp"
#include "reports/result_proof.hpp"

namespace ddpbench {
namespace {

// A row's own result file, read through the one reader every verdict reads through: a row that
// says ok but did less work than configured comes back failed, and is run again on --resume.
ProvenResults read_row_file(const std::filesystem::path& file) {
  return read_results_here(file, "the row's result");
}

RunResult read_row_result(const std::filesystem::path& file) { return read_row_file(file).document().runs.at(0); }


std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> row_arguments(const PlannedRow& row) {
  std::vector<std::string> args{"run"};
  RunConfig given = row.config;
  if (!row.launch.empty()) given.nproc = 1;  // srun's tasks are the ranks: none starts others
  const auto rest = run_config_to_args(given);
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

// A row with no result of its own: skipped, or failed without writing one.
RunResult result_without_run(const PlannedRow& row, RunStatus status, std::string reason) {
  RunResult r;
  r.name = row.info.name;
  r.strategy = row.config.strategy;
  r.world_size = row.world_size;
  r.status = status;
  r.reason = reason_text(reason);
  r.config = run_config_to_json(row.config);
  return r;
}

// The result of a row: its file if it ran, else a row that says why not.
RunResult run_planned_row(const PlannedRow& row, bool& interrupted) {
  if (row.skip_reason) return result_without_run(row, RunStatus::skipped, *row.skip_reason);
  std::error_code ec;
  std::filesystem::remove(row.result_file, ec);
  ProcessSpec spec;
  spec.label = "row " + row.info.name;
  spec.program = current_executable();
  spec.args = row_arguments(row);
  if (!row.launch.empty()) {
    spec.program = row.launch.front();
    std::vector<std::string> args(row.launch.begin() + 1, row.launch.end());
    args.push_back(current_executable());
    args.insert(args.end(), spec.args.begin(), spec.args.end());
    spec.args = std::move(args);
  }
  spec.env = environment_with({});
  spec.discard_stdout = true;
  SuperviseOptions options;
  options.prefix_relayed_lines = false;  // the row's own lines already name it
  const SupervisedRun run = run_supervised({spec}, options);
  interrupted = run.interrupted;
  const ProcessExit& exit = run.exits.front();
  if (std::filesystem::exists(row.result_file)) {
    RunResult result;
    try {
      result = read_row_result(row.result_file);
    } catch (const std::exception& e) {
      return result_without_run(row, RunStatus::failed, std::string("unreadable result: ") + e.what());
    }
    // The plan is the run: a row that ran another configuration than planned is not that row.
    const std::string difference = plan_difference(row.config, result);
    if (!difference.empty()) {
      result.status = RunStatus::failed;
      result.reason = "ran another configuration than planned (planned vs ran: " + difference + ")";
    }
    return stopped_by_srun(row, std::move(result), exit, interrupted);
  }
  if (interrupted) return result_without_run(row, RunStatus::interrupted, "interrupted before the row wrote a result");
  return result_without_run(row, RunStatus::failed,
                            exit.describe() + (exit.stderr_tail.empty() ? "" : ": " + exit.tail(3)));
}

}  // namespace

std::string plan_difference(const RunConfig& planned, const RunResult& ran) {
  return config_difference(comparable_config(run_config_to_json(planned)), comparable_config(ran.config));
}

std::string measured_elsewhere(const Environment& before, const Environment& now) {
  std::string why;
  for (const auto& d : environment_differences(before, now)) why += (why.empty() ? "" : "; ") + d.text;
  // This build, which the comparable environment leaves out (compare judges twin builds alike):
  // a row built by another compiler is not this one's to keep. (The host alone is not: hosts are
  // renamed; --paired refuses rounds that say they ran on another host than their file's.)
  if (before.compiler != now.compiler) {
    why += (why.empty() ? "" : "; ") + std::string("compiler: ") +
           (before.compiler.empty() ? "not recorded" : before.compiler) + " vs " + now.compiler;
  }
  if (before.git_revision != now.git_revision) {
    why += (why.empty() ? "" : "; ") + std::string("git revision: ") +
           (before.git_revision.empty() ? "not recorded" : before.git_revision) + " vs " + now.git_revision;
  }
  return why;
}

std::string not_this_slots_run(const PlannedRow& row, const ProvenResults& file) {
  const ResultDocument& document = file.document();
  if (document.sweep || document.runs.size() != 1) {
    return "the file holds " + std::to_string(document.runs.size()) + " runs" + (document.sweep ? " of a sweep" : "") +
           ", not one row's run";
  }
  const RunResult& run = document.runs.front();
  if (run.name != row.config.name) return "it is row '" + run.name + "''s run";
  // The file's own record of where its run wrote it: a copy under another slot's name, or from
  // another --out-dir, says so (a resume spelling --out-dir otherwise runs the rows again).
  const nlohmann::json out = run.config.is_object() ? run.config.value("out", nlohmann::json()) : nlohmann::json();
  if (!out.is_string() ||
      std::filesystem::path(out.get<std::string>()).lexically_normal() != row.result_file.lexically_normal()) {
    return "it was written as " + (out.is_string() ? out.get<std::string>() : std::string("an unnamed file")) +
           ", not as " + row.result_file.string();
  }
  if (row.config.dataset == DatasetKind::auto_detect) {
    const std::string found_now = find_cifar10(row.config.data_dir).empty() ? "synthetic" : "cifar10";
    if (run.dataset != found_now) return "it trained on " + run.dataset + "; --dataset auto finds " + found_now + " now";
  }
  if (row.info.reference_of.empty() && run.threads_per_rank <= 0) {
    return "it does not record its threads per rank, which this build records";
  }
  if (run.status == RunStatus::ok && run.step_records.empty()) {
    return "it holds no step records, which this build records (one a step)";
  }
  // A row of one process records no ranks' timings (its own are the row's); one of several, each.
  if (run.status == RunStatus::ok && run.world_size > 1 && static_cast<int64_t>(run.ranks.size()) != run.world_size) {
    return "it records " + std::to_string(run.ranks.size()) + " of its " + std::to_string(run.world_size) +
           " ranks' timings, which this build records for each";
  }
  return "";
}

namespace {

void print_dry_run(const SweepPlan& plan) {
  for (const auto& row : plan.rows) {
    std::cout << row.info.mode << "\t" << row.info.name << "\t";
    if (row.skip_reason) {
      std::cout << "skipped: " << *row.skip_reason << "\n";
      continue;
    }
    for (const auto& a : row.launch) std::cout << shell_quote(a) << " ";
    std::cout << "ddpbench";
    for (const auto& a : row_arguments(row)) std::cout << " " << shell_quote(a);
    std::cout << "\n";
  }
}

std::filesystem::path reports_dir_of(const SweepCommand& command) {
  return command.reports_dir.empty() ? std::filesystem::path(command.out_dir) : std::filesystem::path(command.reports_dir);
}

// The output rule (harness/base/output_rule.hpp), before any row runs: the reports, the Google
// Benchmark file, and every row's result file and checkpoint never replace the sweep file, a row's
// --init-from or one another, only an earlier file of their own kind (--resume's rows are the
// sweep's own earlier results).
void check_sweep_files(const SweepCommand& command, const SweepEnvironment& env, const SweepPlan& plan,
                       const std::filesystem::path& reports_dir,
                       const std::vector<std::unique_ptr<Reporter>>& reporters) {
  std::vector<CommandInput> inputs{{"--file", command.file}};
  std::vector<CommandOutput> outputs;
  const std::string reports_flag = command.reports_dir.empty() ? "--out-dir" : "--reports-dir";
  for (const auto& reporter : reporters) {
    outputs.push_back({reports_flag + "'s " + reporter->file_name(), reports_dir / reporter->file_name(),
                       "the sweep's " + reporter->file_name(),
                       own_kind_by_text([&reporter](std::string_view text) { return reporter->wrote(text); })});
  }
  const auto gbench = make_gbench_reporter();
  outputs.push_back({"--gbench-json", command.gbench_json, "Google Benchmark's JSON of a sweep",
                     own_kind_by_text([&gbench](std::string_view text) { return gbench->wrote(text); })});
  for (const PlannedRow& row : plan.rows) {
    const std::string label = "row " + row_label(row.info.name, row.info.mode) +
                              (command.repeat > 1 ? " repetition " + std::to_string(row.repetition) : "");
    inputs.push_back({label + "'s --init-from", row.config.init_from});
    RunConfig written = row.config;  // what its run is given: its own result file, and, run, the rest
    written.out = row.result_file.string();
    if (row.skip_reason) written.save_checkpoint.clear();
    for (auto& output : row_outputs(written, planned_ranks(row.config), !row.skip_reason, env.is_checkpoint, label)) {
      outputs.push_back(std::move(output));
    }
    for (auto& cache : row.skip_reason ? std::vector<CommandOutput>{} : synthetic_cache_outputs(row.config)) {
      const bool listed = std::any_of(outputs.begin(), outputs.end(), [&](const CommandOutput& o) { return o.path == cache.path; });
      if (!listed) outputs.push_back(std::move(cache));  // the rows of one set share its cache
    }
  }
  check_command_files(inputs, outputs);
}

// The sweep's document and where its reports go, rewritten after every row.
class SweepReports {
 public:
  SweepReports(const SweepCommand& command, const std::vector<std::string>& argv, const SweepEnvironment& env,
               const SweepPlan& plan)
      : command_(command),
        reports_dir_(reports_dir_of(command)),
        reporters_(default_reporters()) {
    const std::filesystem::path out_dir = command.out_dir;
    check_sweep_files(command, env, plan, reports_dir_, reporters_);
    std::vector<std::pair<std::filesystem::path, std::string>> written{{out_dir / "results.json", "--out-dir"}};
    if (!command.reports_dir.empty()) written.emplace_back(reports_dir_ / "results.json", "--reports-dir");
    if (!command.gbench_json.empty()) written.emplace_back(command.gbench_json, "--gbench-json");
    require_all_writable(written);
    document_.tool_version = env.tool_version;
    document_.created_utc = utc_timestamp();
    document_.argv = argv;
    document_.environment = env.machine;
    document_.sweep = plan.info;
    const std::string rows_href =
        std::filesystem::relative(std::filesystem::absolute(out_dir / "rows"), std::filesystem::absolute(reports_dir_))
            .generic_string();
    if (!rows_href.empty()) document_.sweep->rows_href = rows_href;
    document_.option_defaults = run_config_to_json(RunConfig{});
  }

  // A row's own file, for a row that wrote none: the sweep's document with only that row.
  void write_row_file(const PlannedRow& row, const RunResult& result) const {
    ResultDocument row_document = document_;
    row_document.sweep.reset();
    row_document.runs = {result};
    write_result_file(row.result_file, row_document);
  }

  void add(RunResult result) {
    document_.runs.push_back(std::move(result));
    write();
  }

  // Every report of the document as it stands: before the first row, each row not run, so that no
  // report of an earlier sweep into the same folder outlives this one's start.
  void write() const {
    for (const auto& reporter : reporters_) reporter->write(document_, reports_dir_ / reporter->file_name());
    if (!command_.gbench_json.empty()) make_gbench_reporter()->write(document_, command_.gbench_json);
  }

  const ResultDocument& document() const { return document_; }
  const std::filesystem::path& reports_dir() const { return reports_dir_; }

 private:
  const SweepCommand& command_;
  std::filesystem::path reports_dir_;
  std::vector<std::unique_ptr<Reporter>> reporters_;
  ResultDocument document_;
};

// --resume: the row's earlier result where it finished with the configuration planned now, on
// this machine and build (else `rerun_because` says why it runs again). A skip is decided again
// every time: the GPUs and nodes it depended on may have come.

std::optional<RunResult> finished_before(const PlannedRow& row, const Environment& here, std::string& rerun_because) {
  if (!std::filesystem::exists(row.result_file)) return std::nullopt;
  try {
    const ProvenResults previous_file = read_row_file(row.result_file);
    RunResult previous = previous_file.document().runs.at(0);
    // The same settings as compare reads them: an option one side does not set, at its default.
    const bool finished = previous.status == RunStatus::ok;
    if (!finished || !runs_the_same(previous.config, run_config_to_json(row.config), previous_file.option_defaults(),
                                    run_config_to_json(RunConfig{}))) {
      return std::nullopt;
    }
    rerun_because = not_this_slots_run(row, previous_file);
    if (rerun_because.empty()) rerun_because = measured_elsewhere(previous_file.document().environment, here);
    if (rerun_because.empty()) return previous;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

namespace {

// The task srun saw fail first, as its rank ("rank 1 on node2: Exited with exit code 1"): srun
// says each ("srun: error: node2: task 1: ..."), and task K is rank K; a task that ended by srun's
// own stop (exit 143, Terminated) is not the one that failed. Empty where srun named none.
std::string failed_task(const std::vector<std::string>& srun_lines) {
  static const std::regex task(R"(srun: error: ([^:\s]+): tasks? (\d+)[^:]*: (.*))");
  for (const auto& line : srun_lines) {
    std::smatch m;
    if (!std::regex_search(line, m, task)) continue;
    const std::string how = m[3].str();
    if (how.find("exit code 143") != std::string::npos || how.find("Terminated") != std::string::npos) continue;
    return "rank " + m[2].str() + " on " + m[1].str() + ": " + how;
  }
  return "";
}

}  // namespace

RunResult stopped_by_srun(const PlannedRow& row, RunResult result, const ProcessExit& srun_exit, bool sweep_interrupted) {
  if (row.launch.empty() || result.status != RunStatus::interrupted || sweep_interrupted || !srun_exit.failed()) {
    return result;
  }
  result.status = RunStatus::failed;
  const std::string culprit = failed_task(srun_exit.stderr_tail);
  result.reason = "a task failed and srun stopped the others (--kill-on-bad-exit)" +
                  (culprit.empty() ? std::string() : ": " + culprit) + "; " + srun_exit.describe() +
                  (srun_exit.stderr_tail.empty() ? "" : ": " + reason_text(srun_exit.tail(3)));
  return result;
}

int run_sweep(const SweepCommand& command, const std::vector<std::string>& argv, const SweepEnvironment& env) {
  const SweepPlan plan = plan_sweep(command, env);
  if (command.dry_run) {  // what a run would refuse, --dry-run refuses: its outputs are checked too
    check_sweep_files(command, env, plan, reports_dir_of(command), default_reporters());
    print_dry_run(plan);
    return 0;
  }
  SweepReports reports(command, argv, env, plan);
  reports.write();
  // SIGINT or SIGTERM: the row in flight stops at its next step and keeps what it finished,
  // every finished row stays, the reports are written, and the sweep exits 130 or 143.
  catch_interruptions();
  if (env.before_rows) env.before_rows(plan);  // a signal while it waits stops the sweep as at a row
  bool failed = false;
  bool interrupted = false;
  std::vector<double> measured_row_s;  // wall time of each row run so far, for the ETA
  for (std::size_t i = 0; i < plan.rows.size() && !interrupted && interruption_signal() == 0; ++i) {
    const PlannedRow& row = plan.rows[i];
    std::string elsewhere;
    std::optional<RunResult> kept = command.resume ? finished_before(row, env.machine, elsewhere) : std::nullopt;
    std::cerr << "ddpbench sweep: [" << (i + 1) << "/" << plan.rows.size() << "] " << row.info.name << " ("
              << row.info.mode
              << (command.repeat > 1  // numbered as the reports and the result file number it
                      ? ", repetition " + std::to_string(row.repetition) + " of 0-" + std::to_string(command.repeat - 1)
                      : "")
              << ")" << (kept ? ": done before, kept (--resume)" : "")
              << (elsewhere.empty() ? "" : ": done before, not kept, run again (" + elsewhere + ")")
              << "; "
              << sweep_progress(i, plan.rows.size(), measured_row_s) << "\n";
    RunResult result;
    if (kept) {
      result = std::move(*kept);
    } else {
      const auto row_start = std::chrono::steady_clock::now();
      result = run_planned_row(row, interrupted);
      if (!row.skip_reason) {
        measured_row_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - row_start).count());
      }
      if (!std::filesystem::exists(row.result_file)) reports.write_row_file(row, result);
    }
    for (const auto& note : row.notes) result.strategy_details["notes"].push_back(note);
    result.name = row.info.name;
    result.mode = row.info.mode;
    result.repetition = row.repetition;
    // A row stopped by a signal the sweep was not sent (scancel of its step, a kill) did not
    // measure what it was asked to: the sweep fails.
    failed = failed || result.status == RunStatus::failed ||
             (result.status == RunStatus::interrupted && interruption_signal() == 0);
    reports.add(std::move(result));
  }
  std::cout << make_markdown_reporter()->render(reports.document()) << std::flush;
  const int signal = interruption_signal();
  std::cerr << "ddpbench sweep: " << (signal != 0 ? "interrupted; " : "") << "results in "
            << reports.reports_dir().string() << "/results.{json,md,html}\n";
  if (signal != 0) return interrupted_exit_code(signal);
  return failed ? 1 : 0;
}

}  // namespace ddpbench
