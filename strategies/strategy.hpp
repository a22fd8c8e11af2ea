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

#include <nlohmann/json.hpp>
#include <torch/nn/modules/container/any.h>
#include <torch/optim/optimizer.h>

#include "data/batch_loader.hpp"
#include "harness/dist_context.hpp"
#include "harness/phase_timer.hpp"
#include "harness/run_config.hpp"
#include "strategies/mixed_precision.hpp"

namespace ddpbench {

struct TrainingSetup {
  torch::nn::AnyModule model;        // on dist.device, initialised (identically on every rank)
  torch::optim::Optimizer& optimizer;  // over the model's parameters
  const DistContext& dist;
  const RunConfig& config;
  PhaseTimer& timer;                 // phases of a step: forward, backward, comm, optimizer
  MixedPrecision& precision;         // autocast, loss scaling and the optimizer step
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Once, before the first step: broadcast parameters, register hooks, build replicas.
  virtual void prepare(TrainingSetup& setup) = 0;
  /// One optimizer step on `batch` (on the training device). Returns the loss as a
  /// 0-d tensor, without waiting for the device.
  virtual at::Tensor train_step(const Batch& batch) = 0;
  /// The module to evaluate after training.
  virtual torch::nn::AnyModule eval_model() = 0;
  /// Facts for the report that only the strategy knows (its implementation, buckets...).
  [[nodiscard]] virtual nlohmann::json details() const { return nlohmann::json::object(); }
};

struct StrategyInfo {
  std::string name;
  std::string description;
  bool distributed = false;  // one process per device: the launcher starts it as ranks
  std::function<std::unique_ptr<Strategy>()> make;
  /// Before a row starts: why it cannot run on this machine (the row is then skipped), or
  /// nullopt; throws InputError for bad input only this strategy can see. May be empty.
  std::function<std::optional<std::string>(const RunConfig&)> preflight;
  /// The device the model lives on, when the strategy chooses it (dp: its first device).
  std::function<c10::Device(const RunConfig&)> primary_device;
};

/// The strategies, registered explicitly in strategies/registry.cpp.
std::span<const StrategyInfo> strategy_registry();

/// Throws InputError listing the known strategies when `name` is not one of them.
const StrategyInfo& find_strategy(std::string_view name);

/// The tutorial's criterion: cross-entropy, mean over the batch.
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels);

/// The first part of a step, as every strategy takes it, in the forward phase: clear the
/// gradients, then, under the run's autocast, `forward` on the batch's images and the loss.
at::Tensor forward_loss(TrainingSetup& setup, const Batch& batch,
                        const std::function<at::Tensor(const at::Tensor& images)>& forward);

/// The rest of a step once forward has produced `loss`, as every strategy takes it, each
/// in its phase: backward of the (scaled) loss, `communicate` (the strategy's gradient
/// reduction; may be empty), then the precision-aware optimizer step. Returns the loss,
/// detached, without waiting for the device.
at::Tensor backward_and_step(TrainingSetup& setup, const at::Tensor& loss, const std::vector<at::Tensor>& parameters,
                             const std::function<void()>& communicate = {});

}  // namespace ddpbench
