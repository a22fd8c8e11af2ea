#pragma once
// A strategy decides how one training step is spread over devices and processes. The runner
// owns everything else (data, epochs, timing, evaluation) and drives any strategy the same
// way: prepare() once, then train_step() per batch. Options such as mixed precision are
// honoured inside the step, not strategies of their own.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/modules/container/any.h>
#include <torch/optim/optimizer.h>

#include "data/batch_loader.hpp"
#include "harness/distributed/dist_context.hpp"
#include "harness/timing/phase_timer.hpp"
#include "strategies/mixed_precision.hpp"
#include "strategies/strategy_options.hpp"

namespace ddpbench {

struct TrainingSetup {
  torch::nn::AnyModule model;          // on dist.device, initialised (identically on every rank)
  torch::optim::Optimizer& optimizer;  // over the model's parameters
  const DistContext& dist;
  const StrategyOptions& options;
  PhaseTimer& timer;                   // phases of a step: forward, backward, comm, optimizer
  MixedPrecision& precision;           // autocast, loss scaling and the optimizer step
  // Test only (--inject-slowdown-phase forward|backward): busy work a slowed rank does at the
  // end of forward, or at the start of backward before any gradient is ready. May be empty.
  std::function<void(Phase)> slow_down = {};
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Once, before the first step: keeps `setup` (which must outlive the strategy), then
  /// lets the strategy broadcast parameters, register hooks, build replicas.
  void prepare(TrainingSetup& setup);
  /// One optimizer step on `batch` (on the training device). Returns the loss as a
  /// 0-d tensor, without waiting for the device.
  virtual at::Tensor train_step(const Batch& batch) = 0;
  /// The module to evaluate after training: the model, unless the strategy says otherwise.
  virtual torch::nn::AnyModule eval_model() { return setup().model; }
  /// The devices the step uses (dp: every replica's); the row's peak memory is theirs.
  [[nodiscard]] virtual std::vector<c10::Device> devices() const { return {setup().dist.device}; }
  /// Facts for the report that only the strategy knows (its implementation, buckets...).
  [[nodiscard]] virtual nlohmann::json details() const { return nlohmann::json::object(); }

 protected:
  [[nodiscard]] TrainingSetup& setup() { return *setup_; }
  [[nodiscard]] const TrainingSetup& setup() const { return *setup_; }
  /// The model's parameters, in registration order.
  [[nodiscard]] const std::vector<at::Tensor>& parameters() const { return parameters_; }

  /// The first part of a step, as every strategy takes it, in the forward phase: clear the
  /// gradients (set them to none), then, under the run's autocast, `forward` on the batch's images and the loss.
  at::Tensor forward_loss(const Batch& batch, const std::function<at::Tensor(const at::Tensor& images)>& forward);
  /// The rest of a step once forward has produced `loss`, each part in its phase: backward
  /// of the (scaled) loss, `communicate` (the strategy's gradient reduction; may be empty),
  /// then the precision-aware optimizer step. Returns the loss, detached, without waiting
  /// for the device.
  at::Tensor backward_and_step(const at::Tensor& loss, const std::function<void()>& communicate = {});

 private:
  virtual void on_prepare() {}
  std::optional<TrainingSetup> setup_;
  std::vector<at::Tensor> parameters_;
};

struct StrategyInfo {
  std::string name;
  std::string description;
  bool distributed = false;  // one process per device: the launcher starts it as ranks
  /// ddpbench's implementation; empty for PyTorch's own (`pytorch` below).
  std::function<std::unique_ptr<Strategy>(const StrategyOptions&)> make;
  /// Before a row starts: why it cannot run on this machine (the row is then skipped), or
  /// nullopt; throws InputError for bad input only this strategy can see. May be empty.
  std::function<std::optional<std::string>(const StrategyOptions&)> preflight;
  /// The device the model lives on, when the strategy chooses it (dp: its first device).
  std::function<c10::Device(const StrategyOptions&)> primary_device;
  /// PyTorch's own implementation, run by strategies/pytorch/reference_rank.py (a torch-*
  /// reference row); `twin_of` is the ddpbench strategy it is the reference for.
  bool pytorch = false;
  std::string twin_of;
};

/// The strategies, registered explicitly in strategies/registry.cpp.
std::span<const StrategyInfo> strategy_registry();

/// Throws InputError listing the known strategies when `name` is not one of them.
const StrategyInfo& find_strategy(std::string_view name);

/// PyTorch's own implementation of `strategy` (torch-ddp for ddp), or null.
const StrategyInfo* pytorch_twin(std::string_view strategy);

/// The tutorial's criterion: cross-entropy, mean over the batch.
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace ddpbench
