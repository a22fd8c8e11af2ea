#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "data/sampler.hpp"

namespace ddpbench {
namespace {

using Indices = std::vector<int64_t>;

// Golden values from PyTorch 2.11: DistributedSampler(range(10), num_replicas=3, rank=r,
// shuffle=True, seed=7) after set_epoch(e).
TEST(Sampler, MatchesPyTorchDistributedSampler) {
  EXPECT_EQ(train_shard_indices(10, 7, 0, {0, 3}), (Indices{5, 4, 9, 2}));
  EXPECT_EQ(train_shard_indices(10, 7, 0, {1, 3}), (Indices{0, 1, 6, 5}));
  EXPECT_EQ(train_shard_indices(10, 7, 0, {2, 3}), (Indices{3, 7, 8, 0}));
  EXPECT_EQ(train_shard_indices(10, 7, 1, {0, 3}), (Indices{3, 1, 4, 9}));
  EXPECT_EQ(train_shard_indices(10, 7, 1, {1, 3}), (Indices{5, 2, 7, 3}));
  EXPECT_EQ(train_shard_indices(10, 7, 1, {2, 3}), (Indices{0, 6, 8, 5}));
  // torch.randperm(50000, generator=torch.Generator().manual_seed(0))[:8]
  const Indices single = train_shard_indices(50000, 0, 0, {0, 1});
  EXPECT_EQ(Indices(single.begin(), single.begin() + 8),
            (Indices{36044, 49165, 37807, 11341, 6091, 16904, 36293, 28026}));
}

TEST(Sampler, EveryIndexCoveredAndShardsPaddedToEqualLength) {
  for (int64_t world : {1, 2, 3, 4, 7}) {
    std::map<int64_t, int> seen;
    for (int64_t rank = 0; rank < world; ++rank) {
      const auto mine = train_shard_indices(50, 1, 0, {rank, world});
      EXPECT_EQ(static_cast<int64_t>(mine.size()), (50 + world - 1) / world) << "world " << world;
      for (auto i : mine) ++seen[i];
    }
    EXPECT_EQ(seen.size(), 50u) << "world " << world;
    int duplicates = 0;
    for (const auto& [index, count] : seen) duplicates += count - 1;
    EXPECT_EQ(duplicates, (world - 50 % world) % world) << "world " << world;  // only the padding repeats
  }
}

TEST(Sampler, EachEpochReshuffles) {
  const auto e0 = train_shard_indices(1000, 3, 0, {0, 1});
  const auto e1 = train_shard_indices(1000, 3, 1, {0, 1});
  EXPECT_NE(e0, e1);
  auto s0 = e0, s1 = e1;
  std::sort(s0.begin(), s0.end());
  std::sort(s1.begin(), s1.end());
  EXPECT_EQ(s0, s1);
  EXPECT_EQ(train_shard_indices(1000, 3, 0, {0, 1}), e0);
}

TEST(Sampler, UnshuffledIsInOrder) {
  EXPECT_EQ(train_shard_indices(5, 0, 0, {1, 2}, false), (Indices{1, 3, 0}));
}

TEST(Sampler, EvaluationVisitsEachIndexExactlyOnce) {
  for (int64_t world : {1, 2, 3, 4}) {
    std::vector<int> count(10001, 0);
    for (int64_t rank = 0; rank < world; ++rank) {
      for (auto i : eval_shard_indices(10001, {rank, world})) ++count[static_cast<std::size_t>(i)];
    }
    EXPECT_TRUE(std::all_of(count.begin(), count.end(), [](int c) { return c == 1; })) << "world " << world;
  }
}

}  // namespace
}  // namespace ddpbench
