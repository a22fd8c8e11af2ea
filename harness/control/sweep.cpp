#include "harness/control/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <set>

#include "harness/base/atomic_file.hpp"
#include "harness/base/closest_name.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/text_file.hpp"
#include "harness/base/whole_integer.hpp"
#include "harness/control/progress.hpp"
#include "harness/control/run_options.hpp"
#include "harness/launch/interruption.hpp"
#include "harness/launch/process_supervisor.hpp"
#include "harness/launch/slurm_hostlist.hpp"
#include "reports/compare.hpp"
#include "reports/projection.hpp"
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

std::string row_where_of(const std::string& origin, const std::string& row) { return origin + ", row '" + row + "'"; }

bool is_distributed(const RunConfig& c) { return c.strategy == "ddp" || c.strategy == "torch-ddp"; }

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
  r.reason = std::move(reason);
  r.config = run_config_to_json(row.config);
  return r;
}

// srun's options for a row of a sweep with --launcher srun: one task per rank, spread evenly
// over the nodes the row asks for; one task for a single-process row. Empty: the row runs here.
std::vector<std::string> srun_launch(const SweepCommand& command, const SweepEnvironment& env, const SweepRowSpec& spec,
                                     const RunConfig& c) {
  if (command.launcher != "srun") return {};
  const int64_t tasks = is_distributed(c) ? c.nproc : 1;
  // A rank that fails is found by the others (its collectives fail at once, or within
  // --timeout-s), which then fail the row: srun's --kill-on-bad-exit would stop them with
  // SIGTERM first, and a rank stopped by a signal reports the row interrupted.
  return {env.srun,
          "--nodes=" + std::to_string(spec.nodes),
          "--ntasks=" + std::to_string(tasks),
          "--ntasks-per-node=" + std::to_string(tasks / spec.nodes),
          "--job-name=ddpbench-" + spec.name};
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
    return result;
  }
  if (interrupted) return result_without_run(row, RunStatus::interrupted, "interrupted before the row wrote a result");
  return result_without_run(row, RunStatus::failed,
                            exit.describe() + (exit.stderr_tail.empty() ? "" : ": " + exit.tail(3)));
}

}  // namespace

void read_slurm_allocation(SweepEnvironment& environment) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') {
    throw InputError("--launcher srun: not inside a SLURM allocation (SLURM_JOB_ID is not set): run the sweep under "
                     "salloc, or in an sbatch script (scripts/slurm/ddpbench.sbatch)");
  }
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  const char* name = "SLURM_JOB_NODELIST";
  if (list == nullptr || *list == '\0') {
    list = std::getenv("SLURM_NODELIST");
    name = "SLURM_NODELIST";
  }
  if (list == nullptr || *list == '\0') {
    throw InputError("--launcher srun: the allocation names no nodes (SLURM_JOB_NODELIST is not set)");
  }
  environment.allocation_nodes = expand_hostlist(list, name);
  environment.srun = find_executable("srun");
  if (environment.srun.empty()) {
    throw InputError("--launcher srun: no srun in PATH (install SLURM's client, Debian's slurm-client)");
  }
  // Each node's GPUs, where SLURM says (a sweep under salloc may run on a login node).
  if (const char* gpus = std::getenv("SLURM_GPUS_ON_NODE"); gpus != nullptr) {
    if (const auto count = whole_integer<int64_t>(gpus); count && *count >= 0) environment.visible_gpus = *count;
  }
}

std::string plan_difference(const RunConfig& planned, const RunResult& ran) {
  return config_difference(comparable_config(run_config_to_json(planned)), comparable_config(ran.config));
}

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

namespace {

// A sweep file is checked in full before anything runs: every key known, every value of its
// type, row names unique, row options valid exactly as on the command line.
void expect_known_keys(const json& object, std::initializer_list<const char*> keys, const std::string& where) {
  const std::vector<std::string> known(keys.begin(), keys.end());
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw InputError(where + ": unknown key '" + key + "'" + did_you_mean(key, known));
    }
  }
}

const json& field(const json& object, const char* key, json::value_t type, const char* type_name,
                  const std::string& where) {
  const json& value = object.at(key);
  const bool number_ok = type == json::value_t::number_float && value.is_number();
  const bool integer_ok = type == json::value_t::number_integer && value.is_number_integer();
  if (value.type() != type && !number_ok && !integer_ok) {
    throw InputError(where + ": '" + key + "' must be " + type_name + ", not " + value.type_name() + " " + value.dump());
  }
  return value;
}

json object_field(const json& object, const char* key, const std::string& where) {
  return object.contains(key) ? field(object, key, json::value_t::object, "an object", where) : json::object();
}

// Row options, checked as the command line checks them.
void check_options(const json& options, const std::string& where) {
  RunConfig scratch;
  apply_run_config_json(scratch, options, where);
}

}  // namespace

SweepDefinition read_sweep_file(const std::filesystem::path& path) {
  return parse_sweep_file(read_text_file(path, "--file: cannot read sweep file"), path.string());
}

SweepDefinition parse_sweep_file(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError("--file '" + source + "' is not valid JSON: " + e.what());
  }
  const std::string where = "sweep file '" + source + "'";
  if (!j.is_object()) throw InputError(where + ": expected a JSON object, got " + std::string(j.type_name()));
  expect_known_keys(j, {"name", "baseline", "controlled_global_batch", "defaults", "rows"}, where);
  SweepDefinition d;
  d.name = j.contains("name") ? field(j, "name", json::value_t::string, "a string", where).get<std::string>()
                              : source;
  d.defaults = object_field(j, "defaults", where);
  check_options(d.defaults, where + ", defaults");
  if (j.contains("controlled_global_batch")) {
    d.controlled_global_batch =
        field(j, "controlled_global_batch", json::value_t::number_integer, "an integer", where).get<int64_t>();
    if (d.controlled_global_batch <= 0) throw InputError(where + ": 'controlled_global_batch' must be positive");
  }
  if (!j.contains("rows")) throw InputError(where + ": no 'rows'");
  for (const auto& r : field(j, "rows", json::value_t::array, "an array", where)) {
    const std::string row_where = where + ", row " + std::to_string(d.rows.size() + 1);
    if (!r.is_object()) throw InputError(row_where + ": expected an object, got " + std::string(r.type_name()));
    expect_known_keys(r, {"name", "devices", "nodes", "tutorial_seconds", "no_twin", "options", "faithful",
                          "controlled"},
                      row_where);
    if (!r.contains("name")) throw InputError(row_where + ": no 'name'");
    SweepRowSpec row;
    row.name = field(r, "name", json::value_t::string, "a string", row_where).get<std::string>();
    if (row.name.empty()) throw InputError(row_where + ": empty 'name'");
    // A row's name is its result file's name under --out-dir: nothing that could leave it.
    const bool safe = row.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
                          std::string::npos &&
                      row.name.front() != '.';
    if (!safe) {
      throw InputError(row_where + ": name '" + row.name +
                       "' must be letters, digits, '.', '_' or '-', not starting with '.' (it names a result file)");
    }
    const std::string named = row_where_of(where, row.name);
    for (const auto& other : d.rows) {
      if (other.name == row.name) throw InputError(named + ": a second row of that name");
    }
    if (r.contains("devices")) {
      row.devices = field(r, "devices", json::value_t::number_integer, "an integer", named).get<int64_t>();
      if (row.devices <= 0) throw InputError(named + ": 'devices' must be positive");
    }
    if (r.contains("nodes")) {
      row.nodes = field(r, "nodes", json::value_t::number_integer, "an integer", named).get<int64_t>();
      if (row.nodes <= 0) throw InputError(named + ": 'nodes' must be positive");
    }
    if (r.contains("no_twin")) {
      row.no_twin = field(r, "no_twin", json::value_t::string, "a string (why the row has no PyTorch twin)", named)
                        .get<std::string>();
      if (row.no_twin.empty()) throw InputError(named + ": 'no_twin' must say why");
    }
    if (r.contains("tutorial_seconds")) {
      row.tutorial_seconds = field(r, "tutorial_seconds", json::value_t::number_float, "a number", named).get<double>();
    }
    row.options = object_field(r, "options", named);
    check_options(row.options, named);
    for (const char* mode : {"faithful", "controlled"}) {
      if (!r.contains(mode)) continue;
      row.mode_options[mode] = object_field(r, mode, named);
      check_options(row.mode_options[mode], named + " (" + mode + ")");
    }
    d.rows.push_back(std::move(row));
  }
  if (d.rows.empty()) throw InputError(where + ": no rows");
  d.baseline_row = d.rows.front().name;
  if (j.contains("baseline")) {
    d.baseline_row = field(j, "baseline", json::value_t::string, "a string", where).get<std::string>();
    const bool known = std::any_of(d.rows.begin(), d.rows.end(), [&](const SweepRowSpec& r) { return r.name == d.baseline_row; });
    if (!known) throw InputError(where + ": 'baseline' names no row ('" + d.baseline_row + "')");
  }
  return d;
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
  if (!command.project.empty()) {
    ProjectionOptions projection;
    projection.fabric = command.project;
    plan.info.projection = projection_options_json(projection);
  }
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
      const std::string where = row_where_of(definition.name, spec.name) + " (" + mode + ")";
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
      if (c.nodes != 1) {
        throw InputError(where + ": --nodes is the sweep's to give each rank; a row asks for nodes with \"nodes\" "
                         "beside its \"devices\" in the sweep file");
      }
      // A graphed row needs a GPU: without one it is skipped, as `run` skips it, and what only a
      // capture refuses (the CPU table's device and warm-up) is not judged.
      const bool graphs_without_gpu = c.cuda_graphs && env.visible_gpus == 0 && cuda_graphs_capture(c.strategy);
      try {
        RunConfig judged = c;
        judged.cuda_graphs = judged.cuda_graphs && !graphs_without_gpu;
        validate(judged);
        if (graphs_without_gpu) validate_cuda_graphs(c, /*with_device_and_warm_up=*/false);
      } catch (const InputError& e) {
        throw InputError(where + ": " + e.what());
      }
      // The CPU preset's mixed precision: the row's type where the CPU computes it, bf16 in
      // place of fp16 where only bf16 is native, else skipped (unless asked for by name).
      std::vector<std::string> notes;
      const bool asked_for = overrides_amp ||
                             std::find(command.rows.begin(), command.rows.end(), spec.name) != command.rows.end();
      // bf16 even where the CPU also has AVX512-FP16: LibTorch's CPU kernels are oneDNN's bf16
      // ones there, while its fp16 autocast measured ~25x slower than fp32 on such a Xeon.
      if (cpu && !overrides_amp && c.amp == AmpMode::fp16 && env.cpu_native_bf16) {
        c.amp = AmpMode::bf16;
        notes.push_back(std::string("CPU preset: mixed precision in bf16, not the tutorial's fp16: this CPU computes "
                                    "bf16 (AVX512-BF16/AMX), ") +
                        (env.cpu_native_fp16 ? "and LibTorch's fp16 autocast on CPUs ran ~25x slower than fp32 even "
                                               "with AVX512-FP16"
                                             : "not fp16, which autocast would emulate ~40x slower than fp32"));
      }
      const bool native = c.amp == AmpMode::bf16 && env.cpu_native_bf16;
      std::optional<std::string> skip;
      if (std::find(env.strategies.begin(), env.strategies.end(), c.strategy) == env.strategies.end()) {
        skip = "strategy '" + c.strategy + "' is not in this build";
      } else if (graphs_without_gpu) {
        skip = "--cuda-graphs captures the step on a GPU, and none is visible";
      } else if (spec.nodes > 1 && command.launcher != "srun") {
        skip = "needs " + std::to_string(spec.nodes) + " nodes: run the sweep inside a SLURM allocation of as many "
               "with --launcher srun";
      } else if (command.launcher == "srun" && spec.nodes > static_cast<int64_t>(env.allocation_nodes.size())) {
        skip = "needs " + std::to_string(spec.nodes) + " nodes; the allocation has " +
               std::to_string(env.allocation_nodes.size());
      } else if (uses_gpus(c, env) && (spec.devices + spec.nodes - 1) / spec.nodes > env.visible_gpus) {
        skip = "needs " + std::to_string(spec.devices) + " GPUs" +
               (spec.nodes > 1 ? " over " + std::to_string(spec.nodes) + " nodes" : "") + ", " +
               std::to_string(env.visible_gpus) + (spec.nodes > 1 ? " on each" : " visible");
      } else if (cpu && c.amp != AmpMode::off && !native && !asked_for) {
        skip = "CPU preset: this CPU has no bf16 arithmetic (AVX512-BF16, AMX), so autocast would emulate it, ~40x "
               "slower than fp32 (and LibTorch's fp16 on CPUs is ~25x slower even with AVX512-FP16); name the row "
               "in --rows to run it anyway";
      }
      if (spec.nodes > 1) {
        const int64_t ranks = is_distributed(c) ? c.nproc : 1;
        if (ranks % spec.nodes != 0 || ranks < spec.nodes) {
          throw InputError(where + ": " + std::to_string(ranks) + (ranks == 1 ? " process" : " processes") +
                           " cannot be spread evenly over 'nodes' " + std::to_string(spec.nodes));
        }
      }
      const std::vector<std::string> launch = srun_launch(command, env, spec, c);
      // With --reference each repetition of a row is followed by its PyTorch twin: the same
      // configuration, PyTorch's own implementation of the strategy.
      std::optional<RunConfig> twin;
      std::optional<RunConfig> compared;  // ddpbench's row as its twin runs it, where the twin cannot run it
      const std::size_t row_info_index = plan.info.rows.size() - 1;
      if (command.reference) {
        const auto it = env.pytorch_twins.find(c.strategy);
        if (it == env.pytorch_twins.end()) {
          throw InputError("--reference: " + where + ": strategy '" + c.strategy + "' has no PyTorch twin");
        }
        twin = c;
        twin->strategy = it->second;
        // PyTorch's row is the reference: a slowdown plays a slower ddpbench, never a slower PyTorch.
        twin->inject_slowdown = 0;
        twin->inject_slowdown_rank.reset();
        twin->inject_slowdown_phase = SlowedPhase::optimizer;
        twin->name = spec.name + kPyTorchTwinSuffix;
        SweepRowInfo twin_info{twin->name, mode, kNotMeasured, spec.devices, spec.name};
        // PyTorch's SyncBatchNorm is CUDA-only: on CPU ranks both sides run without it, ddpbench's
        // row once more beside the twin, while the table keeps the row as the tutorial ran it.
        if (twin->strategy == "torch-ddp" && twin->sync_bn && is_distributed(c) && !uses_gpus(c, env)) {
          twin->sync_bn = false;
          compared = c;
          compared->sync_bn = false;
          compared->name = spec.name + kWithoutSyncBnSuffix;
          twin_info.compared_with = compared->name;
          twin_info.compared_without = "SyncBatchNorm: PyTorch's runs on CUDA only";
          plan.info.rows.push_back({compared->name, mode, kNotMeasured, spec.devices, ""});
        }
        plan.info.rows.push_back(twin_info);
      }
      const SweepRowInfo row_info = plan.info.rows[row_info_index];
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
        row.launch = launch;
        row.world_size = is_distributed(c) ? c.nproc : 1;
        row.config.nodes = spec.nodes;  // the placement is part of what the row is
        plan.rows.push_back(row);
        if (!twin) continue;
        if (compared) {
          PlannedRow ours = row;
          ours.info = plan.info.rows[row_info_index + 1];
          ours.config = *compared;
          ours.result_file = std::filesystem::path(command.out_dir) / "rows" / mode / (compared->name + suffix + ".json");
          ours.config.out = ours.result_file.string();
          ours.config.nodes = spec.nodes;
          plan.rows.push_back(std::move(ours));
        }
        row.info = plan.info.rows.back();
        row.config = *twin;
        if (const auto lacking = pytorch_lacks(*twin); lacking && !row.skip_reason) {
          row.skip_reason = "no PyTorch twin for this row: " + *lacking;
        } else if (!spec.no_twin.empty() && !row.skip_reason) {
          row.skip_reason = "no PyTorch twin for this row: " + spec.no_twin;
        }
        row.result_file = std::filesystem::path(command.out_dir) / "rows" / mode / (twin->name + suffix + ".json");
        row.config.out = row.result_file.string();
        row.config.nodes = spec.nodes;
        plan.rows.push_back(std::move(row));
      }
    }
  }
  // A row named as another's twin or run without SyncBatchNorm ("ddp-2gpu.torch") would share
  // its result file and its place in every report.
  for (std::size_t i = 0; i < plan.info.rows.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const SweepRowInfo& a = plan.info.rows[j];
      const SweepRowInfo& b = plan.info.rows[i];
      if (a.name != b.name || a.mode != b.mode) continue;
      const SweepRowInfo& made = a.reference_of.empty() && !b.reference_of.empty() ? b : a;
      throw InputError(row_where_of(definition.name, b.name) + ": that name is also " +
                       (made.reference_of.empty() ? "the run of row '" + b.name.substr(0, b.name.rfind('.')) +
                                                        "' without SyncBatchNorm, beside its PyTorch twin"
                                                  : "the PyTorch twin of row '" + made.reference_of + "'") +
                       " (--reference): rename the row");
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
      for (const auto& a : row.launch) std::cout << shell_quote(a) << " ";
      std::cout << "ddpbench";
      for (const auto& a : row_arguments(row)) std::cout << " " << shell_quote(a);
      std::cout << "\n";
    }
    return 0;
  }
  const std::filesystem::path out_dir = command.out_dir;
  require_writable(out_dir / "results.json", "--out-dir");
  const std::filesystem::path reports_dir = command.reports_dir.empty() ? out_dir : std::filesystem::path(command.reports_dir);
  if (!command.reports_dir.empty()) require_writable(reports_dir / "results.json", "--reports-dir");
  if (!command.gbench_json.empty()) require_writable(command.gbench_json, "--gbench-json");

  ResultDocument document;
  document.tool_version = env.tool_version;
  document.created_utc = utc_timestamp();
  document.argv = argv;
  document.environment = env.machine;
  document.sweep = plan.info;
  const std::string rows_href =
      std::filesystem::relative(std::filesystem::absolute(out_dir / "rows"), std::filesystem::absolute(reports_dir))
          .generic_string();
  if (!rows_href.empty()) document.sweep->rows_href = rows_href;
  document.option_defaults = run_config_to_json(RunConfig{});
  const auto reporters = default_reporters();
  auto write_reports = [&] {
    for (const auto& reporter : reporters) reporter->write(document, reports_dir / reporter->file_name());
    if (!command.gbench_json.empty()) make_gbench_reporter()->write(document, command.gbench_json);
  };

  // SIGINT or SIGTERM: the row in flight stops at its next step and keeps what it finished,
  // every finished row stays, the reports are written, and the sweep exits 130 or 143.
  catch_interruptions();
  if (env.before_rows) env.before_rows(plan);  // a signal while it waits stops the sweep as at a row
  bool failed = false;
  bool interrupted = false;
  std::vector<double> measured_row_s;  // wall time of each row run so far, for the ETA
  for (std::size_t i = 0; i < plan.rows.size() && !interrupted && interruption_signal() == 0; ++i) {
    const PlannedRow& row = plan.rows[i];
    RunResult result;
    bool resumed = false;
    if (command.resume && std::filesystem::exists(row.result_file)) {
      try {
        const ProvenResults previous_file = read_row_file(row.result_file);
        RunResult previous = previous_file.document().runs.at(0);
        // A skip is decided again every time: the GPUs and nodes it depended on may have come.
        // The same settings as compare reads them: an option one side does not set, at its default.
        const bool finished = previous.status == RunStatus::ok;
        if (finished && runs_the_same(previous.config, run_config_to_json(row.config), previous_file.option_defaults(),
                                      run_config_to_json(RunConfig{}))) {
          result = std::move(previous);
          resumed = true;
        }
      } catch (const std::exception&) {
      }
    }
    std::cerr << "ddpbench sweep: [" << (i + 1) << "/" << plan.rows.size() << "] " << row.info.name << " ("
              << row.info.mode << (command.repeat > 1 ? ", repetition " + std::to_string(row.repetition + 1) : "")
              << ")" << (resumed ? ": done before, kept (--resume)" : "") << "; "
              << sweep_progress(i, plan.rows.size(), measured_row_s) << "\n";
    if (!resumed) {
      const auto row_start = std::chrono::steady_clock::now();
      result = run_planned_row(row, interrupted);
      if (!row.skip_reason) {
        measured_row_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - row_start).count());
      }
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
    // A row stopped by a signal the sweep was not sent (scancel of its step, a kill) did not
    // measure what it was asked to: the sweep fails.
    failed = failed || result.status == RunStatus::failed ||
             (result.status == RunStatus::interrupted && interruption_signal() == 0);
    document.runs.push_back(std::move(result));
    write_reports();
  }
  std::cout << make_markdown_reporter()->render(document) << std::flush;
  const int signal = interruption_signal();
  std::cerr << "ddpbench sweep: " << (signal != 0 ? "interrupted; " : "") << "results in " << reports_dir.string()
            << "/results.{json,md,html}\n";
  if (signal != 0) return interrupted_exit_code(signal);
  return failed ? 1 : 0;
}

}  // namespace ddpbench
