#include "data/sampler.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

namespace ddpbench {

std::vector<int64_t> train_shard_indices(int64_t dataset_size, uint64_t seed, int64_t epoch,
                                         Shard shard, bool shuffle) {
  TORCH_CHECK(dataset_size > 0, "sampler: empty dataset");
  TORCH_CHECK(shard.world_size > 0 && shard.rank >= 0 && shard.rank < shard.world_size,
              "sampler: rank ", shard.rank, " outside world of ", shard.world_size);
  std::vector<int64_t> order(static_cast<std::size_t>(dataset_size));
  if (shuffle) {
    at::Generator generator = at::detail::createCPUGenerator(seed + static_cast<uint64_t>(epoch));
    const at::Tensor perm = at::randperm(dataset_size, generator, at::kLong);
    std::copy_n(perm.data_ptr<int64_t>(), dataset_size, order.begin());
  } else {
    for (int64_t i = 0; i < dataset_size; ++i) order[static_cast<std::size_t>(i)] = i;
  }
  const int64_t per_rank = (dataset_size + shard.world_size - 1) / shard.world_size;
  const int64_t total = per_rank * shard.world_size;
  for (int64_t i = dataset_size; i < total; ++i) order.push_back(order[static_cast<std::size_t>(i % dataset_size)]);

  std::vector<int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank));
  for (int64_t i = shard.rank; i < total; i += shard.world_size) mine.push_back(order[static_cast<std::size_t>(i)]);
  return mine;
}

std::vector<int64_t> eval_shard_indices(int64_t dataset_size, Shard shard) {
  TORCH_CHECK(shard.world_size > 0 && shard.rank >= 0 && shard.rank < shard.world_size,
              "sampler: rank ", shard.rank, " outside world of ", shard.world_size);
  std::vector<int64_t> mine;
  for (int64_t i = shard.rank; i < dataset_size; i += shard.world_size) mine.push_back(i);
  return mine;
}

}  // namespace ddpbench
