#include "strategies/cuda_graph_step.hpp"

#include <limits>
#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#ifdef DDPBENCH_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "harness/base/clock.hpp"
#include "harness/base/step_record.hpp"

namespace ddpbench {
namespace {

#ifdef DDPBENCH_HAVE_CUDA
class CudaStepGraph final : public StepGraph {
 public:
  explicit CudaStepGraph(const c10::Device& device) : device_(device) {}

  at::Tensor capture(const std::function<at::Tensor()>& step) override {
    // A graph is captured on a stream of its own (never the legacy default stream), after the
    // work queued before it, as torch.cuda.graph does.
    c10::cuda::CUDAGuard device_guard(device_);
    const auto current = c10::cuda::getCurrentCUDAStream(device_.index());
    const auto side = c10::cuda::getStreamFromPool(false, device_.index());
    current.synchronize();
    at::Tensor loss;
    {
      c10::cuda::CUDAStreamGuard stream_guard(side);
      // Thread-local: the host loader's threads allocate pinned memory while the step is captured.
      graph_.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        loss = step();
      } catch (...) {
        // The capture is invalid already; ending it lets the stream be used again.
        try {
          graph_.capture_end();
        } catch (...) {
        }
        throw;
      }
      graph_.capture_end();
    }
    at::cuda::CUDAEvent captured;
    captured.record(side);
    captured.block(current);
    return loss;
  }

  void replay() override { graph_.replay(); }

 private:
  c10::Device device_;
  at::cuda::CUDAGraph graph_;
};
#endif

// Runs the step again on each replay, the loss copied where a graph's replay would leave it.
class RerunStepGraph final : public StepGraph {
 public:
  at::Tensor capture(const std::function<at::Tensor()>& step) override {
    step_ = step;
    loss_ = at::full({}, std::numeric_limits<float>::quiet_NaN());
    return loss_;
  }
  void replay() override {
    const at::Tensor loss = step_();
    loss_ = loss_.to(loss.options());
    loss_.copy_(loss);
  }

 private:
  std::function<at::Tensor()> step_;
  at::Tensor loss_;
};

// The eager strategy's phases, while a capture records them, would be CUDA events recorded
// inside the graph (not timed): they are muted there.
class MutablePhaseTimer final : public PhaseTimer {
 public:
  explicit MutablePhaseTimer(PhaseTimer& timer) : timer_(timer) {}
  void begin(Phase phase) override {
    if (!muted) timer_.begin(phase);
  }
  void end(Phase phase) override {
    if (!muted) timer_.end(phase);
  }
  void add(std::function<void(PhaseSeconds&)> adjust) override {
    if (!muted) timer_.add(std::move(adjust));
  }
  void mark_epoch_start() override { timer_.mark_epoch_start(); }
  std::function<StepTiming()> finish_step() override { return timer_.finish_step(); }
  bool muted = false;

 private:
  PhaseTimer& timer_;
};

bool same_shape(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && a.device() == b.device();
}

class CudaGraphStep final : public Strategy {
 public:
  CudaGraphStep(std::unique_ptr<Strategy> eager, const StrategyOptions& options, std::unique_ptr<StepGraph> graph)
      : eager_(std::move(eager)), graph_(std::move(graph)), capture_step_(cuda_graph_capture_step(options)),
        batch_size_(options.batch_size) {}

  at::Tensor train_step(const Batch& batch) override {
    const int64_t step = calls_++;
    timer_->set_step(setup().timer.step());
    if (captured_at_ >= 0 && same_shape(batch.images, static_images_) && same_shape(batch.labels, static_labels_)) {
      return replay(batch);
    }
    if (captured_at_ < 0 && step >= capture_step_ && batch.size() == batch_size_) return capture(batch, step);
    ++eager_steps_;
    return eager_->train_step(batch);
  }

  torch::nn::AnyModule eval_model() override { return eager_->eval_model(); }
  [[nodiscard]] std::vector<c10::Device> devices() const override { return eager_->devices(); }
  [[nodiscard]] nlohmann::json details() const override {
    nlohmann::json out = eager_->details();
    out["cuda_graphs"] = {{"capture_step", captured_at_ >= 0 ? nlohmann::json(captured_at_) : nlohmann::json(nullptr)},
                          {"capture_s", captured_at_ >= 0 ? nlohmann::json(capture_s_) : nlohmann::json(nullptr)},
                          {"replayed_steps", replayed_steps_},
                          {"eager_steps", eager_steps_}};
    return out;
  }

 private:
  void on_prepare() override {
    TrainingSetup& s = setup();
    if (!graph_) graph_ = make_cuda_step_graph(s.dist.device);
    timer_.emplace(s.timer);
    eager_setup_.emplace(TrainingSetup{s.model, s.optimizer, s.dist, s.options, *timer_, s.precision, s.slow_down});
    eager_->prepare(*eager_setup_);
  }

  at::Tensor capture(const Batch& batch, int64_t step) {
    const auto start = Clock::now();
    // Static inputs in the batch's own layout (channels-last stays so).
    static_images_ = batch.images.clone();
    static_labels_ = batch.labels.clone();
    timer_->muted = true;
    try {
      static_loss_ = graph_->capture([this] { return eager_->train_step(Batch{static_images_, static_labels_}); });
    } catch (const std::exception& e) {
      timer_->muted = false;
      throw std::runtime_error("--cuda-graphs: capturing step " + std::to_string(step) + " failed: " + e.what());
    }
    timer_->muted = false;
    captured_at_ = step;
    capture_s_ = seconds_since(start);
    // A capture records the step without running it: the captured batch trains by a replay.
    return replay(batch);
  }

  at::Tensor replay(const Batch& batch) {
    static_images_.copy_(batch.images, /*non_blocking=*/true);
    static_labels_.copy_(batch.labels, /*non_blocking=*/true);
    graph_->replay();
    ++replayed_steps_;
    for (const Phase phase : {Phase::forward, Phase::backward, Phase::optimizer}) {
      setup().timer.add(phase, kNotMeasured);
    }
    return static_loss_.clone();
  }

  std::unique_ptr<Strategy> eager_;
  std::unique_ptr<StepGraph> graph_;
  int64_t capture_step_;
  int64_t batch_size_;
  std::optional<MutablePhaseTimer> timer_;
  std::optional<TrainingSetup> eager_setup_;
  at::Tensor static_images_, static_labels_, static_loss_;
  int64_t calls_ = 0;
  int64_t captured_at_ = -1;
  double capture_s_ = 0;
  int64_t replayed_steps_ = 0;
  int64_t eager_steps_ = 0;
};

}  // namespace

std::unique_ptr<StepGraph> make_cuda_step_graph([[maybe_unused]] const c10::Device& device) {
#ifdef DDPBENCH_HAVE_CUDA
  return std::make_unique<CudaStepGraph>(device);
#else
  throw std::logic_error("--cuda-graphs: this build of ddpbench has no CUDA");
#endif
}

std::unique_ptr<StepGraph> make_rerun_step_graph() { return std::make_unique<RerunStepGraph>(); }

int64_t cuda_graph_capture_step(const StrategyOptions& options) { return options.warmup_steps - 1; }

std::optional<std::string> cuda_graphs_preflight(const StrategyOptions& options) {
  if (!options.cuda_graphs) return std::nullopt;
  if (options.device == "auto" && !torch::cuda::is_available()) {
    return "--cuda-graphs captures the step on a GPU, and none is visible";
  }
  return std::nullopt;
}

std::unique_ptr<Strategy> capture_in_cuda_graph(std::unique_ptr<Strategy> eager, const StrategyOptions& options,
                                                std::unique_ptr<StepGraph> graph) {
  return std::make_unique<CudaGraphStep>(std::move(eager), options, std::move(graph));
}

}  // namespace ddpbench
