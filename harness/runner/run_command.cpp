#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <thread>

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include "data/dataset.hpp"
#include "harness/base/atomic_file.hpp"
#include "harness/base/clock.hpp"
#include "harness/base/output_rule.hpp"
#include "harness/base/scratch_dir.hpp"
#include "harness/control/row_check.hpp"
#include "harness/control/run_options.hpp"
#include "harness/distributed/communicator.hpp"
#include "harness/distributed/run_store.hpp"
#include "harness/launch/interruption.hpp"
#include "harness/launch/launcher.hpp"
#include "harness/control/row_outputs.hpp"
#include "harness/launch/rank_environment.hpp"
#include "harness/runner/build_info.hpp"
#include "harness/runner/commands.hpp"
#include "harness/runner/device.hpp"
#include "harness/runner/environment.hpp"
#include "harness/runner/progress_watch.hpp"
#include "harness/runner/pytorch_rank.hpp"
#include "harness/runner/runner.hpp"
#include "harness/runner/step_trace.hpp"
#include "models/checkpoint.hpp"
#include "models/registry.hpp"
#include "reports/markdown_report.hpp"
#include "reports/result_file.hpp"
#include "reports/trace_merge.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench {
namespace {


// The output rule (harness/base/output_rule.hpp), before any work: the result file, the
// checkpoint and, where `traces`, each of the `world` ranks' traces beside the result file (ranks
// ddpbench starts here share its folder; ranks of another launcher each check their own in
// StepTrace) never replace --init-from or one another, only an earlier file of their own kind;
// and each can be written.
void check_run_files(const RunConfig& config, int64_t world, bool traces) {
  std::vector<CommandOutput> outputs = row_outputs(config, world, traces, is_checkpoint_file);
  // The row's own files, each writable before any work (its traces too, where row_outputs says it
  // writes them); the synthetic cache's folder is made when the set is.
  std::vector<std::pair<std::filesystem::path, std::string>> written;
  for (const CommandOutput& output : outputs) {
    if (!output.path.empty()) written.emplace_back(output.path, output.name);
  }
  for (auto& cache : synthetic_cache_outputs(config)) outputs.push_back(std::move(cache));
  check_command_files({{"--init-from", config.init_from}}, outputs);
  require_all_writable(written);
}

// 0 ok or skipped, 1 failed, 130/143 stopped by SIGINT/SIGTERM.
int exit_code_of(const RunResult& result) {
  if (result.status == RunStatus::interrupted) {
    return interrupted_exit_code(interruption_signal() != 0 ? interruption_signal() : SIGINT);
  }
  return result.status == RunStatus::failed ? 1 : 0;
}

// Where a rank's world ran, as its launcher laid it out: SLURM's step nodes, or this host when
// every rank shares it; unknown (left empty) for ranks of another launcher across nodes.
void record_placement(RunResult& result, const RankEnvironment& env) {
  const auto nodes = static_cast<std::size_t>(env.node_count);
  if (env.nodes.size() >= nodes && nodes > 1) {
    result.nodes.assign(env.nodes.begin(), env.nodes.begin() + static_cast<std::ptrdiff_t>(nodes));
    if (env.ranks_per_node.size() == nodes) result.ranks_per_node = env.ranks_per_node;
  } else if (env.local_world_size == env.world_size) {
    result.nodes = {this_host_name()};
    result.ranks_per_node = {env.world_size};
  }
}

// The row as its world ran it: where (record_placement), and in its configuration as many
// processes as the world had over the nodes it spanned, whoever started them (srun's ranks
// were each given --nproc 1), so that a plan, --resume and compare see the placement.
void record_world(RunResult& result, const RankEnvironment& env) {
  record_placement(result, env);
  result.config["nproc"] = env.world_size;
  result.config["nodes"] = env.node_count;
}

// The JSON goes to --out and, unless this process is a rank under our own launcher (which
// reports for all ranks), the Markdown row to stdout.
int report(const RunConfig& config, const std::vector<std::string>& argv, const RunResult& result, bool print) {
  ResultDocument document;
  document.tool_version = build_info().version;
  document.created_utc = utc_timestamp();
  document.argv = argv;
  document.environment = capture_environment();
  document.runs = {result};
  document.option_defaults = run_config_to_json(RunConfig{});
  if (!config.out.empty()) write_result_file(config.out, document);
  if (print) std::cout << markdown_runs_table(document.runs) << std::flush;
  return exit_code_of(result);
}

// The row boundary: bad input propagates (exit 2); anything else thrown by `body` becomes
// a failed row.
template <class Body>
RunResult failed_row_on_error(const RunConfig& config, int64_t world_size, Body&& body) {
  try {
    return body();
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    return unfinished_result(config, RunStatus::failed, e.what(), world_size);
  }
}

RunResult run_guarded(const RunConfig& config, const DistContext& dist, Clock::time_point row_start) {
  const DatasetSplits data = load_dataset(dataset_options(config), dist.is_main());
  return failed_row_on_error(config, dist.world_size, [&] { return run_row(config, dist, data, row_start); });
}

// A rank's device: cuda:LOCAL_RANK when ranks share a machine's GPUs.
c10::Device rank_device(const std::string& spec, const RankEnvironment& env) {
  if (spec == "cpu" || (spec == "auto" && !torch::cuda::is_available())) return c10::Device(c10::kCPU);
  if (spec == "auto" || spec == "cuda") return resolve_device("cuda:" + std::to_string(env.local_rank));
  return resolve_device(spec);
}

// This process is a rank that `ddpbench run --nproc` started (the launcher sets this).
bool launched_by_ddpbench() {
  const char* launched = std::getenv("DDPBENCH_LAUNCHED");
  return launched != nullptr && std::string(launched) == "1";
}

// Where NCCL's flight recorder dumps each rank's last collectives when one times out:
// `<row folder>/<row>.nccl_trace_rank_<rank>`; empty without a row folder.
std::string flight_recorder_prefix(const RunConfig& config, const std::filesystem::path& folder) {
  return folder.empty() ? "" : (folder / (config.row_name() + ".nccl_trace_rank_")).string();
}

int run_rank(const RunConfig& config, const RankEnvironment& env, const std::vector<std::string>& argv,
             Clock::time_point row_start) {
  if (config.nodes > 1 && env.node_count != config.nodes) {
    throw InputError("--nodes " + std::to_string(config.nodes) + ": this rank's launcher (" + env.source + ") placed " +
                     std::to_string(env.world_size) + (env.world_size == 1 ? " rank" : " ranks") + " on " +
                     std::to_string(env.node_count) + (env.node_count == 1 ? " node" : " nodes"));
  }
  DistContext dist;
  dist.rank = env.rank;
  dist.world_size = env.world_size;
  dist.local_rank = env.local_rank;
  dist.local_world_size = env.local_world_size;
  dist.device = rank_device(config.device, env);
  // CPU ranks on one machine share its cores. Set here, not in the config, so the result
  // records the configuration as given (--resume and compare match on it).
  int64_t threads = 0;
  if (dist.device.is_cpu() && config.threads == 0) {
    threads = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) / env.local_world_size);
    at::set_num_threads(static_cast<int>(threads));
  }
  if (env.rank == 0 && env.world_size > 1 && env.source != "self" && !launched_by_ddpbench()) {
    // Where the ranks meet, and who said so: the first thing to check when one never joins (not
    // under ddpbench's own launcher, which serves the store here and says what went wrong).
    std::cerr << "ddpbench: rank 0 of " << env.world_size << " (" << env.source << ", " << env.node_count
              << (env.node_count == 1 ? " node" : " nodes") << ") on " << this_host_name() << ": the ranks meet at "
              << describe_master(env) << "\n";
  }
  RunResult result = failed_row_on_error(config, env.world_size, [&] {
    // PyTorch's own rows form their process group in Python.
    if (find_strategy(config.strategy).pytorch) return run_pytorch_rank(config, env, dist.device, threads, row_start);
    dist.comm = std::make_shared<Communicator>(CommunicatorOptions{
        env, config.backend, dist.device, std::chrono::seconds(config.timeout_s),
        flight_recorder_prefix(config, row_folder(config))});
    return run_guarded(config, dist, row_start);
  });
  record_world(result, env);
  // PyTorch's rows compute in their Python child, which records its own threads.
  if (!find_strategy(config.strategy).pytorch) result.threads_per_rank = at::get_num_threads();
  // Only rank 0 reports: the others say why they failed, so the launcher can relay it.
  if (env.rank != 0 && result.status == RunStatus::failed) {
    std::cerr << "ddpbench: rank " << env.rank << ": " << result.reason << "\n";
  }
  const int code = env.rank != 0 ? exit_code_of(result) : report(config, argv, result, !launched_by_ddpbench());
  if (result.status == RunStatus::failed) {
    // A failed collective can leave threads behind (one still inside ncclCommInitRank, NCCL's
    // watchdog, a store client): the process leaves without static destructors, which could
    // wait on them or crash into them. Everything the row had to say is written by now.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}

// Why a launched row failed. A rank killed by a signal is the cause, unless it died waiting
// inside a collective that the ranks' progress records blame another for: NCCL's watchdog
// aborts (SIGABRT) the healthy ranks of a collective that a stuck rank never entered, after
// the timeout, and those are victims. A rank that dies just after entering a collective is
// ahead of the others, not their victim (died_waiting_for_another), and the records' sentence
// follows only where it blames that rank (sentence_for_killed). Else the words of the
// rank that saw the failure: rank 0's failed result ("allreduce of bucket 2 failed on rank
// 0: rank 1 is behind, alive: ..."), else the failing rank's own "ddpbench: rank N: " line;
// else the progress records as the launcher read them; else how the process ended.
std::string failure_reason(const ProcessExit& failure, int64_t failed_rank, const std::filesystem::path& rank0_result,
                           const std::optional<ProgressVerdict>& progress, double timeout_s) {
  const bool blames = progress && !progress->blamed.empty();
  const std::string records = blames ? "the ranks' progress records: " + progress->text : "";
  if (failure.signal != 0) {
    if (blames && died_waiting_for_another(*progress, failed_rank, timeout_s)) {
      return records + " (then " + failure.describe() + ")";
    }
    const std::string as_it_died = progress ? sentence_for_killed(*progress, failed_rank) : "";
    return failure.describe() + (as_it_died.empty() ? "" : "; the progress records as it died: " + as_it_died) +
           "; its stderr ended:\n" + failure.tail(10);
  }
  try {
    const RunResult rank0 = read_result_file(rank0_result).runs.at(0);
    if (rank0.status == RunStatus::failed && !rank0.reason.empty()) return "rank 0: " + rank0.reason;
  } catch (const std::exception&) {
  }
  // "ddpbench: rank 1: why", or a rank's bad input ("ddpbench: error: why"); never rank 0's
  // "ddpbench: rank 0 of 2 (...): the ranks meet at ..." that every launch prints.
  constexpr std::string_view kPrefix = "ddpbench: ";
  const auto says_why = [&](const std::string& line) -> std::optional<std::string> {
    const auto at = line.find(std::string(kPrefix) + "rank ");
    if (at != std::string::npos) {
      std::size_t digits = at + kPrefix.size() + 5;
      const std::size_t first = digits;
      while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits])) != 0) ++digits;
      if (digits > first && line.compare(digits, 2, ": ") == 0) return line.substr(at + kPrefix.size());
    }
    const auto error = line.find(std::string(kPrefix) + "error: ");
    if (error != std::string::npos) {
      return "rank " + std::to_string(failed_rank) + ": " + line.substr(error + kPrefix.size() + 7);
    }
    return std::nullopt;
  };
  for (auto line = failure.stderr_tail.rbegin(); line != failure.stderr_tail.rend(); ++line) {
    if (const auto why = says_why(*line)) return *why;
  }
  if (blames) return records + " (then " + failure.describe() + ")";
  return failure.describe() + "; its stderr ended:\n" + failure.tail(10);
}

// The flight recorder's dumps, where NCCL wrote any.
std::string flight_recorder_dumps(const std::string& prefix) {
  if (prefix.empty()) return "";
  const std::filesystem::path path(prefix);
  std::string found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path(), ec)) {
    if (entry.path().filename().string().rfind(path.filename().string(), 0) == 0) {
      found += (found.empty() ? "" : ", ") + entry.path().string();
    }
  }
  return found.empty() ? "" : "; NCCL's flight recorder dumped " + found;
}

// The devices --nproc ranks would run on, checked before any is started: a skipped row's reason
// where too few CUDA devices are visible, nullopt where the ranks can start. Throws InputError
// where they cannot share the one GPU named.
std::optional<std::string> missing_devices(const RunConfig& config) {
  // --device cuda:N puts every rank on that one GPU: Gloo carries CUDA tensors between ranks
  // that share it (the multi-rank paths, tested on a machine with one GPU); NCCL refuses two
  // ranks on one GPU ("Duplicate GPU detected").
  const bool shared_gpu = config.device.starts_with("cuda:");
  if (shared_gpu) {
    resolve_device(config.device);
    if (config.backend != CommBackend::gloo) {
      throw InputError("--device " + config.device + " with --nproc " + std::to_string(config.nproc) +
                       ": every rank would share that GPU, which NCCL refuses; --backend gloo shares it, --device "
                       "cuda gives each rank its own");
    }
  }
  const bool cuda_ranks = config.device.starts_with("cuda") || (config.device == "auto" && torch::cuda::is_available());
  if (cuda_ranks && !shared_gpu) {
    const auto visible = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
    if (visible < config.nproc) {
      return "needs " + std::to_string(config.nproc) + " CUDA devices, " + std::to_string(visible) +
             " visible (--device cpu runs Gloo ranks)";
    }
  }
  return std::nullopt;
}

// Where the ranks meet: MASTER_ADDR and MASTER_PORT when set, as under torchrun, else a
// free port here. Read before anything is created, so bad input leaves nothing behind.
LaunchOptions meeting_point_from_environment() {
  LaunchOptions options;
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') options.master_addr = addr;
  if (const char* port = std::getenv("MASTER_PORT"); port != nullptr) options.master_port = master_port_variable(port);
  return options;
}

RunResult failed_launch(const RunConfig& config, const std::string& reason) {
  return unfinished_result(config, RunStatus::failed, reason, config.nproc);
}

// The row as the supervised ranks left it: rank 0's result (from `rank0_result`, its scratch
// file), the steps an interrupted row kept, or why the ranks failed.
RunResult collect_result(const RunConfig& config, const LaunchOutcome& outcome,
                         const std::filesystem::path& rank0_result, const ProgressWatch& watch) {
  if (outcome.interrupted) {
    // Rank 0 kept its finished steps, if it got to write them.
    try {
      RunResult kept = read_result_file(rank0_result).runs.at(0);
      kept.config["out"] = config.out;
      if (kept.status == RunStatus::interrupted) return kept;
    } catch (const std::exception&) {
    }
    return unfinished_result(config, RunStatus::interrupted,
                             "interrupted: the launcher was signalled and stopped every rank", config.nproc);
  }
  if (outcome.failure) {
    // A rank's bad input is the row's: exit 2, one line, no result file, as with --nproc 1.
    if (const auto bad = outcome.failure->bad_input()) {
      throw InputError("rank " + std::to_string(outcome.failed_rank) + ": " + *bad);
    }
    return failed_launch(config, failure_reason(*outcome.failure, outcome.failed_rank, rank0_result, watch.verdict(),
                                                static_cast<double>(config.timeout_s)) +
                                     flight_recorder_dumps(flight_recorder_prefix(config, row_folder(config))));
  }
  try {
    RunResult ranks_result = read_result_file(rank0_result).runs.at(0);
    ranks_result.config["out"] = config.out;  // the ranks wrote to a scratch file
    return ranks_result;
  } catch (const std::exception& e) {
    return failed_launch(config, std::string("rank 0 left no result: ") + e.what());
  }
}

// Starts the ranks `options` describes and supervises them to their end, watching their
// progress records, then collects the row they ran.
RunResult supervise_ranks(const RunConfig& config, LaunchOptions& options, const std::filesystem::path& rank0_result) {
  // The run's store is served here, as torchrun's agent serves it, so that the ranks'
  // progress records outlive every rank.
  std::optional<LauncherStore> store;
  try {
    store.emplace(options.master_addr, options.master_port, config.nproc);
  } catch (const std::exception& e) {
    return failed_launch(config, std::string("cannot serve the run's store: ") + e.what());
  }
  options.master_port = store->port();
  const auto store_variables = store->rank_variables();
  options.env.insert(options.env.end(), store_variables.begin(), store_variables.end());
  ProgressWatch watch(*store);
  options.supervise.on_poll = [&] { watch.poll(); };
  // A rank's bad input is said once, by this launcher, when the row ends (exit 2, no result file).
  options.supervise.withhold = [](std::string_view line) {
    return line.find(kBadInputPrefix) != std::string_view::npos;
  };
  options.supervise.on_first_failure = [&] { watch.judge_now(); };
  LaunchOutcome outcome;
  try {
    outcome = launch_ranks(options);
  } catch (const std::exception& e) {
    return failed_launch(config, std::string("cannot start the ranks: ") + e.what());
  }
  return collect_result(config, outcome, rank0_result, watch);
}

// `ddpbench run --nproc N`: N ranks of this program, each with the row's arguments and rank 0
// writing its result to a scratch file, which the row reported here is read from.
int launch(const RunConfig& config, const std::vector<std::string>& argv) {
  if (const auto missing = missing_devices(config)) {
    return report(config, argv, unfinished_result(config, RunStatus::skipped, *missing, config.nproc), true);
  }
  LaunchOptions options = meeting_point_from_environment();
  const ScratchDir scratch("ddpbench-ranks");
  const std::filesystem::path rank0_result = scratch / "result.json";

  options.program = current_executable();
  options.args.assign(argv.begin() + 1, argv.end());
  options.args.insert(options.args.end(), {"--out", rank0_result.string()});
  options.nproc = config.nproc;
  if (const auto file = row_file(config); !file.empty()) options.env.push_back("DDPBENCH_ROW_FILE=" + file.string());
  return report(config, argv, supervise_ranks(config, options, rank0_result), true);
}

// Launch contexts are explicit: an explicit --nproc (`starts_ranks`) inside a torchrun world
// is a contradiction, and a strategy of one process runs on one node.
void check_launch_context(const RunConfig& config, const StrategyInfo& strategy, bool starts_ranks) {
  if (starts_ranks) {
    for (const char* name : {"RANK", "WORLD_SIZE"}) {
      if (const char* value = std::getenv(name); value != nullptr) {
        throw InputError("--nproc " + std::to_string(config.nproc) + ": this process is already a rank of a torchrun "
                         "world (" + name + "=" + value + "); let torchrun start the ranks, or unset " + name);
      }
    }
    // Each of a launcher's processes would start a world of its own, all writing the same --out.
    if (const auto world = launcher_world_from_process(); world && world->world_size > 1) {
      throw InputError("--nproc " + std::to_string(config.nproc) + ": this process is already one of " +
                       std::to_string(world->world_size) + " processes " + world->source +
                       " started, each of which would start a world of its own; leave --nproc out (the launcher's "
                       "processes are the ranks), or start this command once");
    }
  }
  if (!strategy.distributed && config.nodes > 1) {
    throw InputError("--nodes " + std::to_string(config.nodes) + ": --strategy " + config.strategy +
                     " runs as one process, on one node");
  }
}

// A row the strategy's preflight refuses is reported as skipped, by rank 0 only (the other ranks
// of a world say nothing): the exit code, or nullopt where the row can run.
std::optional<int> preflight_skip(const RunConfig& config, const StrategyInfo& strategy,
                                  const std::optional<RankEnvironment>& env, const std::vector<std::string>& argv) {
  if (!strategy.preflight) return std::nullopt;
  const auto reason = strategy.preflight(strategy_options(config));
  if (!reason) return std::nullopt;
  if (env && env->rank != 0) return 0;  // rank 0 reports the skipped row
  const int64_t world = env ? env->world_size : (strategy.distributed ? config.nproc : 1);
  RunResult skipped = unfinished_result(config, RunStatus::skipped, *reason, world);
  if (env) record_world(skipped, *env);
  return report(config, argv, skipped, true);
}

// A strategy of one process (single, dp, PyTorch's): the row runs here, on its primary device.
int run_in_this_process(const RunConfig& config, const StrategyInfo& strategy, const std::vector<std::string>& argv,
                        Clock::time_point row_start) {
  const c10::Device device =
      strategy.primary_device ? strategy.primary_device(strategy_options(config)) : resolve_device(config.device);
  const RankEnvironment one_process = local_rank_environment(0, 1, free_port());
  RunResult result;
  if (strategy.pytorch) {
    result = failed_row_on_error(config, 1, [&] { return run_pytorch_rank(config, one_process, device, 0, row_start); });
  } else {
    DistContext dist;
    dist.device = device;
    result = run_guarded(config, dist, row_start);
  }
  record_placement(result, one_process);
  if (!strategy.pytorch) result.threads_per_rank = at::get_num_threads();
  return report(config, argv, result, true);
}

// How this process starts the row, for the one check: the ranks it starts (--nproc), or the world a
// launcher made it a rank of (any strategy's: a one-process strategy in a world of 2 is refused).
RowStart row_start_of(const RunConfig& config, const StrategyInfo& strategy, bool starts_ranks,
                      const std::optional<RankEnvironment>& env) {
  RowStart start;
  start.distributed = strategy.distributed;
  start.memory_bytes = machine_memory_bytes();
  if (starts_ranks) {
    start.world_size = start.local_ranks = config.nproc;
    start.world_source = "--nproc " + std::to_string(config.nproc);
  } else if (env) {
    start.world_size = env->world_size;
    start.local_ranks = env->local_world_size;
    start.world_source = env->source + ", WORLD_SIZE " + std::to_string(env->world_size);
  }
  return start;
}

}  // namespace

void check_model_inputs(const RunConfig& config) {
  const ModelInfo& model = find_model(config.model);
  if (config.init_from.empty() || !std::filesystem::is_regular_file(config.init_from)) return;  // check_row's to name
  torch::nn::AnyModule weights = model.make(config.num_classes);
  load_checkpoint(*weights.ptr(), config.init_from);
}

int run_command(const RunCommand& command, const std::vector<std::string>& argv) {
  const auto row_start = Clock::now();
  catch_interruptions();
  const RunConfig& config = command.config;
  const StrategyInfo& strategy = find_strategy(config.strategy);
  check_model_inputs(config);
  if (strategy.pytorch) check_pytorch_inputs(config);

  // Launch contexts are explicit: an explicit --nproc starts ranks here, whatever SLURM or
  // MPI variables say; inside a torchrun world it is a contradiction. Without --nproc, a
  // process that a launcher started is a rank.
  const bool own_rank = launched_by_ddpbench();
  const bool starts_ranks = strategy.distributed && config.nproc > 1 && !own_rank;
  check_launch_context(config, strategy, starts_ranks);
  auto launched = starts_ranks            ? std::nullopt
                  : strategy.distributed ? rank_environment_from_process()
                                         : launcher_world_from_process();
  // Its launcher sets torchrun's variables; the world is still ddpbench's.
  if (launched && own_rank) launched->source = "ddpbench --nproc";
  check_row(config, row_start_of(config, strategy, starts_ranks, launched));
  const auto env = strategy.distributed ? launched : std::nullopt;
  const int64_t world = env ? env->world_size : (starts_ranks ? config.nproc : 1);
  // The ranks' traces: checked by the process that starts the ranks, and by each rank another
  // launcher started (torchrun, srun, mpirun: no one else checks them; a rank 0 of torchrun's wrote
  // its trace over --init-from). Every rank checks them before its world meets: none is written yet.
  check_run_files(config, world, /*traces=*/!env || !own_rank);
  if (const auto skipped = preflight_skip(config, strategy, env, argv)) return *skipped;
  if (strategy.distributed) {
    if (starts_ranks) return launch(config, argv);
    if (env) return run_rank(config, *env, argv, row_start);
    // One rank, in this process: a world of one over a local store.
    return run_rank(config, local_rank_environment(0, 1, free_port()), argv, row_start);
  }
  return run_in_this_process(config, strategy, argv, row_start);
}

int list_command() {
  std::cout << "strategies:\n";
  for (const auto& s : strategy_registry()) {
    std::cout << "  " << s.name << std::string(s.name.size() < 12 ? 12 - s.name.size() : 1, ' ') << s.description
              << (s.distributed ? " [ranks]" : "") << "\n";
  }
  std::cout << "models:\n";
  for (const auto& m : model_registry()) {
    std::cout << "  " << m.name << std::string(m.name.size() < 12 ? 12 - m.name.size() : 1, ' ') << m.description
              << "\n";
  }
  return 0;
}

}  // namespace ddpbench
