#include "strategies/ddp.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/cuda.h>
#include <torch/version.h>

#include "harness/base/clock.hpp"
#include "harness/base/statistics.hpp"
#include "harness/distributed/communicator.hpp"
#include "models/checkpoint.hpp"
#include "models/sync_batch_norm.hpp"
#include "strategies/bucket_allreduce_hook.hpp"

namespace ddpbench {
namespace {

// torch.nn.parallel.DistributedDataParallel's constants (distributed.py, 2.11).
constexpr std::size_t kBroadcastBucketBytes = 250 * 1024 * 1024;  // broadcast_bucket_size
constexpr int64_t kDefaultFirstBucketBytes = 1024 * 1024;         // dist._DEFAULT_FIRST_BUCKET_BYTES
constexpr double kDefaultBucketCapMb = 25;                        // bucket_cap_mb=None
constexpr int kAloneRuns = 3;  // backward alone and the allreduce alone, each: the median kept

std::vector<int64_t> parse_sizes(const std::string& joined) {
  std::vector<int64_t> sizes;
  std::stringstream in(joined);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.find_first_not_of(' ') != std::string::npos) sizes.push_back(std::stoll(item));
  }
  return sizes;
}

double nanoseconds_to_seconds(const std::map<std::string, int64_t>& ints, const std::string& key) {
  const auto it = ints.find(key);
  return it == ints.end() ? kNotMeasured : static_cast<double>(it->second) / 1e9;
}

// NCCL picks its own interface; the row records the user's choice where one was made.
nlohmann::json nccl_socket_ifname() {
  const char* value = std::getenv("NCCL_SOCKET_IFNAME");
  return value != nullptr && *value != '\0' ? nlohmann::json(value) : nlohmann::json(nullptr);
}

std::string comm_hook_description(CommHook hook) {
  switch (hook) {
    case CommHook::allreduce: return "ddpbench timed allreduce (sum scaled by 1/world, as the built-in one)";
    case CommHook::fp16: return "ddpbench timed fp16 compression (as default_hooks.fp16_compress_hook)";
    case CommHook::bf16: return "ddpbench timed bf16 compression (as default_hooks.bf16_compress_hook)";
    case CommHook::builtin_fp16: return "the Reducer's built-in FP16_COMPRESS (per-bucket times not measured)";
  }
  return "?";
}

// Seconds per gradient byte that a compression hook spends on the rank's own device: the cast
// for the wire with its division, and the copy back into the bucket, as BucketAllreduceHook
// does them (the fastest of three tries on up to 4 MiB of gradients). The tuning advisor
// charges a compressed setting with it; a row measured without compression never paid it.
double compression_seconds_per_byte(at::ScalarType wire, int64_t gradient_bytes, int64_t world, c10::Device device) {
  const int64_t elements = std::clamp<int64_t>(gradient_bytes / 4, 1, int64_t{1} << 20);
  const at::Tensor bucket = at::randn({elements}, at::TensorOptions().device(device));
  double best = std::numeric_limits<double>::infinity();
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const auto started = Clock::now();
    at::Tensor on_wire = bucket.to(wire).div_(world);
    bucket.copy_(on_wire);
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    best = std::min(best, seconds_between(started, Clock::now()));
  }
  return best / static_cast<double>(elements * 4);
}

class DdpStrategy final : public Strategy {
 public:
  at::Tensor train_step(const Batch& batch) override {
    TrainingSetup& s = setup();
    timeline_->start_step(s.timer.step());
    last_batch_ = batch;
    const at::Tensor loss = forward_loss(batch, [&](const at::Tensor& images) { return ddp_forward(images); });
    timeline_->backward_started();
    try {
      return backward_and_step(loss, [&] { account_communication(); });
    } catch (const CollectiveError&) {
      throw;
    } catch (const std::exception& e) {
      // The Reducer rethrows a bucket's failed allreduce from backward: name the bucket.
      const std::vector<std::size_t> unfinished = timeline_->unfinished_buckets();
      if (unfinished.empty()) throw;
      throw CollectiveError(comm_->describe_failure("allreduce of bucket " + std::to_string(unfinished.front()), e));
    }
  }

  // As DDP's forward in eval mode right after training: rank 0's buffers first, so every
  // rank evaluates the same model (it matters without SyncBatchNorm).
  torch::nn::AnyModule eval_model() override {
    measure_alone();
    sync_buffers();
    return setup().model;
  }

  [[nodiscard]] nlohmann::json details() const override {
    const at::DDPLoggingData logged = logger_->get_ddp_logging_data();
    const StrategyOptions& o = setup().options;
    nlohmann::json d = {
        {"implementation", std::string("PyTorch DistributedDataParallel's engine (c10d::Reducer, LibTorch ") +
                               TORCH_VERSION + ") driven from C++"},
        {"engine", "c10d::Reducer"},
        {"backend", comm_->backend_name()},
        {"gloo_interface", comm_->network_interface().empty() ? nlohmann::json(nullptr)
                                                              : nlohmann::json(comm_->network_interface())},
        {"nccl_socket_ifname", nccl_socket_ifname()},
        {"nccl_flight_recorder", comm_->flight_recorder_prefix().empty()
                                     ? nlohmann::json(nullptr)
                                     : nlohmann::json(comm_->flight_recorder_prefix() + "<rank>, on a timeout")},
        {"overlap", o.overlap},
        {"comm_hook", comm_hook_description(o.comm_hook)},
        {"sync_bn_layers", sync_bn_layers_},
        // What project and advise cost the collectives inside a step by at other world sizes.
        {"sync_bn_features", sync_bn_features_},
        {"broadcast_buffers", true},
        {"broadcast_buffer_bytes", broadcast_buffer_bytes_},
        {"find_unused_parameters", o.find_unused_parameters},
        {"gradient_as_bucket_view", o.gradient_as_bucket_view},
        {"bucket_cap_bytes", bucket_cap_bytes_},
        {"first_bucket_cap_bytes", first_bucket_cap_bytes_},
        {"bucket_bytes_initial", initial_bucket_bytes_},
        {"bucket_bytes", logger_->get_bucket_sizes()},
        {"buckets_rebuilt", rebuilt_},
        {"buckets", logger_->get_bucket_sizes().size()},
        {"buckets_overlapping_backward_last_step", timeline_->last_step_figures().launched_before_last_gradient},
    };
    int64_t gradient_bytes = 0;
    for (int64_t b : logger_->get_bucket_sizes()) gradient_bytes += b;
    d["gradient_bytes_per_step"] = gradient_bytes;
    // What a projection to other clusters needs (ddpbench project): when backward makes each
    // bucket ready, how long its allreduce took here, and backward's own compute.
    const BucketTimelineSummary timeline = timeline_->summary(setup().options.warmup_steps);
    nlohmann::json buckets = nlohmann::json::array();
    const std::vector<int64_t> sizes = logger_->get_bucket_sizes();
    for (const BucketSpan& b : timeline.buckets) {
      buckets.push_back({{"bucket", b.bucket},
                         {"bytes", b.bucket < sizes.size() ? nlohmann::json(sizes[b.bucket]) : nlohmann::json(nullptr)},
                         {"ready_s", b.ready_s},
                         {"start_s", b.start_s},
                         {"allreduce_s", b.end_s - b.start_s},
                         {"wire_s", b.wire_s}});
    }
    d["bucket_timeline"] = buckets;
    // What the tuning advisor (ddpbench advise) lays buckets of any size out from: every
    // gradient in the order the Reducer rebuilt its buckets from, and when it was ready.
    nlohmann::json gradients = nlohmann::json::array();
    for (const GradientReady& g : timeline.gradients) {
      gradients.push_back({{"parameter", g.parameter},
                           {"name", parameter_names_.at(g.parameter)},
                           {"bytes", gradient_bytes_.at(g.parameter)},
                           {"dtype", gradient_dtypes_.at(g.parameter)},
                           {"ready_s", g.ready_s},
                           {"alone_ready_s", alone_ready_s_.count(g.parameter) > 0
                                                 ? nlohmann::json(alone_ready_s_.at(g.parameter))
                                                 : nlohmann::json(nullptr)}});
    }
    d["gradient_timeline"] = gradients;
    // Backward's compute with no allreduce beside it (the median of kAloneRuns backwards after
    // the timed steps; every run's, fastest first).
    d["backward_alone_s"] = backward_alone_s_;
    d["backward_alone_runs_s"] = backward_alone_runs_s_;
    // And the largest bucket's allreduce alone, as fp32, fp16 and bf16.
    d["allreduce_alone"] = allreduce_alone_;
    d["allreduce_alone_runs_s"] = allreduce_alone_runs_s_;  // each of its runs, fastest first
    d["compression_s_per_byte"] = compression_s_per_byte_;
    d["bucket_timeline_steps"] = timeline.steps;
    d["backward_compute_s"] = timeline.backward_compute_s;
    // The Reducer's own runtime statistics, sampled at its iterations 1-10 and every 100th.
    d["reducer_avg_forward_compute_s"] = nlohmann::json(nanoseconds_to_seconds(logged.ints_map, "avg_forward_compute_time"));
    d["reducer_avg_backward_compute_s"] = nanoseconds_to_seconds(logged.ints_map, "avg_backward_compute_time");
    d["reducer_avg_backward_comm_s"] = nanoseconds_to_seconds(logged.ints_map, "avg_backward_comm_time");
    d["reducer_avg_backward_compute_comm_overlap_s"] =
        nanoseconds_to_seconds(logged.ints_map, "avg_backward_compute_comm_overlap_time");
    for (auto& [key, value] : d.items()) {
      if (value.is_number_float() && !std::isfinite(value.get<double>())) value = nullptr;
    }
    return d;
  }

 private:
  void on_prepare() override {
    TrainingSetup& s = setup();
    comm_ = s.dist.comm;
    TORCH_CHECK(comm_ != nullptr, "ddp: no communicator (the run command creates one for every rank)");
    group_ = comm_->process_group();
    torch::nn::Module& module = *s.model.ptr();
    if (s.options.sync_bn) sync_bn_layers_ = convert_sync_batch_norm(module, comm_);
    const std::vector<at::Tensor> params = broadcast_from_rank_zero(module);
    watch_gradients(params, s.dist.device);
    measure_compression(s.dist);
    make_reducer(params);
    buffers_ = module.buffers(/*recurse=*/true);
    sync_bn_features_ = synchronised_features(module);
    for (const auto& b : buffers_) broadcast_buffer_bytes_ += b.numel() * b.element_size();
  }

  // DistributedDataParallel.__init__: the parameters that need gradients (returned, their names
  // kept), checked alike on every rank, then rank 0's parameters and buffers everywhere.
  std::vector<at::Tensor> broadcast_from_rank_zero(torch::nn::Module& module) {
    std::vector<at::Tensor> params;
    for (const auto& named : module.named_parameters(/*recurse=*/true)) {
      if (!named.value().requires_grad()) continue;
      params.push_back(named.value());
      parameter_names_.push_back(named.key());
    }
    std::vector<at::Tensor> state;
    for (const auto& [name, tensor] : state_dict(module)) state.push_back(tensor);
    comm_->guarded("broadcast", [&] {
      c10d::verify_params_across_processes(group_, params, std::nullopt);
      at::NoGradGuard no_grad;
      c10d::broadcast_coalesced(group_, state, kBroadcastBucketBytes, 0);
    });
    return params;
  }

  // When backward makes each gradient ready, for the tuning advisor: a hook on each
  // parameter's gradient accumulator, added before the Reducer adds its own so that it runs
  // first. The accumulators are kept: the Reducer finds these, with the hooks on them.
  void watch_gradients(const std::vector<at::Tensor>& params, const c10::Device& device) {
    timeline_ = std::make_shared<BucketTimeline>(device);
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
      accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [timeline = std::weak_ptr<BucketTimeline>(timeline_), i](const torch::autograd::variable_list& outputs,
                                                                  const torch::autograd::variable_list& /*inputs*/) {
            if (auto t = timeline.lock()) t->gradient_ready(i);
            return outputs;
          }));
      gradient_accumulators_.push_back(std::move(accumulator));
      gradient_bytes_.push_back(params[i].numel() * static_cast<int64_t>(params[i].element_size()));
      gradient_dtypes_.push_back(std::string(c10::toString(params[i].scalar_type())));
    }
  }

  // What compressing every gradient to fp16 and to bf16 costs per byte, for the tuning advisor.
  void measure_compression(const DistContext& dist) {
    int64_t gradient_bytes = 0;
    for (int64_t b : gradient_bytes_) gradient_bytes += b;
    const auto world = static_cast<int64_t>(dist.world_size);
    compression_s_per_byte_ = {
        {"fp16", compression_seconds_per_byte(at::kHalf, gradient_bytes, world, dist.device)},
        {"bf16", compression_seconds_per_byte(at::kBFloat16, gradient_bytes, world, dist.device)}};
  }

  // _ddp_init_helper: one bucket for iteration 1 (the order gradients become ready is not
  // known yet), buckets of the cap from the order of iteration 1 after the rebuild. The
  // first bucket is capped at 1 MiB with the default cap, at the cap otherwise, as PyTorch.
  void make_reducer(const std::vector<at::Tensor>& params) {
    const StrategyOptions& o = setup().options;
    const c10::Device& device = setup().dist.device;
    bucket_cap_bytes_ = static_cast<int64_t>(o.bucket_mb * 1024 * 1024);
    first_bucket_cap_bytes_ = o.bucket_mb == kDefaultBucketCapMb ? kDefaultFirstBucketBytes : bucket_cap_bytes_;
    std::vector<std::size_t> limits{std::numeric_limits<std::size_t>::max()};
    if (o.find_unused_parameters) {
      limits = o.bucket_mb == kDefaultBucketCapMb
                   ? std::vector<std::size_t>{static_cast<std::size_t>(kDefaultFirstBucketBytes),
                                              static_cast<std::size_t>(bucket_cap_bytes_)}
                   : std::vector<std::size_t>{static_cast<std::size_t>(bucket_cap_bytes_)};
    }
    const std::vector<bool> expect_sparse(params.size(), false);
    auto bucket_indices = std::get<0>(c10d::compute_bucket_assignment_by_size(params, limits, expect_sparse));
    std::reverse(bucket_indices.begin(), bucket_indices.end());
    reducer_ = std::make_shared<c10d::Reducer>(params, bucket_indices, group_, expect_sparse, bucket_cap_bytes_,
                                               o.find_unused_parameters, o.gradient_as_bucket_view,
                                               std::unordered_map<std::size_t, std::string>{}, first_bucket_cap_bytes_,
                                               /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                                               /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
    logger_ = std::make_shared<c10d::Logger>(reducer_);
    reducer_->set_logger(logger_);
    const bool cuda = device.is_cuda();
    const std::vector<int> device_ids = cuda ? std::vector<int>{device.index()} : std::vector<int>{};
    logger_->set_construction_data_and_log(o.model, device_ids, cuda ? device.index() : -1,
                                           /*broadcast_buffers=*/true, sync_bn_layers_ > 0, /*static_graph=*/false);
    if (o.comm_hook == CommHook::builtin_fp16) {
      reducer_->register_builtin_comm_hook(c10d::BuiltinCommHookType::FP16_COMPRESS);
    } else {
      reducer_->register_comm_hook(std::make_unique<BucketAllreduceHook>(*comm_, device, o.overlap, o.comm_hook, timeline_));
      logger_->set_comm_hook(std::string("ddpbench timed ") + std::string(enum_name(kCommHookNames, o.comm_hook)));
    }
    initial_bucket_bytes_ = parse_sizes(logger_->get_ddp_logging_data().strs_map["bucket_sizes"]);
  }

  // DistributedDataParallel.forward: _pre_forward, the module, _post_forward.
  at::Tensor ddp_forward(const at::Tensor& images) {
    logger_->set_runtime_stats_and_log();
    reducer_->prepare_for_forward();
    // The rebuild broadcasts rank 0's bucket order (once, at iteration 2): a collective.
    comm_->guarded("DDP bucket rebuild", [&] { rebuilt_ = reducer_->rebuild_buckets() || rebuilt_; });
    sync_buffers();
    at::Tensor output = setup().model.forward<at::Tensor>(images);
    reducer_->prepare_for_backward(setup().options.find_unused_parameters ? std::vector<at::Tensor>{output}
                                                                          : std::vector<at::Tensor>{});
    return output;
  }

  // Backward on the last batch with no allreduce beside it (the Reducer ignores a backward it
  // was not prepared for), then one bucket's allreduce with no backward beside it, each
  // kAloneRuns times after the timed steps, the median run kept: on CPUs the allreduces share
  // the cores with backward's compute, and the tuning advisor needs each without the other to
  // tell what overlap costs. One run is not enough: on hosts capped by a CPU quota, rows of one
  // setting drew backward's slowdown beside the allreduces anywhere from 16 % to 47 % (65 % on
  // another link), by where one run fell against the quota's period, and every projection of
  // the row carried that draw. Backward runs from one forward, its graph kept for all but the
  // last. Every rank does it (SyncBatchNorm's collectives stay matched); the running statistics
  // it moves are put back.
  void measure_alone() {
    if (!last_batch_ || alone_measured_) return;
    alone_measured_ = true;
    TrainingSetup& s = setup();
    std::vector<at::Tensor> saved;
    {
      at::NoGradGuard no_grad;
      for (const auto& b : buffers_) saved.push_back(b.clone());
    }
    at::Tensor loss;
    {
      auto autocast = s.precision.autocast();
      loss = classification_loss(s.model.forward<at::Tensor>(last_batch_->images), last_batch_->labels);
    }
    // One forward, its graph kept for every backward but the last: the runs time backward only.
    std::vector<std::pair<double, std::vector<GradientReady>>> runs;  // backward's end, its gradients
    for (int run = 0; run < kAloneRuns; ++run) {
      for (const auto& p : parameters()) p.mutable_grad().reset();
      timeline_->start_alone_backward();
      timeline_->backward_started();
      loss.backward({}, /*retain_graph=*/run + 1 < kAloneRuns);
      if (s.dist.device.is_cuda()) torch::cuda::synchronize(s.dist.device.index());
      std::vector<GradientReady> gradients = timeline_->finish_alone_backward();
      double end_s = kNotMeasured;
      for (const GradientReady& g : gradients) end_s = std::isfinite(end_s) ? std::max(end_s, g.ready_s) : g.ready_s;
      if (std::isfinite(end_s)) runs.emplace_back(end_s, std::move(gradients));
    }
    for (const auto& p : parameters()) p.mutable_grad().reset();
    {
      at::NoGradGuard no_grad;
      for (std::size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(saved[i]);
    }
    if (!runs.empty()) {
      std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& run : runs) backward_alone_runs_s_.push_back(run.first);
      const auto& [end_s, gradients] = runs[(runs.size() - 1) / 2];
      backward_alone_s_ = end_s;
      for (const GradientReady& g : gradients) alone_ready_s_[g.parameter] = g.ready_s;
    }
    measure_allreduce_alone();
  }

  // The largest bucket's allreduce with nothing beside it, as fp32 and as the fp16 and bf16
  // hooks put it on the wire (each the median of kAloneRuns): the link alone, and what
  // compression saves on it (half the bytes need not be half the time: Gloo sums half-precision
  // values on the CPU).
  void measure_allreduce_alone() {
    const std::vector<int64_t> sizes = logger_->get_bucket_sizes();
    if (sizes.empty() || setup().dist.world_size < 2) return;
    const int64_t elements = *std::max_element(sizes.begin(), sizes.end()) / 4;
    const c10::Device device = setup().dist.device;
    nlohmann::json alone = {{"bytes", elements * 4}, {"runs", kAloneRuns}};
    nlohmann::json every_run = nlohmann::json::object();
    for (const auto& [name, dtype] : {std::pair{"fp32_s", at::kFloat}, std::pair{"fp16_s", at::kHalf},
                                      std::pair{"bf16_s", at::kBFloat16}}) {
      std::vector<at::Tensor> tensors{at::zeros({elements}, at::TensorOptions().dtype(dtype).device(device))};
      std::vector<double> runs;
      for (int run = 0; run < kAloneRuns; ++run) {
        comm_->guarded("allreduce alone", [&] {
          if (device.is_cuda()) torch::cuda::synchronize(device.index());
          const auto started = Clock::now();
          group_->allreduce(tensors)->wait();
          if (device.is_cuda()) torch::cuda::synchronize(device.index());
          runs.push_back(seconds_between(started, Clock::now()));
        });
      }
      std::sort(runs.begin(), runs.end());
      alone[name] = median(runs);
      every_run[name] = runs;
    }
    allreduce_alone_ = alone;
    allreduce_alone_runs_s_ = every_run;
  }

  // broadcast_buffers: rank 0's running statistics on every rank.
  void sync_buffers() {
    if (buffers_.empty()) return;
    comm_->guarded("broadcast", [&] {
      at::NoGradGuard no_grad;
      c10d::broadcast_coalesced(group_, buffers_, kBroadcastBucketBytes, 0);
    });
  }

  // backward() returned once the Reducer had every bucket reduced (the wait after the last
  // gradient is inside it): that wait moves from backward to comm, and the time any
  // allreduce was in flight goes to allreduce. Read when the step's timing is resolved.
  void account_communication() {
    if (setup().options.comm_hook == CommHook::builtin_fp16) {
      // The Reducer's own hook runs out of sight: its buckets' times are not measured.
      setup().timer.add([](PhaseSeconds& phases) { phases.allreduce_s = phases.comm_s = kNotMeasured; });
      return;
    }
    setup().timer.add([figures = timeline_->finish_step()](PhaseSeconds& phases) {
      const BucketCommFigures f = figures();
      phases.allreduce_s += f.allreduce_s;
      phases.comm_s += f.exposed_s;
      phases.backward_s -= f.exposed_s;
    });
  }

  std::shared_ptr<Communicator> comm_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<c10d::Logger> logger_;
  std::shared_ptr<BucketTimeline> timeline_;
  std::vector<std::shared_ptr<torch::autograd::Node>> gradient_accumulators_;
  std::vector<std::string> parameter_names_;  // the Reducer's parameters, by its index
  std::vector<int64_t> gradient_bytes_;
  std::vector<std::string> gradient_dtypes_;
  nlohmann::json compression_s_per_byte_;
  std::optional<Batch> last_batch_;  // for the backward alone
  bool alone_measured_ = false;
  std::map<std::size_t, double> alone_ready_s_;  // by the Reducer's parameter index
  double backward_alone_s_ = kNotMeasured;
  std::vector<double> backward_alone_runs_s_;  // every run's end, fastest first
  nlohmann::json allreduce_alone_;  // the largest bucket's bytes and its allreduce's seconds, alone (medians)
  nlohmann::json allreduce_alone_runs_s_;  // every run's seconds per dtype, fastest first
  std::vector<at::Tensor> buffers_;
  int64_t sync_bn_layers_ = 0;
  std::vector<int64_t> sync_bn_features_;
  int64_t broadcast_buffer_bytes_ = 0;
  int64_t bucket_cap_bytes_ = 0;
  int64_t first_bucket_cap_bytes_ = 0;
  std::vector<int64_t> initial_bucket_bytes_;
  bool rebuilt_ = false;
};

}  // namespace

std::unique_ptr<Strategy> make_ddp_strategy(const StrategyOptions& /*options*/) {
  return std::make_unique<DdpStrategy>();
}

}  // namespace ddpbench
