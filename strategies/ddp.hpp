#pragma once
// `ddp`: torch.nn.parallel.DistributedDataParallel, as PyTorch runs it: its C++ engine,
// c10d::Reducer, driven the way distributed.py drives it. One process per device;
// parameters and buffers broadcast from rank 0 at construction and buffers before every
// forward (broadcast_buffers) and before evaluation; one bucket for the first iteration,
// then buckets rebuilt from the order gradients became ready; bucket allreduces started by
// the Reducer's autograd hooks while backward runs; SyncBatchNorm where asked. LibTorch's
// C++ API has no DDP module (pytorch issue 48959): this is the wrapper around the engine.
#include <memory>

#include "strategies/strategy.hpp"

namespace ddpbench {

std::unique_ptr<Strategy> make_ddp_strategy(const StrategyOptions& options);

}  // namespace ddpbench
