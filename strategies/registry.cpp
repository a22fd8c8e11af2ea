#include <vector>

#include "harness/base/enum_names.hpp"
#include "strategies/cuda_graph_step.hpp"
#include "strategies/ddp.hpp"
#include "strategies/dp.hpp"
#include "strategies/single.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench {

std::span<const StrategyInfo> strategy_registry() {
  static const std::vector<StrategyInfo> strategies = {
      {"single", "one process, one device: the tutorial's baseline", false, make_single_strategy, cuda_graphs_preflight,
       {}, false, ""},
      {"dp", "DataParallel: one process, the batch scattered over its devices (--dp-impl replicas|libtorch)", false,
       make_dp_strategy, dp_preflight, [](const StrategyOptions& o) { return dp_devices(o).front(); }, false, ""},
      {"ddp", "DistributedDataParallel: PyTorch's c10d::Reducer, one process per device", true, make_ddp_strategy, {},
       {}, false, ""},
      {"torch-single", "PyTorch's own: the tutorial's loop in Python, the reference for single", false, {},
       cuda_graphs_preflight, {}, true, "single"},
      {"torch-dp", "PyTorch's own: torch.nn.DataParallel, the reference for dp (CUDA devices)", false, {},
       torch_dp_preflight, [](const StrategyOptions& o) { return dp_devices(o).front(); }, true, "dp"},
      {"torch-ddp", "PyTorch's own: torch.nn.parallel.DistributedDataParallel, the reference for ddp", true, {},
       torch_ddp_preflight, {}, true, "ddp"},
  };
  return strategies;
}

const StrategyInfo& find_strategy(std::string_view name) {
  return find_named(strategy_registry(), name, "--strategy", "strategy");
}

const StrategyInfo* pytorch_twin(std::string_view strategy) {
  for (const auto& s : strategy_registry()) {
    if (s.pytorch && s.twin_of == strategy) return &s;
  }
  return nullptr;
}

}  // namespace ddpbench
