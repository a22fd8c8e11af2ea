#include "harness/runner/pytorch_rank.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/utils.h>
#include <torch/version.h>

#include "data/dataset.hpp"
#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/scratch_dir.hpp"
#include "harness/control/run_options.hpp"
#include "harness/distributed/run_store.hpp"
#include "harness/launch/process_supervisor.hpp"
#include "harness/runner/runner.hpp"
#include "models/checkpoint.hpp"
#include "models/registry.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

std::string configured_python() {
  if (const char* python = std::getenv("DDPBENCH_PYTHON"); python != nullptr && *python != '\0') return python;
  return DDPBENCH_REFERENCE_PYTHON[0] != '\0' ? DDPBENCH_REFERENCE_PYTHON : "python3";
}

// ProcessSpec takes an absolute path (no PATH search at exec time): resolve it here once.
std::string python_executable() {
  const std::string python = configured_python();
  const std::string found = find_executable(python);
  return found.empty() ? python : found;
}

std::string reference_script() {
  if (const char* dir = std::getenv("DDPBENCH_REFERENCE_DIR"); dir != nullptr && *dir != '\0') {
    return (std::filesystem::path(dir) / "reference_rank.py").string();
  }
  return DDPBENCH_REFERENCE_SCRIPT;
}

std::string last_line(const std::vector<std::string>& lines) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->find_first_not_of(" \t") != std::string::npos) return *it;
  }
  return "";
}

// What a Python traceback ends with: the exception's line ("RuntimeError: ..."), the first
// unindented line after the last frame, and the message's last line when it runs on.
std::string traceback_summary(const std::vector<std::string>& lines) {
  std::size_t start = lines.size();
  for (std::size_t i = lines.size(); i-- > 0;) {
    if (lines[i].rfind("Traceback (most recent call last):", 0) == 0) {
      start = i + 1;
      break;
    }
  }
  for (std::size_t i = start; i < lines.size(); ++i) {
    if (lines[i].empty() || lines[i].front() == ' ' || lines[i].front() == '\t') continue;
    const std::string last = last_line(lines);
    return lines[i] == last ? last : lines[i] + " ... " + last;
  }
  return last_line(lines);
}

json paths(const std::vector<std::filesystem::path>& files) {
  json out = json::array();
  for (const auto& f : files) out.push_back(f.string());
  return out;
}

RowMeasurements measurements_from(const json& records, const c10::Device& device, const DatasetFiles& data) {
  RowMeasurements m;
  for (const auto& s : records.at("steps")) {
    StepRecord r;
    r.epoch = s.at("epoch").get<int64_t>();
    r.step = s.at("step").get<int64_t>();
    r.images = s.at("images").get<int64_t>();
    r.time_s = s.at("time_s").get<double>();
    r.loss = s.at("loss").get<double>();
    const json& p = s.at("phases");
    auto phase = [&](const char* key) { return p.at(key).is_null() ? kNotMeasured : p.at(key).get<double>(); };
    r.phases = PhaseSeconds{phase("data_s"),      phase("forward_s"),   phase("backward_s"), phase("comm_s"),
                            phase("optimizer_s"), phase("allreduce_s"), kNotMeasured, 0.0};
    m.steps.push_back(r);
  }
  m.train_time_s = records.at("train_time_s").get<double>();
  m.steps_per_epoch = records.at("steps_per_epoch").get<int64_t>();
  m.full_steps_per_epoch = records.at("full_steps_per_epoch").get<int64_t>();
  m.local_images = records.at("images").get<int64_t>();
  m.eval_correct = records.at("correct").get<int64_t>();
  m.eval_seen = records.at("seen").get<int64_t>();
  m.eval_cut = records.at("eval_cut").get<bool>();
  m.peak_memory_bytes = records.at("peak_memory_bytes").get<int64_t>();
  m.peak_memory_source = records.at("peak_memory_source").get<std::string>();
  m.device = device.str();
  m.dataset = data.kind;
  m.dataset_origin = data.origin;
  m.train_images = records.value("train_images", int64_t{0});
  const json& ranks = records.at("ranks");
  if (ranks.size() > 1) {
    for (const auto& r : ranks) {
      // PyTorch waits for the other ranks inside its own backward, out of sight: where its
      // ranks' steps went is not measured.
      m.ranks.push_back(RankSteps{r.at("train_time_s").get<double>(), r.at("steady_step_times").get<std::vector<double>>(),
                                  r.at("peak_memory_bytes").get<int64_t>(), StepShares{}});
    }
  }
  return m;
}

}  // namespace

std::string pytorch_failure_reason(const RankEnvironment& env, const std::string& own_error) {
  if (env.world_size < 2) return own_error;
  const std::string rank = "rank " + std::to_string(env.rank);
  const auto verdict = judge_run_progress(env, kPyTorchSilenceWindow);
  const bool blames_another = verdict && std::any_of(verdict->blamed.begin(), verdict->blamed.end(),
                                                     [&](int64_t blamed) { return blamed != env.rank; });
  if (blames_another) return "failed on " + rank + ": " + verdict->text + "; " + rank + "'s own error: " + own_error;
  return rank + "'s own error, no other rank blamed (" +
         (verdict
              ? "the ranks' progress records blame none"
              : "no progress records to read: PyTorch's ranks keep them only where a launcher serves the run's store") +
         "): " + own_error;
}

void check_pytorch_inputs(const RunConfig& config) {
  if (const auto lacking = pytorch_lacks(config)) {
    throw InputError(*lacking);
  }
  const std::string python = python_executable();
  const bool resnet = config.model != "tiny";
  // The sweep's preloaded Python imported them already (or found torchvision missing: then ask).
  if (const auto modules = preloaded_modules(python);
      modules && modules->find(resnet ? "torchvision" : "torch") != std::string::npos) {
    return;
  }
  ProcessSpec probe;
  probe.label = "python";
  probe.program = python;
  probe.args = {"-c", resnet ? "import torch, torchvision" : "import torch"};
  probe.env = environment_with({});
  probe.discard_stdout = true;
  SuperviseOptions quiet;
  quiet.relay = false;
  SupervisedRun run;
  try {
    run = run_supervised({probe}, quiet);
  } catch (const std::exception& e) {
    throw InputError("--strategy " + config.strategy + ": cannot run Python '" + python +
                     "' (set DDPBENCH_PYTHON to a Python with torch " + TORCH_VERSION + "): " + e.what());
  }
  if (run.exits.front().failed()) {
    const std::string what = resnet ? "torch and torchvision" : "torch";
    throw InputError("--strategy " + config.strategy + " needs " + what + " in " + python + " (" +
                     last_line(run.exits.front().stderr_tail) + "); install them with: " + python +
                     " -m pip install torch==" + TORCH_VERSION + " torchvision==" + DDPBENCH_TORCHVISION_VERSION);
  }
}

std::unique_ptr<PreloadedPython> preload_pytorch() {
  return std::make_unique<PreloadedPython>(python_executable(), reference_script());
}

RunResult run_pytorch_rank(const RunConfig& config, const RankEnvironment& env, const c10::Device& device,
                           int64_t intra_op_threads, Clock::time_point row_start) {
  const ScratchDir scratch("ddpbench-pytorch");
  DatasetOptions data_options = dataset_options(config);
  // Without a cache folder the synthetic set's files go to this rank's scratch folder.
  if (data_options.cache_dir.empty()) data_options.cache_dir = scratch.path().string();
  const DatasetFiles data = dataset_files(data_options, env.rank == 0);

  // ddpbench's initial weights, exactly as its own row would start.
  std::filesystem::path weights = config.init_from;
  if (weights.empty()) {
    torch::manual_seed(config.seed);
    weights = scratch.path() / "initial_weights.pt";
    save_checkpoint(*build_model(ModelOptions{config.model, config.num_classes, "", false}, c10::kCPU).ptr(), weights);
  }

  json row = run_config_to_json(config);
  if (intra_op_threads > 0 && config.threads == 0) row["threads"] = intra_op_threads;
  const auto records_file = scratch.path() / "records.json";
  json spec = {{"strategy", config.strategy},   {"config", row},
               {"device", device.str()},        {"train_files", paths(data.train)},
               {"test_files", paths(data.test)}, {"initial_weights", weights.string()},
               {"records", records_file.string()}, {"row_name", config.row_name()}};
  // Where a launcher serves the store, the rank keeps its progress record there, as
  // ddpbench's own ranks do: a rank that hangs is then named by it (pytorch_failure_reason).
  if (env.store_served_by_launcher && env.world_size > 1) {
    spec["progress"] = {{"address", env.master_addr},
                        {"port", env.master_port},
                        {"prefix", run_store_prefix(env.restart_count, env.run_id)},
                        {"key", progress_key(env.rank)}};
  }
  const auto spec_file = scratch.path() / "spec.json";
  write_file_atomically(spec_file, spec.dump(2));

  ProcessSpec child;
  child.label = "rank " + std::to_string(env.rank) + " (pytorch)";
  child.program = python_executable();
  child.args = {reference_script(), spec_file.string()};
  if (const std::string server = preloaded_python_socket(child.program); !server.empty()) {
    const auto client = std::filesystem::path(reference_script()).parent_path() / "rank_client.py";
    child.args = {"-S", client.string(), server, reference_script(), spec_file.string()};
  }
  const double spawned_at_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // DDPBENCH_PYTORCH_FORKED: set by the preloaded Python in the ranks it forks, and by nobody else.
  child.env = environment_with({"DDPBENCH_RANK_SPAWNED_AT=" + std::to_string(spawned_at_s),
                                "DDPBENCH_PYTORCH_FORKED=", "RANK=" + std::to_string(env.rank), "WORLD_SIZE=" + std::to_string(env.world_size),
                                "LOCAL_RANK=" + std::to_string(env.local_rank),
                                "LOCAL_WORLD_SIZE=" + std::to_string(env.local_world_size),
                                "MASTER_ADDR=" + env.master_addr, "MASTER_PORT=" + std::to_string(env.master_port),
                                "PYTHONUNBUFFERED=1"});
  SuperviseOptions supervise;
  supervise.prefix_relayed_lines = false;  // a launcher above prefixes this rank's lines
  supervise.stderr_tail_lines = 80;
  const SupervisedRun run = run_supervised({child}, supervise);
  const ProcessExit& exit = run.exits.front();
  if (run.interrupted && !std::filesystem::exists(records_file)) {
    return unfinished_result(config, RunStatus::interrupted, "interrupted: the PyTorch rank was stopped",
                             env.world_size);
  }
  if (exit.failed() && !run.interrupted) {
    const std::string line = traceback_summary(exit.stderr_tail);
    return unfinished_result(config, RunStatus::failed,
                             pytorch_failure_reason(env, exit.describe() + (line.empty() ? "" : ": " + line)),
                             env.world_size);
  }
  json records;
  try {
    records = json::parse(std::ifstream(records_file));
  } catch (const std::exception& e) {
    return unfinished_result(config, RunStatus::failed,
                             "the PyTorch rank left no readable records: " + std::string(e.what()), env.world_size);
  }
  RowMeasurements measurements = measurements_from(records, device, data);
  if (env.rank == 0) measurements.train_flops_per_image = model_train_flops(config);
  RunResult result = assemble_result(config, env.world_size, std::move(measurements));
  result.threads_per_rank = records.value("intra_op_threads", int64_t{0});
  result.strategy_details = records.at("details");
  if (records.contains("lockstep_wait_s")) result.lockstep_wait_s = records.at("lockstep_wait_s").get<double>();
  if (records.value("interrupted", false)) {
    result.status = RunStatus::interrupted;
    result.reason = "interrupted by " + records.value("interrupted_by", std::string("a signal")) +
                    "; the finished steps are kept";
  }
  result.total_time_s = seconds_since(row_start);
  return result;
}

}  // namespace ddpbench
