#include "harness/runner/runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/sgd.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/utils.h>

#ifdef DDPBENCH_HAVE_CUDA
#include <cuda_profiler_api.h>
#endif

#include "data/batch_loader.hpp"
#include "data/sampler.hpp"
#include "harness/base/clock.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/statistics.hpp"
#include "harness/control/progress.hpp"
#include "harness/control/row_check.hpp"
#include "harness/launch/interruption.hpp"
#include "harness/launch/lockstep_turns.hpp"
#include "harness/control/run_options.hpp"
#include "harness/distributed/communicator.hpp"
#include "harness/runner/device.hpp"
#include "harness/runner/fault_injection.hpp"
#include "harness/runner/step_trace.hpp"
#include "harness/timing/named_range.hpp"
#include "harness/timing/phase_timer.hpp"
#include "models/checkpoint.hpp"
#include "models/flop_count.hpp"
#include "models/layout.hpp"
#include "models/registry.hpp"
#include "strategies/cuda_graph_step.hpp"
#include "strategies/mixed_precision.hpp"
#include "strategies/sgd.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench {
namespace {

LoaderOptions loader_options(const RunConfig& config, const DistContext& dist, std::optional<int64_t> max_batches) {
  LoaderOptions options;
  options.batch_size = config.batch_size;
  options.workers = config.workers;
  options.device = dist.device;
  options.max_batches = max_batches;
  return options;
}

Batch to_device(Batch batch, const c10::Device& device, bool channels_last) {
  if (batch.images.device() != device) {
    batch = Batch{batch.images.to(device, /*non_blocking=*/true), batch.labels.to(device, /*non_blocking=*/true)};
  }
  if (channels_last) batch.images = batch.images.contiguous(at::MemoryFormat::ChannelsLast);
  return batch;
}

struct EvalCounts {
  int64_t correct = 0;
  int64_t seen = 0;
  bool cut = false;
};

EvalCounts evaluate(const RunConfig& config, const DistContext& dist, const ImageSet& test,
                    torch::nn::AnyModule model) {
  NamedScope range("evaluation", dist.rank);
  torch::NoGradGuard no_grad;
  model.ptr()->eval();
  const Shard shard{dist.rank, dist.world_size};
  EpochPlan plan{eval_shard_indices(test.size(), shard),
                 config.test_transform == TestTransform::train
                     ? random_augmentation(config.seed, 0, AugmentationStream::test, test.size(), config.crop_padding)
                     : identity_augmentation(test.size())};
  const auto full_batches = batches_in_epoch(static_cast<int64_t>(plan.indices.size()),
                                             loader_options(config, dist, std::nullopt));
  auto loader = make_loader(config.loader, test, loader_options(config, dist, config.max_eval_batches));
  loader->start_epoch(std::move(plan));
  auto correct = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(dist.device));
  int64_t seen = 0;
  int64_t batches = 0;
  while (auto batch = loader->next()) {
    const Batch b = to_device(std::move(*batch), dist.device, config.channels_last);
    correct += model.forward<at::Tensor>(b.images).argmax(1).eq(b.labels).sum();
    seen += b.size();
    ++batches;
  }
  // Each rank counted its own shard; the sums are the whole test set's.
  auto counts = at::stack({correct, at::scalar_tensor(seen, correct.options())});
  if (dist.comm) dist.comm->sum(counts, "evaluation");
  counts = counts.cpu();
  EvalCounts result{counts[0].item<int64_t>(), counts[1].item<int64_t>(), batches < full_batches};
  model.ptr()->train();
  return result;
}

// Every rank's epoch time, steady step times and where its steps went, so the report can name
// the rank that held the others back.
std::vector<RankSteps> gather_rank_steps(double train_time_s, int64_t peak_memory, std::span<const StepRecord> steady,
                                         const DistContext& dist) {
  const StepShares shares = mean_shares(steady);
  std::vector<double> row{train_time_s, static_cast<double>(peak_memory), shares.compute_s, shares.data_s, shares.wait_s};
  for (const auto& step : steady) row.push_back(step.time_s);
  for (const auto& step : steady) row.push_back(step.compute_s() + step.phases.data_s);
  constexpr std::size_t kFixed = 5;
  const auto steps = static_cast<std::ptrdiff_t>(steady.size());
  const auto local = at::tensor(row, at::TensorOptions().dtype(at::kDouble)).to(dist.device);
  const auto all = all_gather_rows(*dist.comm, local, "the gather of rank timings").cpu().contiguous();
  std::vector<RankSteps> ranks;
  for (int64_t r = 0; r < dist.world_size; ++r) {
    const double* values = all[r].data_ptr<double>();
    ranks.push_back(RankSteps{values[0], std::vector<double>(values + kFixed, values + kFixed + steps),
                              static_cast<int64_t>(values[1]), StepShares{values[2], values[3], values[4]},
                              std::vector<double>(values + kFixed + steps, values + kFixed + 2 * steps)});
  }
  return ranks;
}

// Device-wide settings a row asks for, applied before anything runs on the device.
void apply_device_settings(const RunConfig& config) {
  auto& context = at::globalContext();
  context.setBenchmarkCuDNN(config.cudnn_benchmark);
  context.setAllowTF32CuDNN(config.tf32);
  context.setAllowTF32CuBLAS(config.tf32);
}

// cudaProfilerStart/Stop around --profile-steps, the capture range `nsys profile
// --capture-range=cudaProfilerApi` records.
class ProfilerRange {
 public:
  ProfilerRange(const RunConfig& config, const c10::Device& device)
      : range_(profile_step_range(config)), cuda_(device.is_cuda()) {}
  void before_step(int64_t step) {
    if (range_ && step == range_->first) set(true);
  }
  void after_step(int64_t step) {
    if (range_ && step == range_->second) set(false);
  }
  ~ProfilerRange() {
    if (started_) set(false);
  }
  ProfilerRange(const ProfilerRange&) = delete;
  ProfilerRange& operator=(const ProfilerRange&) = delete;

 private:
  void set(bool on) {
    nvtx::mark(on ? "profiler start" : "profiler stop");
#ifdef DDPBENCH_HAVE_CUDA
    if (cuda_) {
      if (on) {
        cudaProfilerStart();
      } else {
        cudaProfilerStop();
      }
    }
#endif
    started_ = on;
  }
  std::optional<std::pair<int64_t, int64_t>> range_;
  bool cuda_;
  bool started_ = false;
};

// A step whose loss and timing are still on the device: read back together, once per
// step with --sync-every-step (the tutorial's loss.item()), else once per log interval.
struct PendingStep {
  StepRecord record;
  at::Tensor loss;
  std::function<StepTiming()> timing;
};

// A lockstep run's turns around each step (harness/launch/lockstep_turns.hpp), and nothing
// without one: the waits are the other build's steps, not this row's training.
class StepTurns {
 public:
  StepTurns(const RunConfig& config, const DistContext& dist)
      : turns_(LockstepTurns::from_environment(config.row_name(), dist.rank, dist.world_size)) {
    if (turns_ && config.workers > 0) {
      throw InputError("--workers " + std::to_string(config.workers) + ": in a lockstep run a loader's workers would " +
                       "run while the other build has the turn; lockstep needs --workers 0");
    }
  }
  /// Waits for the turn of step `step` of an epoch of `steps` (the loader's last call, past
  /// them, takes none) and starts the step's time there; false when a signal ended the wait.
  bool before_step(int64_t step, int64_t steps, PhaseTimer& timer) {
    if (!turns_) return true;
    if (step < steps && !turns_->wait_for_turn()) return false;
    timer.mark_epoch_start();
    return true;
  }
  /// The turn passes when the step's work is done, on the device too.
  void after_step(int64_t global_step, const c10::Device& device) {
    if (!turns_) return;
    synchronize(device);
    turns_->release(global_step);
  }
  [[nodiscard]] double waited_s() const { return turns_ ? turns_->waited_s() : 0; }
  void end() {
    if (turns_) turns_->end();
  }
  void record(RunResult& result) const {
    if (turns_) result.lockstep_wait_s = turns_->waited_s();
  }

 private:
  std::unique_ptr<LockstepTurns> turns_;
};

}  // namespace

RunResult unfinished_result(const RunConfig& config, RunStatus status, std::string reason, int64_t world_size) {
  RunResult result;
  result.name = config.row_name();
  result.strategy = config.strategy;
  result.world_size = world_size;
  result.device = config.device;
  result.status = status;
  result.reason = reason_text(reason);
  result.epochs = config.epochs;
  result.warmup_steps = config.warmup_steps;
  result.config = run_config_to_json(config);
  return result;
}

// Counted on the model's shapes, whoever trained it: a fresh CPU copy, one forward pass.
double model_train_flops(const RunConfig& config) {
  try {
    return train_flops_per_image(ModelOptions{config.model, config.num_classes, "", false}, kImageSide);
  } catch (const std::exception&) {
    return kNotMeasured;
  }
}

std::vector<StepRecord> steady_steps(const std::vector<StepRecord>& steps, const RunConfig& config) {
  const auto traced = trace_step_range(config);
  std::vector<StepRecord> steady;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto step = static_cast<int64_t>(i);
    if (step < config.warmup_steps || (traced && step >= traced->first && step <= traced->second)) continue;
    steady.push_back(steps[i]);
  }
  return steady;
}

StepShares mean_shares(std::span<const StepRecord> steps) {
  if (steps.empty()) return {};
  StepShares sum{0, 0, 0};
  for (const auto& step : steps) {
    sum.compute_s += step.compute_s();
    sum.data_s += step.phases.data_s;
    sum.wait_s += step.phases.wait_s();
  }
  const auto n = static_cast<double>(steps.size());
  return {sum.compute_s / n, sum.data_s / n, sum.wait_s / n};
}

namespace {

// Throughput (every rank's images), step-time quantiles and mean phases over the steady steps.
void record_steady_figures(RunResult& result, const std::vector<StepRecord>& steps, const RunConfig& config,
                           int64_t world_size) {
  std::vector<double> steady_times;
  int64_t steady_images = 0;
  PhaseSeconds phase_sum;
  for (const StepRecord& r : steady_steps(steps, config)) {
    steady_times.push_back(r.time_s);
    steady_images += r.images;
    phase_sum += r.phases;
  }
  if (!steady_times.empty()) {
    const double steady_time = std::accumulate(steady_times.begin(), steady_times.end(), 0.0);
    result.steady_images_per_s = static_cast<double>(steady_images * world_size) / steady_time;
    result.step_time_s = quantiles(steady_times);
    result.mean_phase_s = phase_sum / static_cast<double>(steady_times.size());
  }
}

// Each rank's timing, the row's train time, and the rank that held the others back: by how
// much (rank_spread, rank_compute_spread) and where (straggler_cause).
void record_rank_timings(RunResult& result, const std::vector<RankSteps>& ranks) {
  // The epoch ends when the last rank's does: the row's train time is the slowest rank's. A
  // collective is a barrier, so every rank's steps take as long as the slowest's: the rank
  // that held the others back is the one with the most time of its own (compute, and data:
  // a rank held by its loader holds the others as surely), the least waiting for the others.
  const RankTiming* slowest = nullptr;
  const RankTiming* fastest = nullptr;
  double slowest_compute = -1, fastest_compute = std::numeric_limits<double>::infinity();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankSteps& rank = ranks[r];
    result.ranks.push_back(RankTiming{static_cast<int64_t>(r), rank.train_time_s, quantiles(rank.steady_step_times_s),
                                      rank.peak_memory_bytes, rank.steady_shares.compute_s, rank.steady_shares.data_s,
                                      rank.steady_shares.wait_s});
  }
  for (const RankTiming& timing : result.ranks) {
    result.train_time_s = std::max(result.train_time_s, timing.train_time_s);
    const double own = timing.compute_s + timing.data_s;
    if (std::isfinite(own)) {
      if (slowest == nullptr || own > slowest->compute_s + slowest->data_s) slowest = &timing;
      if (fastest == nullptr || own < fastest->compute_s + fastest->data_s) fastest = &timing;
    }
    if (std::isfinite(timing.compute_s)) {
      slowest_compute = std::max(slowest_compute, timing.compute_s);
      fastest_compute = std::min(fastest_compute, timing.compute_s);
    }
  }
  if (slowest != nullptr) {
    result.slowest_rank = slowest->rank;
    const double fastest_own = fastest->compute_s + fastest->data_s;
    if (fastest_own > 0) result.rank_spread = (slowest->compute_s + slowest->data_s) / fastest_own;
    result.straggler_cause =
        slowest->data_s - fastest->data_s > slowest->compute_s - fastest->compute_s ? "data" : "compute";
  }
  if (slowest_compute >= 0 && fastest_compute > 0) result.rank_compute_spread = slowest_compute / fastest_compute;
}

// In how many steady steps the slowest rank (record_rank_timings) was the slowest, and how
// likely that many is by chance for a rank picked as the slowest of them all (never as if it had
// been named before the row ran); left unmeasured unless every rank timed every steady step.
void record_straggler_steps(RunResult& result, const std::vector<RankSteps>& ranks) {
  const std::size_t steps = ranks.empty() ? 0 : ranks.front().steady_own_times_s.size();
  const bool per_step = steps > 0 && std::all_of(ranks.begin(), ranks.end(), [&](const RankSteps& r) {
    return r.steady_own_times_s.size() == steps;
  });
  if (result.slowest_rank < 0 || !per_step) return;
  int64_t slowest_in = 0;
  for (std::size_t s = 0; s < steps; ++s) {
    std::size_t top = 0;
    for (std::size_t r = 1; r < ranks.size(); ++r) {
      if (ranks[r].steady_own_times_s[s] > ranks[top].steady_own_times_s[s]) top = r;
    }
    slowest_in += static_cast<int64_t>(top) == result.slowest_rank ? 1 : 0;
  }
  result.straggler_steps = slowest_in;
  result.straggler_of_steps = static_cast<int64_t>(steps);
  result.straggler_p =
      slowest_of_ranks_p(slowest_in, static_cast<int64_t>(steps), static_cast<int64_t>(ranks.size()));
}

}  // namespace

RunResult assemble_result(const RunConfig& config, int64_t world_size, RowMeasurements m) {
  RunResult result;
  result.name = config.row_name();
  result.strategy = config.strategy;
  result.world_size = world_size;
  result.device = m.device;
  result.dataset = m.dataset;
  result.dataset_origin = m.dataset_origin;
  result.status = RunStatus::ok;
  result.epochs = config.epochs;
  result.steps = static_cast<int64_t>(m.steps.size());
  result.steps_per_epoch = m.full_steps_per_epoch;
  result.epoch_cut = m.steps_per_epoch < m.full_steps_per_epoch;
  result.warmup_steps = config.warmup_steps;
  result.global_batch = config.batch_size * world_size;
  result.images_trained = m.local_images * world_size;
  result.train_images = m.train_images;
  result.train_time_s = m.train_time_s;

  record_steady_figures(result, m.steps, config, world_size);
  result.train_flops_per_image = m.train_flops_per_image;
  result.achieved_flops_per_s = m.train_flops_per_image * result.steady_images_per_s;
  record_rank_timings(result, m.ranks);
  // A straggler is flagged when the spread is wide and the same rank was the slowest step after
  // step beyond what chance would make of it: noise (3 ranks sharing 2 cores) spreads the ranks
  // too, but names another rank each step.
  record_straggler_steps(result, m.ranks);
  result.straggler = result.rank_spread > 1.0 + kStragglerSpread &&
                     (!std::isfinite(result.straggler_p) || result.straggler_p < kStragglerAlpha);
  result.images_per_s = static_cast<double>(result.images_trained) / result.train_time_s;
  result.final_loss = m.steps.empty() ? kNotMeasured : m.steps.back().loss;
  result.eval_images = m.eval_seen;
  result.eval_cut = m.eval_cut;
  result.test_accuracy =
      m.eval_seen > 0 ? static_cast<double>(m.eval_correct) / static_cast<double>(m.eval_seen) : kNotMeasured;
  // The row's peak is the largest of any rank's (each rank's is in `ranks`).
  result.peak_memory_bytes = m.peak_memory_bytes;
  for (const auto& r : m.ranks) result.peak_memory_bytes = std::max(result.peak_memory_bytes, r.peak_memory_bytes);
  result.peak_memory_source = m.peak_memory_source;
  result.config = run_config_to_json(config);
  result.step_records = std::move(m.steps);
  return result;
}

namespace {

// The seed first: the model's initial weights are drawn from it, identically on every rank.
torch::nn::AnyModule seeded_model(const RunConfig& config, const DistContext& dist) {
  torch::manual_seed(config.seed);
  return build_model(ModelOptions{config.model, config.num_classes, config.init_from, config.channels_last}, dist.device);
}

std::unique_ptr<Strategy> make_strategy(const StrategyInfo& info, const StrategyOptions& options, bool cuda_graphs) {
  std::unique_ptr<Strategy> strategy = info.make(options);
  if (cuda_graphs) strategy = capture_in_cuda_graph(std::move(strategy), options);
  return strategy;
}

// What a row trains with, built in this order and alive together (the prepared strategy holds
// the setup, which holds the rest): the strategy is prepared last (DDP's broadcast of rank 0's
// weights, its buckets).
struct PreparedRow {
  PreparedRow(const RunConfig& config, const DistContext& dist, const StrategyInfo& info)
      : model(seeded_model(config, dist)),
        optimizer(make_sgd(model.ptr()->parameters(), config.lr, config.momentum, config.sgd)),
        timer(make_phase_timer(dist.device)),
        precision(config.amp, dist.device),
        options(strategy_options(config)),
        strategy(make_strategy(info, options, config.cuda_graphs)),
        setup{model, *optimizer, dist, options, *timer, precision},
        faults(config, dist.rank, dist.comm.get()) {
    if (faults.slows(SlowedPhase::forward) || faults.slows(SlowedPhase::backward)) {
      setup.slow_down = [this](Phase phase) {
        (void)faults.stretch_in(phase == Phase::forward ? SlowedPhase::forward : SlowedPhase::backward);
      };
    }
    strategy->prepare(setup);
  }
  PreparedRow(const PreparedRow&) = delete;
  PreparedRow& operator=(const PreparedRow&) = delete;

  torch::nn::AnyModule model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<PhaseTimer> timer;
  MixedPrecision precision;
  const StrategyOptions options;
  std::unique_ptr<Strategy> strategy;
  TrainingSetup setup;
  FaultInjection faults;
};

// An epoch of this rank's shard: the steps it runs (--max-steps may cut it) and those a whole
// one has. Throws InputError where --inject-fault-step or --trace-steps name a step the row never
// reaches (CIFAR-10's size is known only once read, so the run command cannot check it).
struct EpochSteps {
  LoaderOptions train_options;
  int64_t steps_per_epoch = 0;
  int64_t full_steps = 0;
};

EpochSteps epoch_steps(const RunConfig& config, const DistContext& dist, int64_t train_images) {
  const int64_t shard_size = (train_images + dist.world_size - 1) / dist.world_size;
  EpochSteps epoch{loader_options(config, dist, config.max_steps), 0, 0};
  epoch.full_steps = batches_in_epoch(shard_size, loader_options(config, dist, std::nullopt));
  epoch.steps_per_epoch = batches_in_epoch(shard_size, epoch.train_options);
  if (config.inject_fault_step && *config.inject_fault_step >= epoch.steps_per_epoch * config.epochs) {
    throw InputError("--inject-fault-step " + std::to_string(*config.inject_fault_step) + ": the row runs " +
                     std::to_string(epoch.steps_per_epoch * config.epochs) + " steps");
  }
  check_trace_steps(config, epoch.steps_per_epoch * config.epochs);
  return epoch;
}

// --nvtx ops: LibTorch's own range per op, as Python's torch.autograd.profiler.emit_nvtx.
std::optional<torch::autograd::profiler::TLSLegacyProfilerGuard> op_ranges(const RunConfig& config) {
  if (config.nvtx != NvtxMode::ops) return std::nullopt;
  return std::optional<torch::autograd::profiler::TLSLegacyProfilerGuard>(
      std::in_place, torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::NVTX));
}

// A row's epochs and their steps: what surrounds the strategy's train_step (the step's turn,
// trace, timing, profiler range and injected faults) and what the steps leave behind.
class TrainingLoop {
 public:
  TrainingLoop(const RunConfig& config, const DistContext& dist, const ImageSet& train, PreparedRow& row,
               BatchLoader& loader, int64_t steps_per_epoch)
      : config_(config), dist_(dist), train_(train), strategy_(*row.strategy), timer_(*row.timer),
        faults_(row.faults), loader_(loader), steps_per_epoch_(steps_per_epoch),
        progress_(config.row_name(), steps_per_epoch * config.epochs, config.log_interval_steps, dist.is_main()),
        profiler_(config, dist.device), op_ranges_(op_ranges(config)), turns(config, dist), trace(config, dist) {}

  // SIGINT or SIGTERM stops the row at the next step: the finished steps are kept. A step that
  // fails because a peer stopped first (its collective broke) counts as interrupted too.
  void run() {
    for (int64_t epoch = 0; epoch < config_.epochs && interrupted.empty(); ++epoch) train_epoch(epoch);
    turns.end();
    progress_.finish();
    op_ranges_.reset();
  }

 private:
  const RunConfig& config_;
  const DistContext& dist_;
  const ImageSet& train_;
  Strategy& strategy_;
  PhaseTimer& timer_;
  FaultInjection& faults_;
  BatchLoader& loader_;
  const int64_t steps_per_epoch_;
  Progress progress_;
  ProfilerRange profiler_;
  std::optional<torch::autograd::profiler::TLSLegacyProfilerGuard> op_ranges_;

 public:
  // Built after the op ranges, as a row always built them (the trace prepares PyTorch's profiler);
  // the run reads both after training: the lockstep waits and the trace.
  StepTurns turns;
  StepTrace trace;
  // What the steps left: their records, this rank's train time and images, and how a signal
  // stopped the row (empty when it ran to the end).
  std::vector<StepRecord> steps;
  double train_time_s = 0;
  int64_t local_images = 0;
  std::string interrupted;

 private:
  int64_t global_step_ = 0;
  std::vector<PendingStep> pending_;

  void train_epoch(int64_t epoch) {
    NamedScope epoch_range("epoch", epoch);
    // The tutorial's clock: wall time around the epoch, loader start-up included.
    const auto epoch_start = Clock::now();
    const double waited_before_s = turns.waited_s();
    const double switched_before_s = trace.switch_s();
    timer_.mark_epoch_start();
    loader_.start_epoch(EpochPlan{
        train_shard_indices(train_.size(), config_.seed, epoch, Shard{dist_.rank, dist_.world_size}),
        random_augmentation(config_.seed, epoch, AugmentationStream::train, train_.size(), config_.crop_padding)});
    for (int64_t step = 0; train_step(epoch, step); ++step, ++global_step_) {
    }
    resolve();
    synchronize(dist_.device);
    train_time_s += seconds_since(epoch_start) - (turns.waited_s() - waited_before_s) -
                    (trace.switch_s() - switched_before_s);
  }

  // One step of `epoch`: its turn, its batch, its training and its record. False where the epoch
  // ends instead: the loader's last call (past its steps) found no batch, or a signal came.
  bool train_step(int64_t epoch, int64_t step) {
    faults_.before_step(global_step_);
    if (interruption_signal() != 0 || !turns.before_step(step, steps_per_epoch_, timer_)) {
      interrupted = std::string(::strsignal(interruption_signal())) + " after " + std::to_string(global_step_) + " steps";
      return false;
    }
    // Starting and stopping the profiler belong to no step (the loader's last call of an
    // epoch, past its steps, is none either).
    const bool step_runs = step < steps_per_epoch_;
    if (trace.between_steps(global_step_, step_runs)) timer_.mark_epoch_start();
    // PyTorch's profiler names a step ProfilerStep#N, which HTA and TensorBoard read as steps.
    NamedScope step_range("step", global_step_,
                          trace.running() && step_runs ? "ProfilerStep#" + std::to_string(global_step_) : std::string());
    timer_.set_step(global_step_);
    std::optional<Batch> batch = load_batch();
    if (!batch) return false;
    profiler_.before_step(global_step_);
    PendingStep p;
    if (!train_on(*batch, p)) return false;
    p.timing = timer_.finish_step();
    profiler_.after_step(global_step_);
    p.record.epoch = epoch;
    p.record.step = step;
    p.record.images = batch->size();
    local_images += batch->size();
    pending_.push_back(std::move(p));
    if (config_.sync_every_step || (global_step_ + 1) % config_.log_interval_steps == 0) resolve();
    turns.after_step(global_step_, dist_.device);
    return true;
  }

  // The step's batch on the device, timed as its data phase; nullopt past the epoch's end.
  std::optional<Batch> load_batch() {
    PhaseScope data_phase(timer_, Phase::data);
    std::optional<Batch> batch = loader_.next();
    if (batch) batch = to_device(std::move(*batch), dist_.device, config_.channels_last);
    if (batch) (void)faults_.stretch_in(SlowedPhase::data);
    return batch;
  }

  // The strategy's step on `batch` (its loss into `p`), with the collective wait it spent and
  // any injected slowdown. False when a signal broke the step (`interrupted` says how).
  bool train_on(const Batch& batch, PendingStep& p) {
    try {
      const auto training_start = Clock::now();
      faults_.training_starts();
      // Only this step's training counts as its wait.
      if (dist_.comm) (void)dist_.comm->take_collective_wait();
      p.loss = strategy_.train_step(batch);
      if (dist_.comm) {
        timer_.add([wait = dist_.comm->take_collective_wait()](PhaseSeconds& phases) {
          phases.collective_wait_s += wait();
        });
      }
      // On a GPU the step returns before the device has run it: the slowdown is a fraction of
      // the step's work, so wait for the work before measuring it.
      if (faults_.slows_steps()) synchronize(dist_.device);
      if (faults_.slows(SlowedPhase::optimizer)) {
        PhaseScope slowed(timer_, Phase::optimizer);
        NamedScope range("injected slowdown", global_step_);
        (void)faults_.stretch(seconds_since(training_start));
      }
      faults_.training_took(seconds_since(training_start));
    } catch (const std::exception& e) {
      if (interruption_signal() == 0) throw;
      interrupted = std::string(::strsignal(interruption_signal())) + " in step " + std::to_string(global_step_) +
                    " (" + e.what() + ")";
      timer_.finish_step();
      return false;
    }
    return true;
  }

  // The pending steps' losses and timings, read back from the device together, recorded.
  void resolve() {
    for (auto& p : pending_) {
      const StepTiming timing = p.timing();
      p.record.time_s = timing.time_s;
      p.record.phases = timing.phases;
      p.record.loss = p.loss.item<double>();
      steps.push_back(p.record);
      progress_.update(static_cast<int64_t>(steps.size()), p.record.loss,
                       static_cast<double>(p.record.images * dist_.world_size) / p.record.time_s);
    }
    pending_.clear();
  }
};

// What this rank measured of its training, before any evaluation.
RowMeasurements training_measurements(const RunConfig& config, const DistContext& dist, const DatasetSplits& data,
                                      const EpochSteps& epoch, TrainingLoop& training, const Strategy& strategy) {
  RowMeasurements m;
  m.steps = std::move(training.steps);
  m.train_time_s = training.train_time_s;
  m.steps_per_epoch = epoch.steps_per_epoch;
  m.full_steps_per_epoch = epoch.full_steps;
  m.local_images = training.local_images;
  for (const auto& device : strategy.devices()) {
    m.peak_memory_bytes = std::max(m.peak_memory_bytes, peak_memory_bytes(device));
  }
  m.peak_memory_source = peak_memory_source(dist.device);
  m.device = dist.device.str();
  m.dataset = data.kind;
  m.dataset_origin = data.origin;
  m.train_images = data.train.size();
  if (dist.is_main()) m.train_flops_per_image = model_train_flops(config);
  return m;
}

// The trained model's accuracy over every rank's test shard, and every rank's timings: both
// collectives. Rank 0 saves the model where --save-checkpoint says.
void evaluate_row(const RunConfig& config, const DistContext& dist, const ImageSet& test, PreparedRow& row,
                  RowMeasurements& m) {
  const EvalCounts eval = evaluate(config, dist, test, row.strategy->eval_model());
  if (dist.is_main() && !config.save_checkpoint.empty()) save_checkpoint(*row.model.ptr(), config.save_checkpoint);
  m.eval_correct = eval.correct;
  m.eval_seen = eval.seen;
  m.eval_cut = eval.cut;
  if (dist.comm) {
    m.ranks = gather_rank_steps(m.train_time_s, m.peak_memory_bytes, steady_steps(m.steps, config), dist);
  }
}

// The finished row's result: its measurements assembled, with what only the run itself knows
// (its lockstep waits, its trace, the strategy's own details).
RunResult record_row(const RunConfig& config, int64_t world_size, RowMeasurements m, const PreparedRow& row,
                     const StepTurns& turns, TraceRecord trace_record) {
  RunResult result = assemble_result(config, world_size, std::move(m));
  turns.record(result);
  if (trace_record.traced()) {
    add_step_times(trace_record, result.step_records, result.step_time_s.p50, config.warmup_steps);
    result.trace = std::move(trace_record);
  }
  result.strategy_details = row.strategy->details();
  if (config.amp == AmpMode::fp16) {
    result.strategy_details["loss_scale"] = row.precision.current_scale();
    result.strategy_details["skipped_steps"] = row.precision.skipped_steps();
  }
  result.strategy_details["optimizer"] = std::string(enum_name(kSgdImplNames, config.sgd));
  return result;
}

}  // namespace

RunResult run_row(const RunConfig& config, const DistContext& dist, const DatasetSplits& data,
                  Clock::time_point row_start) {
  nvtx::set_enabled(config.nvtx != NvtxMode::off);
  nvtx::initialize();
  NamedScope row_range("row " + config.row_name(), dist.rank);
  const StrategyInfo& strategy_info = find_strategy(config.strategy);
  if (config.threads > 0) at::set_num_threads(static_cast<int>(config.threads));
  apply_device_settings(config);
  reset_peak_memory(dist.device);
  PreparedRow row(config, dist, strategy_info);

  const EpochSteps epoch = epoch_steps(config, dist, data.train.size());
  auto loader = make_loader(config.loader, data.train, epoch.train_options);
  TrainingLoop training(config, dist, data.train, row, *loader, epoch.steps_per_epoch);
  training.run();
  RowMeasurements m = training_measurements(config, dist, data, epoch, training, *row.strategy);
  if (!training.interrupted.empty()) {
    // No evaluation and no collective: the other ranks may be gone.
    RunResult kept = assemble_result(config, dist.world_size, std::move(m));
    training.turns.record(kept);
    kept.status = RunStatus::interrupted;
    kept.reason = "interrupted by " + training.interrupted + "; the finished steps are kept";
    kept.total_time_s = seconds_since(row_start);
    return kept;
  }

  TraceRecord trace_record = training.trace.save();
  evaluate_row(config, dist, data.test, row, m);
  RunResult result = record_row(config, dist.world_size, std::move(m), row, training.turns, std::move(trace_record));
  result.total_time_s = seconds_since(row_start);
  return result;
}

}  // namespace ddpbench
