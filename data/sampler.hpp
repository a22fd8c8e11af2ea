#pragma once
// Which dataset indices each process visits, in which order.
#include <cstdint>
#include <vector>

namespace ddpbench {

struct Shard {
  int64_t rank = 0;
  int64_t world_size = 1;
};

/// torch.utils.data.DistributedSampler(shuffle, seed, drop_last=False) after set_epoch(epoch):
/// the permutation torch.randperm draws from a generator seeded with seed + epoch (the same
/// numbers as PyTorch's), padded by repeating its head to a multiple of world_size, then
/// every world_size-th index starting at rank.
std::vector<int64_t> train_shard_indices(int64_t dataset_size, uint64_t seed, int64_t epoch,
                                         Shard shard, bool shuffle = true);

/// Evaluation order: rank, rank + world_size, ... below dataset_size. Unlike the train
/// sampler it adds no padding, so over all ranks each index appears exactly once.
std::vector<int64_t> eval_shard_indices(int64_t dataset_size, Shard shard);

}  // namespace ddpbench
