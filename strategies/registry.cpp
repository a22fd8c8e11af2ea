#include <vector>

#include <torch/nn/functional/loss.h>

#include "harness/input_error.hpp"
#include "strategies/ddp.hpp"
#include "strategies/single.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench {

std::span<const StrategyInfo> strategy_registry() {
  static const std::vector<StrategyInfo> strategies = {
      {"single", "one process, one device: the tutorial's baseline", false, make_single_strategy},
      {"ddp", "DistributedDataParallel: one process per device, bucketed allreduce overlapped with backward",
       true, make_ddp_strategy},
  };
  return strategies;
}

const StrategyInfo& find_strategy(std::string_view name) {
  std::string known;
  for (const auto& strategy : strategy_registry()) {
    if (strategy.name == name) return strategy;
    known += (known.empty() ? "" : "|") + strategy.name;
  }
  throw InputError("--strategy: unknown strategy '" + std::string(name) + "' (expected " + known + ")");
}

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

}  // namespace ddpbench
