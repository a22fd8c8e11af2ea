#pragma once
// A strategy decides how one training step is spread over devices and processes. The runner
// owns everything else (data, epochs, timing, evaluation) and drives any strategy the same
// way: prepare() once, then train_step() per batch. Options such as mixed precision are
// honoured inside the step, not strategies of their own.
#include <functional>
#include <memory>
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

namespace ddpbench {

struct TrainingSetup {
  torch::nn::AnyModule model;        // on dist.device, initialised (identically on every rank)
  torch::optim::Optimizer& optimizer;  // over the model's parameters
  const DistContext& dist;
  const RunConfig& config;
  PhaseTimer& timer;                 // phases of a step: forward, backward, comm, optimizer
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
};

/// The strategies, registered explicitly in strategies/registry.cpp.
std::span<const StrategyInfo> strategy_registry();

/// Throws InputError listing the known strategies when `name` is not one of them.
const StrategyInfo& find_strategy(std::string_view name);

/// The tutorial's criterion: cross-entropy, mean over the batch.
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace ddpbench
