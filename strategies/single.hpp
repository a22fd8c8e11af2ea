#pragma once
// `single`: one process, one device, plain SGD steps; the tutorial's baseline row.
#include <memory>

#include "strategies/strategy.hpp"

namespace ddpbench {

std::unique_ptr<Strategy> make_single_strategy(const StrategyOptions& options);

}  // namespace ddpbench
