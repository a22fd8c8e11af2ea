#include <vector>

#include "harness/base/enum_names.hpp"
#include "strategies/ddp.hpp"
#include "strategies/dp.hpp"
#include "strategies/single.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench {

std::span<const StrategyInfo> strategy_registry() {
  static const std::vector<StrategyInfo> strategies = {
      {"single", "one process, one device: the tutorial's baseline", false, make_single_strategy, {}, {}},
      {"dp", "DataParallel: one process, the batch scattered over its devices (--dp-impl replicas|libtorch)", false,
       make_dp_strategy, dp_preflight, [](const StrategyOptions& o) { return dp_devices(o).front(); }},
      {"ddp", "DistributedDataParallel: one process per device, bucketed allreduce overlapped with backward",
       true, make_ddp_strategy, {}, {}},
  };
  return strategies;
}

const StrategyInfo& find_strategy(std::string_view name) {
  return find_named(strategy_registry(), name, "--strategy", "strategy");
}

}  // namespace ddpbench
