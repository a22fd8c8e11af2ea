#pragma once
// `ddp`: DistributedDataParallel in C++ over c10d. One process per device; parameters and
// buffers broadcast from rank 0 at the start and buffers before every forward (DDP's
// broadcast_buffers); gradients averaged in buckets overlapped with backward; optional
// SyncBatchNorm. LibTorch has no C++ DDP module (pytorch issue 48959): this is it.
#include <memory>

#include "strategies/strategy.hpp"

namespace ddpbench {

std::unique_ptr<Strategy> make_ddp_strategy(const StrategyOptions& options);

/// Rank 0's values of `tensors` on every rank, one broadcast per dtype (flattened).
class Communicator;
void broadcast_from_rank0(Communicator& comm, const std::vector<at::Tensor>& tensors);

}  // namespace ddpbench
