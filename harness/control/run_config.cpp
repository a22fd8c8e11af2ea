#include "harness/control/run_config.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "harness/base/whole_integer.hpp"

namespace ddpbench {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw InputError(message);
}

// A count in [least, most]: `why` says what the top bound is.
void require_count(int64_t value, int64_t least, int64_t most, const char* flag, const std::string& why) {
  require(value >= least, std::string(flag) + (least > 0 ? " must be positive" : " must not be negative") +
                              " (got " + std::to_string(value) + ")");
  require(value <= most,
          std::string(flag) + " " + std::to_string(value) + " is more than " + std::to_string(most) + ": " + why);
}

constexpr const char* kNoRunHasMore = "no run has more, and the row's work would overflow";

// A number as people write it: 1e+300, 0.001, 25.
std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

namespace {

// A:B with 0 <= A <= B, as `flag` names it; nullopt when `text` is empty.
std::optional<std::pair<int64_t, int64_t>> step_range(const char* flag, const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::string error = std::string(flag) + " '" + text + "': expected A:B with 0 <= A <= B";
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw InputError(error);
  auto parse = [&](std::string_view part) {
    const auto v = whole_integer<int64_t>(part);
    if (!v || *v < 0) throw InputError(error);
    return *v;
  };
  const std::string_view all(text);
  const int64_t first = parse(all.substr(0, colon));
  const int64_t last = parse(all.substr(colon + 1));
  if (first > last) throw InputError(error);
  return std::make_pair(first, last);
}

}  // namespace

std::optional<std::pair<int64_t, int64_t>> profile_step_range(const RunConfig& c) {
  return step_range("--profile-steps", c.profile_steps);
}

std::optional<std::pair<int64_t, int64_t>> trace_step_range(const RunConfig& c) {
  return step_range("--trace-steps", c.trace_steps);
}

std::vector<int64_t> device_list(const RunConfig& c) {
  std::vector<int64_t> devices;
  if (c.devices == "all") return devices;
  const std::string error = "--devices '" + c.devices + "': expected all, or a list such as 0,1,2,3 or cpu,cpu";
  std::string_view rest(c.devices);
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (item == "cpu") {
      devices.push_back(-1);
    } else {
      const auto index = whole_integer<int64_t>(item);
      if (!index || *index < 0) throw InputError(error);
      devices.push_back(*index);
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  const bool cpu = devices.front() < 0;
  for (int64_t d : devices) {
    if ((d < 0) != cpu) throw InputError(error + " (CPU and CUDA devices do not mix)");
  }
  return devices;
}

std::optional<std::string> pytorch_lacks(const RunConfig& config) {
  if (config.strategy == "torch-ddp" && !config.overlap) {
    return "--no-overlap: PyTorch's DistributedDataParallel has no such switch (it always overlaps); "
           "--strategy torch-ddp runs with --overlap";
  }
  if (!config.trace_steps.empty()) {
    return "--trace-steps: PyTorch's rows do not trace their steps (their loop has no profiler around them); "
           "trace the ddpbench row, which runs the same steps";
  }
  if (config.inject_fault_kind == InjectedFault::kill_in_collective) {
    return "--inject-fault-kind kill-in-collective: it dies inside ddpbench's bucket hook, which PyTorch's rows do "
           "not have; --inject-fault-kind kill stops a rank of either at a step";
  }
  if (config.inject_slowdown > 0) {
    return "--inject-slowdown: it plays a slower ddpbench against PyTorch's rows, which run as they are; leave it "
           "out of a torch-* row";
  }
  return std::nullopt;
}

bool cuda_graphs_capture(std::string_view strategy) { return strategy == "single" || strategy == "torch-single"; }

// What a captured step cannot hold is refused before any work: the graph replays device work
// only, so anything the host decides or does inside a step would run once, at the capture.
void validate_cuda_graphs(const RunConfig& c, bool with_device_and_warm_up) {
  require(cuda_graphs_capture(c.strategy),
          "--cuda-graphs captures the one-device step of --strategy single (and torch-single); --strategy " +
              c.strategy + " reduces or scatters from the host inside each step, which a graph does not replay");
  require(c.amp != AmpMode::fp16,
          "--cuda-graphs with --amp fp16: the loss scaler's overflow check and scale update are not captured here; "
          "use --amp bf16, which needs no scaler");
  require(c.inject_slowdown == 0,
          "--cuda-graphs with --inject-slowdown: the slowdown is host work inside the step, which a replay skips");
  if (!with_device_and_warm_up) return;
  require(c.device != "cpu", "--cuda-graphs needs a GPU (--device cpu): CUDA graphs replay device work");
  require(c.warmup_steps >= 4, "--cuda-graphs captures the last warm-up step after at least three eager ones "
                               "(PyTorch's examples warm up 3): --warmup-steps " +
                                   std::to_string(c.warmup_steps) + " must be at least 4");
}

void validate(const RunConfig& c) {
  require(!c.strategy.empty(), "--strategy must not be empty");
  require(!c.model.empty(), "--model must not be empty");
  require_count(c.num_classes, 1, kMostOfACount, "--num-classes", kNoRunHasMore);
  require_count(c.synthetic_train_images, 1, kMostOfACount, "--synthetic-train-images", kNoRunHasMore);
  require_count(c.synthetic_test_images, 1, kMostOfACount, "--synthetic-test-images", kNoRunHasMore);
  require_count(c.workers, 0, kMostThreads, "--workers", "no machine has the cores for more threads");
  require_count(c.crop_padding, 0, 32, "--crop-padding", "a 32x32 image padded more is mostly padding");
  require_count(c.epochs, 1, kMostOfACount, "--epochs", kNoRunHasMore);
  require_count(c.batch_size, 1, kMostOfACount, "--batch-size", kNoRunHasMore);
  require(std::isfinite(c.lr) && c.lr > 0, "--lr must be a positive number (got " + std::to_string(c.lr) + ")");
  require(std::isfinite(c.momentum) && c.momentum >= 0 && c.momentum < 1,
          "--momentum must be in [0, 1) (got " + std::to_string(c.momentum) + ")");
  if (c.max_steps) require_count(*c.max_steps, 1, kMostOfACount, "--max-steps", kNoRunHasMore);
  require_count(c.warmup_steps, 0, kMostOfACount, "--warmup-steps", kNoRunHasMore);
  if (c.max_eval_batches) require_count(*c.max_eval_batches, 1, kMostOfACount, "--max-eval-batches", kNoRunHasMore);
  require_count(c.threads, 0, kMostThreads, "--threads", "no machine has the cores for more threads");
  require_count(c.log_interval_steps, 1, kMostOfACount, "--log-interval-steps", kNoRunHasMore);
  require(c.data_dir.empty() == false || c.dataset == DatasetKind::synthetic,
          "--data-dir must not be empty");
  require(!c.cache_dir.empty(), "--cache-dir must not be empty (auto, none or a folder)");
  require_count(c.nproc, 1, kMostOfACount, "--nproc", kNoRunHasMore);
  require_count(c.nodes, 1, kMostOfACount, "--nodes", kNoRunHasMore);
  require(c.nodes == 1 || c.nproc == 1,
          "--nodes " + std::to_string(c.nodes) + " with --nproc " + std::to_string(c.nproc) +
              ": ddpbench starts ranks on this machine only; start them across nodes with srun (sweep --launcher "
              "srun) or torchrun");
  require(std::isfinite(c.bucket_mb) && c.bucket_mb >= kLeastBucketMb && c.bucket_mb <= kMostBucketMb,
          "--bucket-mb " + number_text(c.bucket_mb) + " is not a bucket cap (a byte to " +
              number_text(kMostBucketMb) + " MiB)");
  require_count(c.timeout_s, 1, kMostTimeoutS, "--timeout-s", "a week; a longer wait is no timeout");
  require(c.inject_fault_rank.has_value() == c.inject_fault_step.has_value(),
          "--inject-fault-rank and --inject-fault-step go together");
  if (c.inject_fault_rank) {
    require_count(*c.inject_fault_rank, 0, kMostOfACount, "--inject-fault-rank", kNoRunHasMore);
    require_count(*c.inject_fault_step, 0, kMostOfACount, "--inject-fault-step", kNoRunHasMore);
  }
  require(c.inject_fault_kind != InjectedFault::kill_in_collective || c.strategy == "ddp",
          "--inject-fault-kind kill-in-collective needs the ranks' collectives of --strategy ddp (got --strategy " +
              c.strategy + ")");
  require(std::isfinite(c.inject_slowdown) && c.inject_slowdown >= 0 && c.inject_slowdown <= 10,
          "--inject-slowdown must be a fraction in [0, 10] (got " + std::to_string(c.inject_slowdown) + ")");
  if (c.inject_slowdown_rank) {
    require_count(*c.inject_slowdown_rank, 0, kMostOfACount, "--inject-slowdown-rank", kNoRunHasMore);
    require(c.inject_slowdown > 0, "--inject-slowdown-rank needs --inject-slowdown");
  }
  require(c.inject_slowdown_phase == SlowedPhase::optimizer || c.inject_slowdown > 0,
          "--inject-slowdown-phase needs --inject-slowdown");
  require(c.overlap || c.comm_hook != CommHook::builtin_fp16,
          "--no-overlap holds buckets in ddpbench's own hook, which --comm-hook builtin-fp16 replaces with the "
          "Reducer's; use --comm-hook fp16");
  if (c.cuda_graphs) validate_cuda_graphs(c);
  profile_step_range(c);
  if (trace_step_range(c)) {
    require(c.profile_steps.empty(),
            "--trace-steps and --profile-steps: PyTorch's profiler and Nsight Systems' capture range cannot share "
            "a run (both hold CUPTI); give one");
    require(c.nvtx != NvtxMode::ops, "--trace-steps with --nvtx ops: LibTorch's per-op NVTX ranges are a "
                                     "profiler of their own, and one profiler runs at a time; use --nvtx on");
  }
  device_list(c);
}

std::string resolved_cache_dir(const RunConfig& c) {
  if (c.cache_dir == "none") return "";
  if (c.cache_dir != "auto") return c.cache_dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/ddpbench";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.cache/ddpbench";
}

DatasetOptions dataset_options(const RunConfig& c) {
  return DatasetOptions{c.dataset, c.data_dir, c.seed, c.synthetic_train_images, c.synthetic_test_images,
                        resolved_cache_dir(c)};
}

StrategyOptions strategy_options(const RunConfig& c) {
  StrategyOptions o;
  o.model = c.model;
  o.device = c.device;
  o.batch_size = c.batch_size;
  o.warmup_steps = c.warmup_steps;
  o.amp = c.amp;
  o.channels_last = c.channels_last;
  o.cuda_graphs = c.cuda_graphs;
  o.bucket_mb = c.bucket_mb;
  o.overlap = c.overlap;
  o.sync_bn = c.sync_bn;
  o.find_unused_parameters = c.find_unused_parameters;
  o.gradient_as_bucket_view = c.gradient_as_bucket_view;
  o.comm_hook = c.comm_hook;
  o.devices_flag = c.devices;
  o.devices = device_list(c);
  o.dp_impl = c.dp_impl;
  o.allow_single_device = c.allow_single_device;
  return o;
}

}  // namespace ddpbench
