#include "harness/control/run_options.hpp"

#include <charconv>
#include <limits>
#include <sstream>
#include <set>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "harness/base/closest_name.hpp"
#include "reports/markdown_report.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

std::string flag(std::string_view key) { return "--" + std::string(key); }

template <class Int>
Int parse_integer(std::string_view text, std::string_view key) {
  Int value{};
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) {
    throw InputError(flag(key) + ": '" + std::string(text) + "' is out of range");
  }
  if (ec != std::errc() || ptr != end || text.empty()) {
    throw InputError(flag(key) + ": '" + std::string(text) + "' is not an integer");
  }
  return value;
}

double parse_number(std::string_view text, std::string_view key) {
  double value = 0.0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) {
    throw InputError(flag(key) + ": '" + std::string(text) + "' is not a number");
  }
  return value;
}

bool parse_bool(std::string_view text, std::string_view key) {
  if (text == "true" || text == "on" || text == "1") return true;
  if (text == "false" || text == "off" || text == "0") return false;
  throw InputError(flag(key) + ": '" + std::string(text) + "' is not on|off");
}

// One builder per field type keeps the table below to one line of meaning per option.
template <class T>
RunOption option(std::string key, T RunConfig::*member, std::string value_name,
                 std::string help) {
  RunOption opt{std::move(key), std::move(help), std::move(value_name), false, {}, {}, {}, {}};
  const std::string k = opt.key;
  if constexpr (std::is_same_v<T, std::string>) {
    opt.set = [member](RunConfig& c, std::string_view text) { c.*member = std::string(text); };
    opt.get = [member](const RunConfig& c) { return json(c.*member); };
  } else if constexpr (std::is_same_v<T, double>) {
    opt.set = [member, k](RunConfig& c, std::string_view text) { c.*member = parse_number(text, k); };
    opt.get = [member](const RunConfig& c) { return json(c.*member); };
  } else if constexpr (std::is_same_v<T, bool>) {
    opt.set = [member, k](RunConfig& c, std::string_view text) { c.*member = parse_bool(text, k); };
    opt.get = [member](const RunConfig& c) { return json(c.*member); };
  } else if constexpr (std::is_integral_v<T>) {
    opt.set = [member, k](RunConfig& c, std::string_view text) {
      c.*member = parse_integer<T>(text, k);
    };
    opt.get = [member](const RunConfig& c) { return json(c.*member); };
  } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
    opt.set = [member, k](RunConfig& c, std::string_view text) {
      if (text == "none") {
        c.*member = std::nullopt;
      } else {
        c.*member = parse_integer<int64_t>(text, k);
      }
    };
    opt.get = [member](const RunConfig& c) { return (c.*member) ? json(*(c.*member)) : json(nullptr); };
  } else {
    static_assert(sizeof(T) == 0, "no option builder for this field type");
  }
  return opt;
}

template <class Enum, std::size_t N>
RunOption enum_option(std::string key, Enum RunConfig::*member, const EnumName<Enum> (&table)[N],
                      std::string help) {
  std::span<const EnumName<Enum>> names(table);
  RunOption opt{std::move(key), std::move(help), enum_choices(names), false, {}, {}, {}, {}};
  const std::string k = opt.key;
  opt.set = [member, names, k](RunConfig& c, std::string_view text) {
    c.*member = enum_from_name(names, text, flag(k));
  };
  opt.get = [member, names](const RunConfig& c) { return json(std::string(enum_name(names, c.*member))); };
  return opt;
}

// The option's line in the reference (docs/options.md); `shown_default` where the default's
// value alone would not say what it means ("the strategy" for an empty name).
RunOption documented(RunOption opt, std::string doc, std::string shown_default = "") {
  opt.doc = std::move(doc);
  opt.shown_default = std::move(shown_default);
  return opt;
}

// A CLI flag pair, `--key` and `--no-key`; true or false in JSON.
RunOption switch_option(std::string key, bool RunConfig::*member, std::string help) {
  RunOption opt = option(std::move(key), member, "", std::move(help));
  opt.is_switch = true;
  return opt;
}

// The row and its data: what trains on which images.
void add_row_and_data_options(std::vector<RunOption>& o) {
  o.push_back(documented(option("name", &RunConfig::name, "NAME", "row name in reports (default: the strategy)"),
                         "row name in reports", "the strategy"));
  o.push_back(documented(option("strategy", &RunConfig::strategy, "NAME", "training strategy (`ddpbench list`)"),
                         "how a step is spread over devices (`ddpbench list`)"));
  o.push_back(documented(option("model", &RunConfig::model, "NAME", "model (`ddpbench list`)"),
                         "`resnet50`, `resnet18` (torchvision's, names and init) or `tiny` (tests)"));
  o.push_back(documented(option("num-classes", &RunConfig::num_classes, "N",
                                "classifier head size; 1000 as the tutorial's torchvision default"),
                         "head size: the tutorial kept torchvision's 1000-class head (25,557,032 parameters; "
                         "23,528,522 with 10)"));
  o.push_back(documented(enum_option("dataset", &RunConfig::dataset, kDatasetKindNames,
                                     "CIFAR-10 binary files, the synthetic stand-in, or CIFAR-10 where found"),
                         "CIFAR-10 where found under `--data-dir`, else the synthetic stand-in, with a warning"));
  o.push_back(documented(option("data-dir", &RunConfig::data_dir, "DIR",
                                "folder holding cifar-10-batches-bin/ (scripts/fetch-cifar10 fills it)"),
                         "folder holding `cifar-10-batches-bin/`"));
  o.push_back(documented(option("synthetic-train-images", &RunConfig::synthetic_train_images, "N",
                                "train-set size of the synthetic dataset"),
                         "size of the synthetic train split"));
  o.push_back(documented(
      option("synthetic-test-images", &RunConfig::synthetic_test_images, "N", "test-set size of the synthetic dataset"),
      "size of the synthetic test split"));
  o.push_back(
      documented(option("cache-dir", &RunConfig::cache_dir, "auto|none|DIR",
                        "where the synthetic set is kept as CIFAR-format files, read by every row and by PyTorch's "
                        "(auto: ~/.cache/ddpbench; none: generated in memory)"),
                 "where the synthetic set is kept as files of CIFAR-10's binary records, read by every row "
                 "and by PyTorch's (`auto`: `~/.cache/ddpbench/synthetic/`, keyed by generator version, seed "
                 "and sizes; `none`: generated in memory). Each file is proven by its size and the CRC-32 the "
                 "cache wrote beside it (`crc32.txt`): one truncated, damaged or without a checksum is "
                 "regenerated, never trained on, and the row says so on stderr"));
  o.push_back(documented(enum_option("loader", &RunConfig::loader, kLoaderKindNames,
                                     "host: worker threads + pinned memory; device: dataset resident on the device"),
                         "`host`: worker threads build batches in pinned memory, like a DataLoader; `device`: the "
                         "uint8 dataset lives on the device, batches are gathered and augmented there"));
  o.push_back(documented(
      option("workers", &RunConfig::workers, "N", "host loader worker threads (0: load on the training thread)"),
      "host loader threads (`0`: load on the training thread)"));
  o.push_back(documented(option("crop-padding", &RunConfig::crop_padding, "N", "RandomCrop(32, padding=N)"),
                         "`RandomCrop(32, padding=N)`; the tutorial used none, so its crop is a no-op"));
  o.push_back(
      documented(enum_option("test-transform", &RunConfig::test_transform, kTestTransformNames,
                             "train: the tutorial's random transforms on the test set too; plain: normalise only"),
                 "`train` keeps the tutorial's quirk of random flips on the test set"));
}

// The schedule: epochs, batches, the optimizer's settings, where and how long it runs.
void add_schedule_options(std::vector<RunOption>& o) {
  o.push_back(documented(option("epochs", &RunConfig::epochs, "N", "training epochs"), "training epochs"));
  o.push_back(documented(option("batch-size", &RunConfig::batch_size, "N", "batch size per process"),
                         "batch size per process"));
  o.push_back(documented(option("lr", &RunConfig::lr, "X", "SGD learning rate"), "SGD learning rate"));
  o.push_back(documented(option("momentum", &RunConfig::momentum, "X", "SGD momentum"),
                         "SGD momentum (no weight decay, as the tutorial)"));
  o.push_back(
      documented(option("max-steps", &RunConfig::max_steps, "N", "cut each epoch after N steps (reported as cut)"),
                 "cut each epoch after N steps; the report says the epoch was cut"));
  o.push_back(documented(option("warmup-steps", &RunConfig::warmup_steps, "N",
                                "first steps left out of steady-state figures (still in the epoch time)"),
                         "first steps left out of the steady-state figures (still in the epoch time)"));
  o.push_back(documented(option("max-eval-batches", &RunConfig::max_eval_batches, "N",
                                "evaluate on the first N test batches only (reported as cut)"),
                         "evaluate on the first N test batches only; the report says so"));
  o.push_back(documented(option("device", &RunConfig::device, "auto|cpu|cuda[:N]", "training device"),
                         "`auto` is `cuda:0` when a GPU is visible"));
  o.push_back(documented(option("threads", &RunConfig::threads, "N", "intra-op CPU threads (0: LibTorch's default)"),
                         "intra-op CPU threads (`0`: LibTorch's default)"));
  o.push_back(
      documented(option("seed", &RunConfig::seed, "N", "seed for data order, augmentation, synthetic data and init"),
                 "data order, augmentation, synthetic data and initialisation"));
  o.push_back(
      documented(option("log-interval-steps", &RunConfig::log_interval_steps, "N", "steps between progress lines"),
                 "steps between progress lines when stderr is not a terminal"));
}

// Ranks and DDP: how many, where, and how gradients are reduced.
void add_distributed_options(std::vector<RunOption>& o) {
  o.push_back(
      documented(option("nproc", &RunConfig::nproc, "N",
                        "processes to start for a distributed strategy (one per device); ignored under a launcher"),
                 "processes a distributed strategy starts on this machine, one per device. Above 1 it wins "
                 "over SLURM's batch step and Open MPI's world of one (the ranks get none of their variables) "
                 "and is bad input inside a torchrun world (RANK set) or a launcher's world of more than one (a "
                 "step srun started with 2 or more tasks, mpirun's 2 or more processes: each would start a "
                 "world of its own); at 1, a process that torchrun, srun or mpirun started is one rank of their "
                 "world"));
  o.push_back(
      documented(option("nodes", &RunConfig::nodes, "N",
                        "nodes the ranks span: recorded as the launcher placed them; above 1, srun's ranks check it"),
                 "the nodes the ranks span: recorded as their launcher placed them (with `nproc` as the ranks "
                 "there were); above 1, a rank checks its launcher's placement (`sweep --launcher srun` gives "
                 "it); with `--nproc` above 1, or a single-process strategy, bad input"));
  o.push_back(documented(enum_option("backend", &RunConfig::backend, kCommBackendNames,
                                     "c10d backend: auto is NCCL on CUDA devices, Gloo on CPUs"),
                         "c10d backend: NCCL on CUDA devices, Gloo on CPUs"));
  o.push_back(documented(
      option("bucket-mb", &RunConfig::bucket_mb, "X", "DDP gradient bucket cap in MiB (bucket_cap_mb)"),
      "ddp: DDP's `bucket_cap_mb` (a byte to 1000000); as in PyTorch the first bucket is capped at 1 MiB at the "
      "default cap, at the cap itself when one is given"));
  o.push_back(documented(
      switch_option("overlap", &RunConfig::overlap,
                    "ddp: allreduce each gradient bucket as soon as backward fills it (--no-overlap: all of them "
                    "once the last gradient is ready)"),
      "ddp: allreduce each bucket as soon as backward fills it, or hold them all until the last "
      "gradient is ready (the ablation)"));
  o.push_back(
      documented(switch_option("sync-bn", &RunConfig::sync_bn,
                               "SyncBatchNorm across ranks, as the tutorial converted the model (--no-sync-bn: local)"),
                 "SyncBatchNorm across ranks, as the tutorial converted the model"));
  o.push_back(
      documented(switch_option("find-unused-parameters", &RunConfig::find_unused_parameters,
                               "ddp: DDP's find_unused_parameters (parameters unused in forward keep their gradient)"),
                 "ddp: DDP's `find_unused_parameters`: parameters unused in forward keep an undefined "
                 "gradient (without it, such a model fails at the next step, as in PyTorch)"));
  o.push_back(
      documented(switch_option("gradient-as-bucket-view", &RunConfig::gradient_as_bucket_view,
                               "ddp: DDP's gradient_as_bucket_view (gradients are views into the buckets, no copy)"),
                 "ddp: DDP's `gradient_as_bucket_view`: gradients are views into the buckets, no copy back"));
  o.push_back(documented(
      enum_option("comm-hook", &RunConfig::comm_hook, kCommHookNames,
                  "ddp: how a gradient bucket is reduced: allreduce (timed), fp16 or bf16 (compressed for the "
                  "wire, as PyTorch's fp16_compress_hook/bf16_compress_hook), builtin-fp16 (the Reducer's own "
                  "FP16_COMPRESS, no per-bucket times)"),
      "ddp: how a gradient bucket is reduced: ddpbench's timed allreduce; the bucket compressed to "
      "fp16 or bf16 for the wire (cast, divide, allreduce, cast back, as PyTorch's "
      "`fp16_compress_hook` and `bf16_compress_hook`), timed the same; or the Reducer's own "
      "built-in `FP16_COMPRESS` hook, which runs out of sight (no per-bucket times; not with "
      "`--no-overlap`). The PyTorch twin registers the same hook"));
  o.push_back(documented(option("timeout-s", &RunConfig::timeout_s, "N",
                                "seconds a collective or the rendezvous may wait before the row fails"),
                         "a rendezvous or collective waiting longer fails the row: a dead peer is an error, never a "
                         "hang (1 to 604800, a week)"));
}

// Test only: faults and slowdowns a row plays, for the gates and diagnoses to catch.
void add_injected_fault_options(std::vector<RunOption>& o) {
  o.push_back(documented(
      option("inject-fault-rank", &RunConfig::inject_fault_rank, "N",
             "test only: this rank kills itself (SIGKILL) or hangs (--inject-fault-kind) at --inject-fault-step"),
      "test only: the rank that fails at `--inject-fault-step`, as `--inject-fault-kind` says "
      "(SIGKILL by default)"));
  o.push_back(
      documented(option("inject-fault-step", &RunConfig::inject_fault_step, "N", "test only: see --inject-fault-rank"),
                 "test only: the step at which `--inject-fault-rank` fails"));
  o.push_back(
      documented(enum_option("inject-fault-kind", &RunConfig::inject_fault_kind, kInjectedFaultNames,
                             "test only: kill (SIGKILL) or hang (stop before the step's first collective, alive and "
                             "beating, until signalled)"),
                 "test only: what that rank does there: `hang` stops before the step's first collective, "
                 "alive and beating, until signalled; `kill-in-collective` dies (SIGKILL) inside the step's "
                 "first collective, two heartbeats after entering it, ahead of the others (`--strategy ddp` "
                 "only)"));
  o.push_back(
      documented(option("inject-slowdown", &RunConfig::inject_slowdown, "X",
                        "test only: stretch each step's training by this fraction of busy work (0.1: 10 % slower), as "
                        "a slower build would; ignored when results are matched, so the gate sees the same row"),
                 "test only: each step's training stretched by this fraction of real busy work (a slower "
                 "build); ignored when results are matched, so the gate sees the same row; PyTorch's twins "
                 "are never slowed"));
  o.push_back(documented(option("inject-slowdown-rank", &RunConfig::inject_slowdown_rank, "N",
                                "test only: slow this rank only (a straggler); unset: every rank"),
                         "test only: slow that rank alone (a straggler)"));
  o.push_back(documented(
      enum_option("inject-slowdown-phase", &RunConfig::inject_slowdown_phase, kSlowedPhaseNames,
                  "test only: where the slowdown's busy work goes: data (the loader), forward, backward (its "
                  "start, before any gradient), optimizer; each the fraction of the step's training time"),
      "test only: where the busy work goes, each time the fraction of the step's training time: "
      "the loader's phase, the end of forward, the start of backward (before any gradient is "
      "ready, so every bucket waits), or after the optimizer step"));
}

// DataParallel's devices and the settings that make a step faster.
void add_device_and_speed_options(std::vector<RunOption>& o) {
  o.push_back(documented(option("devices", &RunConfig::devices, "LIST",
                                "dp: devices to scatter the batch over: all visible GPUs, or 0,1,2,3, or cpu,cpu"),
                         "dp: the devices to scatter over: every visible GPU, or `0,1,2,3`, or `cpu,cpu` (CPU "
                         "replicas)"));
  o.push_back(documented(
      enum_option("dp-impl", &RunConfig::dp_impl, kDpImplNames,
                  "dp: replicas kept across steps with coalesced broadcast/reduce, or LibTorch's data_parallel"),
      "dp: our replicas (kept across steps, coalesced broadcast and reduce), or LibTorch's "
      "`data_parallel`"));
  o.push_back(documented(switch_option("allow-single-device", &RunConfig::allow_single_device,
                                       "dp: run on one device rather than skip the row"),
                         "dp: run on one device instead of skipping the row"));
  o.push_back(documented(enum_option("amp", &RunConfig::amp, kAmpModeNames,
                                     "autocast forward and loss: fp16 with dynamic loss scaling (GradScaler), or bf16"),
                         "autocast for forward and loss; fp16 with dynamic loss scaling"));
  o.push_back(
      documented(switch_option("tf32", &RunConfig::tf32, "allow TF32 in cuDNN and cuBLAS (--no-tf32: strict fp32)"),
                 "TF32 in cuDNN and cuBLAS (the tutorial's A100 ran its \"fp32\" convolutions as TF32)"));
  o.push_back(documented(
      switch_option("channels-last", &RunConfig::channels_last, "NHWC (channels-last) parameters and inputs"),
      "NHWC parameters and inputs"));
  o.push_back(documented(
      switch_option("cudnn-benchmark", &RunConfig::cudnn_benchmark, "let cuDNN time and pick its algorithms"),
      "let cuDNN time and pick its algorithms"));
  o.push_back(
      documented(enum_option("sgd", &RunConfig::sgd, kSgdImplNames,
                             "SGD step: loop (one update per parameter), foreach (multi-tensor), fused (one kernel)"),
                 "the SGD step: LibTorch's (one update per parameter), multi-tensor, or one fused kernel"));
  o.push_back(documented(
      switch_option("sync-every-step", &RunConfig::sync_every_step,
                    "read the loss back every step, as the tutorial did (--no-sync-every-step: once per log interval)"),
      "read the loss back every step, as the tutorial's `loss.item()`; off: once per log interval"));
  o.push_back(documented(
      switch_option("cuda-graphs", &RunConfig::cuda_graphs,
                    "single on a GPU: capture forward, loss, backward and the optimizer step in one CUDA graph at "
                    "the last warm-up step and replay it per batch (an epoch's partial last batch runs eagerly)"),
      "`single` (and `torch-single`) on a GPU: forward, loss, backward and the optimizer step "
      "captured in one CUDA graph at the last warm-up step, then replayed per batch with the batch "
      "copied into its static inputs; an epoch's partial last batch runs eagerly. Replayed steps' "
      "phases are not measured (null). Refused with `dp`/`ddp`, `--device cpu`, `--amp fp16`, "
      "`--inject-slowdown`, `--warmup-steps` under 4; a CPU-only machine skips the row "
      "([cuda-graphs.md](cuda-graphs.md))"));
  o.push_back(documented(
      enum_option("preset", &RunConfig::preset, kPresetNames,
                  "fast: bf16 autocast, channels-last, cuDNN benchmark, device loader, fused SGD, no per-step sync"),
      "`fast`: bf16, channels-last, cuDNN benchmark, device loader, fused SGD, no per-step sync "
      "(flags given explicitly win)"));
}

// What a row leaves behind: NVTX ranges, profiles, traces, the result and weights.
void add_observation_and_output_options(std::vector<RunOption>& o) {
  o.push_back(documented(enum_option("nvtx", &RunConfig::nvtx, kNvtxModeNames,
                                     "NVTX ranges: on (ddpbench's phases), ops (also one per LibTorch op), off"),
                         "NVTX ranges; `ops` adds LibTorch's per-op ranges (Python's `emit_nvtx`)"));
  o.push_back(
      documented(option("profile-steps", &RunConfig::profile_steps, "A:B",
                        "cudaProfilerStart before global step A, cudaProfilerStop after step B (nsys capture range)"),
                 "`cudaProfilerStart` before global step A, `cudaProfilerStop` after step B", "unset"));
  o.push_back(
      documented(option("trace-steps", &RunConfig::trace_steps, "A:B",
                        "trace global steps A to B with PyTorch's profiler: ROW.rank<N>.trace.json beside --out"),
                 "PyTorch's profiler (Kineto) traces global steps A to B on every rank: "
                 "`NAME.rank<N>.trace.json` beside `--out NAME.json` (which it needs); the traced steps leave "
                 "the steady figures ([tracing.md](tracing.md))",
                 "unset"));
  o.push_back(documented(option("out", &RunConfig::out, "FILE.json", "write the result JSON here"),
                         "result file (written atomically)"));
  o.push_back(documented(option("save-checkpoint", &RunConfig::save_checkpoint, "PATH",
                                "save trained weights as named tensors (Python: torch.load)"),
                         "trained weights as a file of named tensors"));
  o.push_back(documented(
      option("init-from", &RunConfig::init_from, "PATH", "start from weights saved by --save-checkpoint or torch.save"),
      "start from such weights"));
}

std::vector<RunOption> make_run_options() {
  std::vector<RunOption> o;
  add_row_and_data_options(o);
  add_schedule_options(o);
  add_distributed_options(o);
  add_injected_fault_options(o);
  add_device_and_speed_options(o);
  add_observation_and_output_options(o);
  return o;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& preset_options(Preset preset) {
  static const std::vector<std::pair<std::string, std::string>> none;
  static const std::vector<std::pair<std::string, std::string>> fast = {
      {"amp", "bf16"},          {"channels-last", "true"}, {"cudnn-benchmark", "true"}, {"loader", "device"},
      {"workers", "0"},         {"sgd", "fused"},          {"sync-every-step", "false"}, {"tf32", "true"}};
  return preset == Preset::fast ? fast : none;
}

void apply_preset(RunConfig& config, const std::set<std::string>& explicit_keys) {
  for (const auto& [key, value] : preset_options(config.preset)) {
    if (explicit_keys.count(key) == 0) find_run_option(key)->set(config, value);
  }
}

std::span<const RunOption> run_options() {
  static const std::vector<RunOption> options = make_run_options();
  return options;
}

const RunOption* find_run_option(std::string_view key) {
  for (const auto& opt : run_options()) {
    if (opt.key == key) return &opt;
  }
  return nullptr;
}

namespace {

std::string shown_default(const RunOption& opt) {
  if (!opt.shown_default.empty()) return opt.shown_default;
  const json value = opt.get(RunConfig{});
  if (opt.is_switch) return value.get<bool>() ? "on" : "off";
  if (value.is_null()) return "unset";
  if (value.is_string()) {
    const auto text = value.get<std::string>();
    return text.empty() ? "none" : "`" + markdown_table_cell(text) + "`";
  }
  if (value.is_number_float()) {
    std::ostringstream number;
    number << value.get<double>();  // 25, not 25.0; 0.001, not 1e-03
    return "`" + number.str() + "`";
  }
  return "`" + value.dump() + "`";
}

}  // namespace

std::string reference_table_markdown(std::span<const ReferenceLine> lines) {
  std::string table = "| option | default | meaning |\n| --- | --- | --- |\n";
  for (const auto& line : lines) {
    table += "| " + line.written + " | " + (line.shown_default.empty() ? "" : line.shown_default + " ") + "| " +
             line.meaning + " |\n";
  }
  return table;
}

std::string run_options_markdown() {
  std::vector<ReferenceLine> lines;
  for (const auto& opt : run_options()) {
    lines.push_back({opt.is_switch ? "`--" + opt.key + "`, `--no-" + opt.key + "`"
                                   : "`--" + opt.key + " " + markdown_table_cell(opt.value_name) + "`",
                     shown_default(opt), opt.doc});
  }
  return reference_table_markdown(lines);
}

nlohmann::json run_config_to_json(const RunConfig& config) {
  json out = json::object();
  for (const auto& opt : run_options()) out[opt.key] = opt.get(config);
  return out;
}

std::vector<std::string> run_config_to_args(const RunConfig& config) {
  std::vector<std::string> args;
  for (const auto& opt : run_options()) {
    const json value = opt.get(config);
    if (opt.is_switch) {
      args.push_back(value.get<bool>() ? "--" + opt.key : "--no-" + opt.key);
    } else if (value.is_null()) {
      args.push_back("--" + opt.key);
      args.push_back("none");
    } else {
      args.push_back("--" + opt.key);
      args.push_back(value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  return args;
}

namespace {

// The JSON type this build writes an option's value as: a value of another type is no value of
// it, in a result file or a sweep file alike, even where its text would parse ("2" for a count,
// 1 for a switch, 5 for a name).
bool written_as(const json& value, const json& written) {
  if (written.is_boolean()) return value.is_boolean();
  if (written.is_string()) return value.is_string();
  if (written.is_number_float()) return value.is_number();
  if (written.is_number()) return value.is_number_integer();
  return value.is_null() || value.is_number_integer();  // an optional count, unset
}

}  // namespace

void apply_run_config_json(RunConfig& config, const nlohmann::json& object, std::string_view where) {
  const std::string prefix = where.empty() ? std::string() : std::string(where) + ": ";
  if (!object.is_object()) {
    throw InputError(prefix + "expected a JSON object of options, got " + object.type_name());
  }
  const RunConfig defaults;  // each option's default holds the JSON type its values must have
  for (const auto& [key, value] : object.items()) {
    const RunOption* opt = find_run_option(key);
    if (opt == nullptr) {
      std::vector<std::string> keys;
      for (const auto& o : run_options()) keys.push_back(o.key);
      throw InputError(prefix + "unknown option '" + key + "'" + did_you_mean(key, keys));
    }
    if (!written_as(value, opt->get(defaults))) {
      throw InputError(prefix + flag(key) + ": " + value.dump() + " is not a value of its type (" +
                       (opt->is_switch ? std::string("true or false") : opt->value_name) + ")");
    }
    const std::string text = value.is_string() ? value.get<std::string>() : value.is_null() ? "none" : value.dump();
    try {
      opt->set(config, text);
    } catch (const InputError& e) {
      throw InputError(prefix + e.what());
    }
  }
}

void prove_run_config(const nlohmann::json& config, bool ran) {
  if (!config.is_object()) throw InputError("the configuration is not an object of options");
  json known = json::object();
  for (const auto& [key, value] : config.items()) {
    const RunOption* opt = find_run_option(key);
    if (opt == nullptr) continue;
    known[key] = value;
  }
  RunConfig c;
  apply_run_config_json(c, known, "");
  // Ranges and combinations as `run` checks them, but for the placement: a launcher's ranks
  // record the nodes they spanned, which no command line of `run` gives beside --nproc. A graphed
  // row skipped for want of a GPU was judged without its capture, as the sweep judged it.
  c.nodes = 1;
  c.cuda_graphs = c.cuda_graphs && ran;
  validate(c);
}

ProvenResults read_results_here(const std::filesystem::path& path, const std::string& side) {
  return read_proven_results(path, side, run_config_to_json(RunConfig{}), prove_run_config);
}

}  // namespace ddpbench
