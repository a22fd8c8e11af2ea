#include "harness/control/sweep_plan.hpp"

#include <algorithm>
#include <set>

#include "harness/base/input_error.hpp"
#include "harness/base/whole_integer.hpp"
#include "harness/control/row_check.hpp"
#include "harness/control/run_options.hpp"
#include "harness/launch/process_supervisor.hpp"
#include "harness/launch/slurm_hostlist.hpp"
#include "reports/projection.hpp"

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

bool is_distributed(const RunConfig& c) { return c.strategy == "ddp" || c.strategy == "torch-ddp"; }

// A row runs on GPUs when its device says so, or says auto on a machine that has some.
bool uses_gpus(const RunConfig& c, const SweepEnvironment& env) {
  return c.device.starts_with("cuda") || (c.device == "auto" && env.visible_gpus > 0) ||
         (c.strategy == "dp" && c.devices.find("cpu") == std::string::npos && env.visible_gpus > 0);
}

bool named_in_rows(const SweepCommand& command, const std::string& name) {
  return std::find(command.rows.begin(), command.rows.end(), name) != command.rows.end();
}

// A graphed row needs a GPU: without one it is skipped, as `run` skips it, and what only a
// capture refuses (the CPU table's device and warm-up) is not judged.
bool graphs_without_gpu(const RunConfig& c, const SweepEnvironment& env) {
  return c.cuda_graphs && env.visible_gpus == 0 && cuda_graphs_capture(c.strategy);
}

// The sweep's layers of options a row's configuration is built from, in the order they apply.
std::vector<const json*> option_layers(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode) {
  std::vector<const json*> layers{&context.definition.defaults, &kModeSettings.at(mode), &spec.options};
  if (spec.mode_options.contains(mode)) layers.push_back(&spec.mode_options.at(mode));
  return layers;
}

// The CPU preset's cuts: each setting of kCpuSettings at most the preset's (the smaller of the
// row's and the preset's, an unset cut taking the preset's), never larger than the row asked for;
// its device the CPU (the table has no GPU); DataParallel's devices as many CPU replicas; and a
// faithful row's batch divided by kCpuBatchDivisor (a controlled row's global batch is, below).
void apply_cpu_preset(const SweepRowSpec& spec, RunConfig& c, const std::string& mode) {
  c.device = kCpuSettings["device"].get<std::string>();
  const auto cut = [](auto& value, const char* key) { value = std::min<int64_t>(value, kCpuSettings[key].get<int64_t>()); };
  const auto cut_optional = [](std::optional<int64_t>& value, const char* key) {
    value = std::min<int64_t>(value.value_or(INT64_MAX), kCpuSettings[key].get<int64_t>());
  };
  cut_optional(c.max_steps, "max-steps");
  cut_optional(c.max_eval_batches, "max-eval-batches");
  cut(c.warmup_steps, "warmup-steps");
  cut(c.synthetic_train_images, "synthetic-train-images");
  cut(c.synthetic_test_images, "synthetic-test-images");
  cut(c.workers, "workers");
  if (mode == "faithful") c.batch_size = std::max<int64_t>(1, c.batch_size / kCpuBatchDivisor);
  if (c.strategy == "dp") {  // as many CPU replicas as the row's own list of devices names, else its count
    const int64_t listed = c.devices == "all" ? 0 : static_cast<int64_t>(device_list(c).size());
    std::string devices;
    for (int64_t i = 0; i < (listed > 0 ? listed : spec.devices); ++i) devices += (i ? ",cpu" : "cpu");
    c.devices = devices;
  }
}

// A controlled row's batch: the sweep's one global batch (scaled to the CPU preset) split over the
// processes the row runs as, after every layer and override (--nproc 3 splits it three ways),
// unless its controlled options or the command line give a batch of its own.
void split_controlled_batch(const PlanContext& context, const SweepRowSpec& spec, RunConfig& c, bool cpu) {
  const auto given = [](const json& options) { return options.contains("batch-size"); };
  const bool overridden = std::any_of(context.command.overrides.begin(), context.command.overrides.end(),
                                      [](const auto& o) { return o.first == "batch-size"; });
  if (overridden || (spec.mode_options.contains("controlled") && given(spec.mode_options.at("controlled")))) return;
  const int64_t global = context.definition.controlled_global_batch / (cpu ? kCpuBatchDivisor : 1);
  c.batch_size = std::max<int64_t>(1, global / planned_ranks(c));
}

// A controlled row whose own options give a batch-size that the controlled global batch's share
// replaced: said in its notes (the split was silent).
std::vector<std::string> controlled_batch_note(const SweepRowSpec& spec, const RunConfig& c, const std::string& mode) {
  if (mode != "controlled" || !spec.options.contains("batch-size") || !spec.options.at("batch-size").is_number_integer()) {
    return {};
  }
  const int64_t own = spec.options.at("batch-size").get<int64_t>();
  if (own == c.batch_size) return {};
  return {"controlled mode: its own batch-size " + std::to_string(own) + " is replaced by its share of the "
          "controlled global batch, " + std::to_string(c.batch_size) + " a process over " +
          std::to_string(planned_ranks(c)) + (planned_ranks(c) == 1 ? " process" : " processes") +
          " (a batch-size in its \"mode_options\" for \"controlled\" keeps one of its own)"};
}

// Every layer of a row's configuration in its order (defaults, mode, row, the row's mode, the CPU
// preset's cuts where `cpu`, the command line), the controlled batch, and a preset's fill-ins.
RunConfig layered_config(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode,
                         const std::string& where, bool cpu) {
  RunConfig c;
  for (const json* layer : option_layers(context, spec, mode)) apply_run_config_json(c, *layer, where);
  if (cpu) apply_cpu_preset(spec, c, mode);
  for (const auto& [key, value] : context.command.overrides) {
    try {
      find_run_option(key)->set(c, value);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
  }
  if (mode == "controlled") split_controlled_batch(context, spec, c, cpu);
  // A preset fills in whatever no layer above set, as it does on the command line.
  std::set<std::string> given;
  for (const json* layer : option_layers(context, spec, mode)) {
    for (const auto& item : layer->items()) given.insert(item.key());
  }
  for (const auto& [key, value] : context.command.overrides) given.insert(key);
  apply_preset(c, given);
  c.name = spec.name;
  return c;
}

void judge_row(const PlanContext& context, const RunConfig& c, const std::string& where) {
  if (c.nodes != 1) {
    throw InputError(where + ": --nodes is the sweep's to give each rank; a row asks for nodes with \"nodes\" "
                     "beside its \"devices\" in the sweep file");
  }
  const bool without_gpu = graphs_without_gpu(c, context.environment);
  try {
    RunConfig judged = c;
    judged.cuda_graphs = judged.cuda_graphs && !without_gpu;
    validate(judged);
    if (without_gpu) validate_cuda_graphs(c, /*with_device_and_warm_up=*/false);
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
}

void check_node_spread(const SweepRowSpec& spec, const RunConfig& c, const std::string& where) {
  if (spec.nodes <= 1) return;
  const int64_t ranks = planned_ranks(c);
  if (ranks % spec.nodes != 0 || ranks < spec.nodes) {
    throw InputError(where + ": " + std::to_string(ranks) + (ranks == 1 ? " process" : " processes") +
                     " cannot be spread evenly over 'nodes' " + std::to_string(spec.nodes));
  }
}

// srun's options for a row of a sweep with --launcher srun: one task per rank, spread evenly
// over the nodes the row asks for; one task for a single-process row. Empty: the row runs here.
std::vector<std::string> srun_launch(const SweepCommand& command, const SweepEnvironment& env, const SweepRowSpec& spec,
                                     const RunConfig& c) {
  if (command.launcher != "srun") return {};
  const int64_t tasks = planned_ranks(c);
  // A rank stuck after its peer failed (alive, in no collective that could time out) would keep
  // the step, and the sweep, waiting: srun stops the others once a task fails, and the sweep says
  // which failed (run_planned_row).
  return {env.srun,
          "--nodes=" + std::to_string(spec.nodes),
          "--ntasks=" + std::to_string(tasks),
          "--ntasks-per-node=" + std::to_string(tasks / spec.nodes),
          "--kill-on-bad-exit=1",
          "--job-name=ddpbench-" + spec.name};
}

// A repetition's own file under --out-dir/rows/MODE/ (NAME.json, or NAME.rN.json with --repeat).
std::filesystem::path row_result_file(const SweepCommand& command, const std::string& mode, const std::string& name,
                                      int64_t repetition) {
  const std::string suffix = command.repeat > 1 ? ".r" + std::to_string(repetition) : "";
  return std::filesystem::path(command.out_dir) / "rows" / mode / (name + suffix + ".json");
}

std::string row_where(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode) {
  return sweep_row_where(context.definition.name, spec.name) + " (" + mode + ")";
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

PlanContext plan_context(const SweepCommand& command, const SweepEnvironment& environment,
                         const SweepDefinition& definition) {
  const bool cpu = command.table == "cpu" || (command.table == "auto" && environment.visible_gpus == 0);
  const bool overrides_amp = std::any_of(command.overrides.begin(), command.overrides.end(),
                                         [](const auto& o) { return o.first == "amp"; });
  return PlanContext{command, environment, definition, cpu, overrides_amp};
}

void check_named_rows(const SweepCommand& command, const SweepDefinition& definition) {
  for (const auto& wanted : command.rows) {
    const bool known = std::any_of(definition.rows.begin(), definition.rows.end(),
                                   [&](const SweepRowSpec& r) { return r.name == wanted; });
    if (known) continue;
    std::string names;
    for (const auto& r : definition.rows) names += (names.empty() ? "" : "|") + r.name;
    throw InputError("--rows: no row '" + wanted + "' in " + definition.name + " (rows: " + names + ")");
  }
}

SweepInfo plan_info(const PlanContext& context) {
  const SweepCommand& command = context.command;
  SweepInfo info;
  info.preset = command.file.empty() ? (context.cpu ? "cpu" : "tutorial") : context.definition.name;
  info.baseline_row = context.definition.baseline_row;
  info.repeat = command.repeat;
  if (!command.project.empty()) {
    ProjectionOptions projection;
    projection.fabric = command.project;
    info.projection = projection_options_json(projection);
  }
  return info;
}

// The CPU preset's note, from the rows planned: how they run (a sweep of one-process rows has
// no Gloo ranks to speak of).
std::string cpu_preset_note(const PlanContext& context, const std::vector<PlannedRow>& rows) {
  std::vector<std::string> kinds;
  const auto any = [&](const std::function<bool(const RunConfig&)>& is) {
    return std::any_of(rows.begin(), rows.end(), [&](const PlannedRow& r) { return !r.skip_reason && is(r.config); });
  };
  if (any([](const RunConfig& c) { return is_distributed(c) && c.nproc > 1; })) kinds.emplace_back("Gloo ranks");
  if (any([](const RunConfig& c) { return c.strategy == "dp" || c.strategy == "torch-dp"; })) {
    kinds.emplace_back("CPU replicas");
  }
  const std::string how = kinds.empty() ? "in one process each"
                                        : "as " + kinds.front() + (kinds.size() > 1 ? " and " + kinds.back() : "");
  return "No GPU on this machine: the CPU preset. The rows run " + how + " sharing " +
         std::to_string(context.environment.machine.cpu_cores) +
         " cores, cut short (what the preset changed in each row is listed under \"the CPU preset's "
         "changes\"): times compare rows with each other, not with the tutorial's GPUs.";
}

RunConfig configure_row(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode,
                        const std::string& where) {
  RunConfig c = layered_config(context, spec, mode, where, context.cpu);
  judge_row(context, c, where);
  return c;
}

std::vector<std::string> preset_changes(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode,
                                        const std::string& where) {
  if (!context.cpu) return {};
  const json before = run_config_to_json(layered_config(context, spec, mode, where, false));
  const json after = run_config_to_json(layered_config(context, spec, mode, where, true));
  std::vector<std::string> changes;
  const auto text = [](const json& v) { return v.is_null() ? std::string("unset") : v.is_string() ? v.get<std::string>() : v.dump(); };
  for (const auto& [key, value] : after.items()) {
    if (before.value(key, json()) != value) changes.push_back(key + " " + text(before.value(key, json())) + " → " + text(value));
  }
  return changes;
}

std::vector<std::string> cpu_mixed_precision(const PlanContext& context, RunConfig& c) {
  const SweepEnvironment& env = context.environment;
  // bf16 even where the CPU also has AVX512-FP16: LibTorch's CPU kernels are oneDNN's bf16
  // ones there, while its fp16 autocast measured ~25x slower than fp32 on such a Xeon.
  if (context.cpu && !context.overrides_amp && c.amp == AmpMode::fp16 && env.cpu_native_bf16) {
    c.amp = AmpMode::bf16;
    return {std::string("CPU preset: mixed precision in bf16, not the tutorial's fp16: this CPU computes "
                        "bf16 (AVX512-BF16/AMX), ") +
            (env.cpu_native_fp16 ? "and LibTorch's fp16 autocast on CPUs ran ~25x slower than fp32 even "
                                   "with AVX512-FP16"
                                 : "not fp16, which autocast would emulate ~40x slower than fp32")};
  }
  return {};
}

std::optional<std::string> skip_reason(const PlanContext& context, const SweepRowSpec& spec, const RunConfig& c) {
  const SweepCommand& command = context.command;
  const SweepEnvironment& env = context.environment;
  if (std::find(env.strategies.begin(), env.strategies.end(), c.strategy) == env.strategies.end()) {
    return "strategy '" + c.strategy + "' is not in this build";
  }
  if (graphs_without_gpu(c, env)) return "--cuda-graphs captures the step on a GPU, and none is visible";
  if (spec.nodes > 1 && command.launcher != "srun") {
    return "needs " + std::to_string(spec.nodes) + " nodes: run the sweep inside a SLURM allocation of as many "
           "with --launcher srun";
  }
  if (command.launcher == "srun" && spec.nodes > static_cast<int64_t>(env.allocation_nodes.size())) {
    return "needs " + std::to_string(spec.nodes) + " nodes; the allocation has " +
           std::to_string(env.allocation_nodes.size());
  }
  if (uses_gpus(c, env) && (spec.devices + spec.nodes - 1) / spec.nodes > env.visible_gpus) {
    return "needs " + std::to_string(spec.devices) + " GPUs" +
           (spec.nodes > 1 ? " over " + std::to_string(spec.nodes) + " nodes" : "") + ", " +
           std::to_string(env.visible_gpus) + (spec.nodes > 1 ? " on each" : " visible");
  }
  const bool native = c.amp == AmpMode::bf16 && env.cpu_native_bf16;
  const bool asked_for = context.overrides_amp || named_in_rows(command, spec.name);
  if (context.cpu && c.amp != AmpMode::off && !native && !asked_for) {
    return "CPU preset: this CPU has no bf16 arithmetic (AVX512-BF16, AMX), so autocast would emulate it, ~40x "
           "slower than fp32 (and LibTorch's fp16 on CPUs is ~25x slower even with AVX512-FP16); name the row "
           "in --rows to run it anyway";
  }
  return std::nullopt;
}

std::vector<const PlannedRow*> PlannedRowGroup::members() const {
  std::vector<const PlannedRow*> all{&row};
  if (compared) all.push_back(&*compared);
  if (twin) all.push_back(&*twin);
  return all;
}

PlannedRowGroup plan_row(const PlanContext& context, const SweepRowSpec& spec, const std::string& mode) {
  const std::string where = row_where(context, spec, mode);
  PlannedRowGroup group;
  PlannedRow& row = group.row;
  row.info = {spec.name, mode, spec.tutorial_seconds, spec.devices, ""};
  row.config = configure_row(context, spec, mode, where);
  row.info.preset_changes = preset_changes(context, spec, mode, where);
  const AmpMode planned_amp = row.config.amp;
  row.notes = cpu_mixed_precision(context, row.config);
  for (auto& note : controlled_batch_note(spec, row.config, mode)) row.notes.push_back(std::move(note));
  if (row.config.amp != planned_amp) {
    row.info.preset_changes.push_back("amp " + std::string(enum_name(kAmpModeNames, planned_amp)) + " → " +
                                      std::string(enum_name(kAmpModeNames, row.config.amp)));
  }
  row.skip_reason = skip_reason(context, spec, row.config);
  check_node_spread(spec, row.config, where);
  row.launch = srun_launch(context.command, context.environment, spec, row.config);
  row.world_size = planned_ranks(row.config);
  if (context.command.reference) add_reference_rows(context, spec, group);
  for (const PlannedRow* member : group.members()) {
    check_planned_row(context, spec, *member,
                      sweep_row_where(context.definition.name, member->info.name) + " (" + mode + ")");
  }
  return group;
}

void check_planned_row(const PlanContext& context, const SweepRowSpec& spec, const PlannedRow& row,
                       const std::string& where) {
  if (row.skip_reason) return;
  RunConfig c = row.config;
  c.out = row_result_file(context.command, row.info.mode, c.name, 0).string();  // as each repetition is given
  RowStart start;
  start.distributed = is_distributed(c);
  start.world_size = planned_ranks(c);
  const bool here = row.launch.empty();
  start.local_ranks = here ? start.world_size : std::max<int64_t>(1, start.world_size / spec.nodes);
  start.world_source = here ? "--nproc " + std::to_string(c.nproc)
                            : "srun's " + std::to_string(start.world_size) + " tasks";
  // srun's ranks run on the allocation's nodes: their memory and data are theirs to check.
  start.memory_bytes = here ? context.environment.memory_bytes : 0;
  start.check_data = here;
  try {
    check_row(c, start);
    if (context.environment.check_model_inputs) context.environment.check_model_inputs(c);
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
}

// With --reference each repetition of a row is followed by its PyTorch twin: the same
// configuration, PyTorch's own implementation of the strategy.
void add_reference_rows(const PlanContext& context, const SweepRowSpec& spec, PlannedRowGroup& group) {
  const PlannedRow& row = group.row;
  const auto it = context.environment.pytorch_twins.find(row.config.strategy);
  if (it == context.environment.pytorch_twins.end()) {
    throw InputError("--reference: " + row_where(context, spec, row.info.mode) + ": strategy '" + row.config.strategy +
                     "' has no PyTorch twin");
  }
  PlannedRow twin = row;
  RunConfig& t = twin.config;
  t.strategy = it->second;
  // PyTorch's row is the reference: a slowdown plays a slower ddpbench, never a slower PyTorch.
  t.inject_slowdown = 0;
  t.inject_slowdown_rank.reset();
  t.inject_slowdown_phase = SlowedPhase::optimizer;
  t.name = spec.name + kPyTorchTwinSuffix;
  twin.info = {t.name, row.info.mode, kNotMeasured, spec.devices, spec.name};
  // PyTorch's SyncBatchNorm is CUDA-only: on CPU ranks both sides run without it, ddpbench's
  // row once more beside the twin, while the table keeps the row as the tutorial ran it.
  if (t.strategy == "torch-ddp" && t.sync_bn && is_distributed(row.config) &&
      !uses_gpus(row.config, context.environment)) {
    t.sync_bn = false;
    PlannedRow compared = row;
    compared.config.sync_bn = false;
    compared.config.name = spec.name + kWithoutSyncBnSuffix;
    compared.info = {compared.config.name, row.info.mode, kNotMeasured, spec.devices, ""};
    twin.info.compared_with = compared.config.name;
    twin.info.compared_without = "SyncBatchNorm: PyTorch's runs on CUDA only";
    group.compared = std::move(compared);
  }
  if (const auto lacking = pytorch_lacks(t); lacking && !row.skip_reason) {
    twin.skip_reason = "no PyTorch twin for this row: " + *lacking;
  } else if (!spec.no_twin.empty() && !row.skip_reason) {
    twin.skip_reason = "no PyTorch twin for this row: " + spec.no_twin;
  }
  group.twin = std::move(twin);
}

void append_repetitions(const SweepCommand& command, const SweepRowSpec& spec, const PlannedRowGroup& group,
                        std::vector<PlannedRow>& rows) {
  for (int64_t rep = 0; rep < command.repeat; ++rep) {
    for (const PlannedRow* member : group.members()) {
      PlannedRow row = *member;
      row.repetition = rep;
      row.result_file = row_result_file(command, row.info.mode, row.config.name, rep);
      row.config.out = row.result_file.string();
      row.config.nodes = spec.nodes;  // the placement is part of what the row is
      rows.push_back(std::move(row));
    }
  }
}

// A row named as another's twin or run without SyncBatchNorm ("ddp-2gpu.torch") would share
// its result file and its place in every report.
void check_unique_names(const SweepInfo& info, const std::string& sweep_name) {
  for (std::size_t i = 0; i < info.rows.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const SweepRowInfo& a = info.rows[j];
      const SweepRowInfo& b = info.rows[i];
      if (a.name != b.name || a.mode != b.mode) continue;
      const SweepRowInfo& made = a.reference_of.empty() && !b.reference_of.empty() ? b : a;
      throw InputError(sweep_row_where(sweep_name, b.name) + ": that name is also " +
                       (made.reference_of.empty() ? "the run of row '" + b.name.substr(0, b.name.rfind('.')) +
                                                        "' without SyncBatchNorm, beside its PyTorch twin"
                                                  : "the PyTorch twin of row '" + made.reference_of + "'") +
                       " (--reference): rename the row");
    }
  }
}

int64_t planned_ranks(const RunConfig& config) { return is_distributed(config) ? config.nproc : 1; }

SweepPlan plan_sweep(const SweepCommand& command, const SweepEnvironment& env) {
  if (env.launcher_world && env.launcher_world->world_size > 1) {
    throw InputError("sweep: this process is one of " + std::to_string(env.launcher_world->world_size) +
                     " processes " + env.launcher_world->source + " started, each of which would run every row and "
                     "write the same reports; start the sweep once (it starts each row's ranks itself, or through "
                     "srun with --launcher srun)");
  }
  const SweepDefinition definition = command.file.empty() ? tutorial_sweep() : read_sweep_file(command.file);
  check_named_rows(command, definition);
  const PlanContext context = plan_context(command, env, definition);
  const std::vector<std::string> modes =
      command.mode == "both" ? std::vector<std::string>{"faithful", "controlled"} : std::vector<std::string>{command.mode};
  SweepPlan plan;
  plan.info = plan_info(context);
  for (const auto& mode : modes) {
    for (const auto& spec : definition.rows) {
      if (!command.rows.empty() && !named_in_rows(command, spec.name)) continue;
      const PlannedRowGroup group = plan_row(context, spec, mode);
      for (const PlannedRow* member : group.members()) plan.info.rows.push_back(member->info);
      append_repetitions(command, spec, group, plan.rows);
    }
  }
  check_unique_names(plan.info, definition.name);
  if (context.cpu) plan.info.note = cpu_preset_note(context, plan.rows);
  return plan;
}

}  // namespace ddpbench
