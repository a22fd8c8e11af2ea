#include "harness/control/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <set>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/control/run_options.hpp"
#include "harness/launch/process_supervisor.hpp"
#include "reports/compare.hpp"
#include "reports/reporter.hpp"
#include "reports/result_file.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// The CPU preset's scale: batches and epochs small enough that the whole table runs in
// minutes on two cores. Times are then only comparable with each other.
constexpr int64_t kCpuBatchDivisor = 8;
const json kCpuSettings = {{"device", "cpu"},          {"max-steps", 4},          {"warmup-steps", 1},
                           {"max-eval-batches", 2},    {"synthetic-train-images", 8192},
                           {"synthetic-test-images", 1024}, {"workers", 2}};

const json kModeSettings = {
    {"faithful", json::object()},
    {"controlled", {{"num-classes", 10}, {"loader", "device"}, {"workers", 0}, {"test-transform", "plain"}}},
};

std::string row_where(const std::string& origin, const std::string& row) { return origin + ", row '" + row + "'"; }

bool is_distributed(const RunConfig& c) { return c.strategy == "ddp"; }

// A row runs on GPUs when its device says so, or says auto on a machine that has some.
bool uses_gpus(const RunConfig& c, const SweepEnvironment& env) {
  return c.device.starts_with("cuda") || (c.device == "auto" && env.visible_gpus > 0) ||
         (c.strategy == "dp" && c.devices.find("cpu") == std::string::npos && env.visible_gpus > 0);
}

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
  const auto rest = run_config_to_args(row.config);
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

// A row with no result of its own: skipped, or failed without writing one.
RunResult result_without_run(const PlannedRow& row, RunStatus status, std::string reason) {
  RunResult r;
  r.name = row.info.name;
  r.strategy = row.config.strategy;
  r.status = status;
  r.reason = std::move(reason);
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
  spec.env = environment_with({});
  spec.discard_stdout = true;
  SuperviseOptions options;
  options.prefix_relayed_lines = false;  // the row's own lines already name it
  const SupervisedRun run = run_supervised({spec}, options);
  interrupted = run.interrupted;
  const ProcessExit& exit = run.exits.front();
  if (std::filesystem::exists(row.result_file)) {
    try {
      return read_result_file(row.result_file).runs.at(0);
    } catch (const std::exception& e) {
      return result_without_run(row, RunStatus::failed, std::string("unreadable result: ") + e.what());
    }
  }
  return result_without_run(
      row, RunStatus::failed,
      interrupted ? "interrupted" : exit.describe() + (exit.stderr_tail.empty() ? "" : ": " + exit.tail(3)));
}

}  // namespace

SweepDefinition tutorial_sweep() {
  SweepDefinition d;
  d.name = "tutorial";
  d.baseline_row = "single";
  d.rows = {
      {"single", 1, 13.2, {{"strategy", "single"}}, json::object()},
      // The published DataParallel row used a global batch of 1024 and 20 workers.
      {"dp-4gpu", 4, 19.1, {{"strategy", "dp"}, {"devices", "0,1,2,3"}},
       {{"faithful", {{"batch-size", 1024}, {"workers", 20}}}}},
      {"ddp-2gpu", 2, 9.8, {{"strategy", "ddp"}, {"nproc", 2}}, json::object()},
      {"ddp-4gpu", 4, 6.1, {{"strategy", "ddp"}, {"nproc", 4}}, json::object()},
      {"ddp-4gpu-amp", 4, 6.5, {{"strategy", "ddp"}, {"nproc", 4}, {"amp", "fp16"}}, json::object()},
  };
  return d;
}

SweepDefinition read_sweep_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--file: cannot read sweep file '" + path.string() + "'");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw InputError("--file '" + path.string() + "' is not valid JSON: " + e.what());
  }
  const std::string where = "sweep file '" + path.string() + "'";
  try {
    SweepDefinition d;
    d.name = j.value("name", path.string());
    d.defaults = j.value("defaults", json::object());
    d.controlled_global_batch = j.value("controlled_global_batch", int64_t{1024});
    for (const auto& r : j.at("rows")) {
      SweepRowSpec row;
      row.name = r.at("name").get<std::string>();
      row.devices = r.value("devices", int64_t{1});
      row.tutorial_seconds = r.contains("tutorial_seconds") ? r.at("tutorial_seconds").get<double>() : kNotMeasured;
      row.options = r.value("options", json::object());
      for (const char* mode : {"faithful", "controlled"}) {
        if (r.contains(mode)) row.mode_options[mode] = r.at(mode);
      }
      if (row.name.empty()) throw InputError(where + ": a row has an empty name");
      d.rows.push_back(std::move(row));
    }
    if (d.rows.empty()) throw InputError(where + ": no rows");
    d.baseline_row = j.value("baseline", d.rows.front().name);
    return d;
  } catch (const json::exception& e) {
    throw InputError(where + ": " + e.what());
  }
}

SweepPlan plan_sweep(const SweepCommand& command, const SweepEnvironment& env) {
  const SweepDefinition definition =
      command.file.empty() ? tutorial_sweep() : read_sweep_file(command.file);
  const bool cpu = command.table == "cpu" || (command.table == "auto" && env.visible_gpus == 0);
  for (const auto& wanted : command.rows) {
    const bool known = std::any_of(definition.rows.begin(), definition.rows.end(),
                                   [&](const SweepRowSpec& r) { return r.name == wanted; });
    if (!known) {
      std::string names;
      for (const auto& r : definition.rows) names += (names.empty() ? "" : "|") + r.name;
      throw InputError("--rows: no row '" + wanted + "' in " + definition.name + " (rows: " + names + ")");
    }
  }
  const std::vector<std::string> modes =
      command.mode == "both" ? std::vector<std::string>{"faithful", "controlled"} : std::vector<std::string>{command.mode};

  SweepPlan plan;
  plan.info.preset = command.file.empty() ? (cpu ? "cpu" : "tutorial") : definition.name;
  plan.info.baseline_row = definition.baseline_row;
  plan.info.repeat = command.repeat;
  if (cpu) {
    plan.info.note = "No GPU on this machine: the CPU preset. The tutorial's rows run as Gloo ranks and CPU replicas "
                     "sharing " + std::to_string(env.machine.cpu_cores) + " cores, batches divided by " +
                     std::to_string(kCpuBatchDivisor) + ", epochs cut to " + kCpuSettings["max-steps"].dump() +
                     " steps: times compare rows with each other, not with the tutorial's GPUs.";
  }
  const bool overrides_amp = std::any_of(command.overrides.begin(), command.overrides.end(),
                                         [](const auto& o) { return o.first == "amp"; });
  for (const auto& mode : modes) {
    for (const auto& spec : definition.rows) {
      if (!command.rows.empty() && std::find(command.rows.begin(), command.rows.end(), spec.name) == command.rows.end()) {
        continue;
      }
      plan.info.rows.push_back({spec.name, mode, spec.tutorial_seconds, spec.devices, ""});
      const std::string where = row_where(definition.name, spec.name) + " (" + mode + ")";
      RunConfig c;
      apply_run_config_json(c, definition.defaults, where);
      apply_run_config_json(c, kModeSettings.at(mode), where);
      apply_run_config_json(c, spec.options, where);
      if (mode == "controlled") {
        // The same global batch for every row: split over the processes of a distributed row.
        const int64_t global = definition.controlled_global_batch / (cpu ? kCpuBatchDivisor : 1);
        c.batch_size = std::max<int64_t>(1, global / (is_distributed(c) ? c.nproc : 1));
      } else if (cpu) {
        c.batch_size = std::max<int64_t>(1, c.batch_size / kCpuBatchDivisor);
      }
      if (spec.mode_options.contains(mode)) apply_run_config_json(c, spec.mode_options.at(mode), where);
      if (cpu) {
        if (mode == "faithful" && spec.mode_options.contains(mode) && spec.mode_options.at(mode).contains("batch-size")) {
          c.batch_size = std::max<int64_t>(1, c.batch_size / kCpuBatchDivisor);
        }
        apply_run_config_json(c, kCpuSettings, where);
        if (c.strategy == "dp") {
          std::string devices;
          for (int64_t i = 0; i < spec.devices; ++i) devices += (i ? ",cpu" : "cpu");
          c.devices = devices;
        }
      }
      for (const auto& [key, value] : command.overrides) {
        try {
          find_run_option(key)->set(c, value);
        } catch (const InputError& e) {
          throw InputError(where + ": " + e.what());
        }
      }
      // A preset fills in whatever no layer above set, as it does on the command line.
      std::set<std::string> given;
      for (const json* layer : {&definition.defaults, &kModeSettings.at(mode), &spec.options}) {
        for (const auto& item : layer->items()) given.insert(item.key());
      }
      if (spec.mode_options.contains(mode)) {
        for (const auto& item : spec.mode_options.at(mode).items()) given.insert(item.key());
      }
      for (const auto& [key, value] : command.overrides) given.insert(key);
      apply_preset(c, given);
      c.name = spec.name;
      try {
        validate(c);
      } catch (const InputError& e) {
        throw InputError(where + ": " + e.what());
      }
      // The CPU preset's mixed precision: the row's type where the CPU computes it, bf16 in
      // place of fp16 where only bf16 is native, else skipped (unless asked for by name).
      std::vector<std::string> notes;
      const bool asked_for = overrides_amp ||
                             std::find(command.rows.begin(), command.rows.end(), spec.name) != command.rows.end();
      if (cpu && !asked_for && c.amp == AmpMode::fp16 && !env.cpu_native_fp16 && env.cpu_native_bf16) {
        c.amp = AmpMode::bf16;
        notes.push_back("CPU preset: mixed precision in bf16, not the tutorial's fp16: this CPU computes bf16 "
                        "(AVX512-BF16/AMX) but not fp16, which autocast would emulate ~40x slower than fp32");
      }
      const bool native = c.amp == AmpMode::fp16 ? env.cpu_native_fp16 : env.cpu_native_bf16;
      std::optional<std::string> skip;
      if (std::find(env.strategies.begin(), env.strategies.end(), c.strategy) == env.strategies.end()) {
        skip = "strategy '" + c.strategy + "' is not in this build";
      } else if (uses_gpus(c, env) && spec.devices > env.visible_gpus) {
        skip = "needs " + std::to_string(spec.devices) + " GPUs, " + std::to_string(env.visible_gpus) + " visible";
      } else if (cpu && c.amp != AmpMode::off && !native && !asked_for) {
        skip = "CPU preset: this CPU has no bf16/fp16 arithmetic (AVX512-BF16, AMX, AVX512-FP16), so autocast would "
               "emulate it, ~40x slower than fp32; name the row in --rows to run it anyway";
      }
      // With --reference each repetition of a row is followed by its PyTorch twin: the same
      // configuration, PyTorch's own implementation of the strategy.
      std::optional<RunConfig> twin;
      if (command.reference) {
        const auto it = env.pytorch_twins.find(c.strategy);
        if (it == env.pytorch_twins.end()) {
          throw InputError("--reference: " + where + ": strategy '" + c.strategy + "' has no PyTorch twin");
        }
        twin = c;
        twin->strategy = it->second;
        twin->name = spec.name + kPyTorchTwinSuffix;
        plan.info.rows.push_back({twin->name, mode, kNotMeasured, spec.devices, spec.name});
      }
      const SweepRowInfo row_info = plan.info.rows[plan.info.rows.size() - (twin ? 2 : 1)];
      for (int64_t rep = 0; rep < command.repeat; ++rep) {
        const std::string suffix = command.repeat > 1 ? ".r" + std::to_string(rep) : "";
        PlannedRow row;
        row.info = row_info;
        row.repetition = rep;
        row.config = c;
        row.skip_reason = skip;
        row.notes = notes;
        row.result_file = std::filesystem::path(command.out_dir) / "rows" / mode / (spec.name + suffix + ".json");
        row.config.out = row.result_file.string();
        plan.rows.push_back(row);
        if (!twin) continue;
        row.info = plan.info.rows.back();
        row.config = *twin;
        row.result_file = std::filesystem::path(command.out_dir) / "rows" / mode / (twin->name + suffix + ".json");
        row.config.out = row.result_file.string();
        plan.rows.push_back(std::move(row));
      }
    }
  }
  return plan;
}

int run_sweep(const SweepCommand& command, const std::vector<std::string>& argv, const SweepEnvironment& env) {
  const SweepPlan plan = plan_sweep(command, env);
  if (command.dry_run) {
    for (const auto& row : plan.rows) {
      std::cout << row.info.mode << "\t" << row.info.name << "\t";
      if (row.skip_reason) {
        std::cout << "skipped: " << *row.skip_reason << "\n";
        continue;
      }
      std::cout << "ddpbench";
      for (const auto& a : row_arguments(row)) std::cout << " " << shell_quote(a);
      std::cout << "\n";
    }
    return 0;
  }
  const std::filesystem::path out_dir = command.out_dir;
  require_writable(out_dir / "results.json", "--out-dir");
  if (!command.gbench_json.empty()) require_writable(command.gbench_json, "--gbench-json");

  ResultDocument document;
  document.tool_version = env.tool_version;
  document.created_utc = utc_timestamp();
  document.argv = argv;
  document.environment = env.machine;
  document.sweep = plan.info;
  const auto reporters = default_reporters();
  auto write_reports = [&] {
    for (const auto& reporter : reporters) reporter->write(document, out_dir / reporter->file_name());
    if (!command.gbench_json.empty()) make_gbench_reporter()->write(document, command.gbench_json);
  };

  bool failed = false;
  bool interrupted = false;
  for (std::size_t i = 0; i < plan.rows.size() && !interrupted; ++i) {
    const PlannedRow& row = plan.rows[i];
    RunResult result;
    bool resumed = false;
    if (command.resume && std::filesystem::exists(row.result_file)) {
      try {
        RunResult previous = read_result_file(row.result_file).runs.at(0);
        if (previous.status != RunStatus::failed &&
            comparable_config(previous.config) == comparable_config(run_config_to_json(row.config))) {
          result = std::move(previous);
          resumed = true;
        }
      } catch (const std::exception&) {
      }
    }
    std::cerr << "ddpbench sweep: [" << (i + 1) << "/" << plan.rows.size() << "] " << row.info.name << " ("
              << row.info.mode << (command.repeat > 1 ? ", repetition " + std::to_string(row.repetition + 1) : "")
              << ")" << (resumed ? ": done before, kept (--resume)" : "") << "\n";
    if (!resumed) {
      result = run_planned_row(row, interrupted);
      if (!std::filesystem::exists(row.result_file)) {
        ResultDocument row_document = document;
        row_document.sweep.reset();
        row_document.runs = {result};
        write_result_file(row.result_file, row_document);
      }
    }
    for (const auto& note : row.notes) result.strategy_details["notes"].push_back(note);
    result.name = row.info.name;
    result.mode = row.info.mode;
    result.repetition = row.repetition;
    failed = failed || result.status == RunStatus::failed;
    document.runs.push_back(std::move(result));
    write_reports();
  }
  std::cout << make_markdown_reporter()->render(document) << std::flush;
  std::cerr << "ddpbench sweep: " << (interrupted ? "interrupted; " : "") << "results in " << out_dir.string()
            << "/results.{json,md,html}\n";
  return failed || interrupted ? 1 : 0;
}

}  // namespace ddpbench
