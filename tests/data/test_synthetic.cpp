#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include "data/synthetic.hpp"

namespace ddpbench {
namespace {

TEST(Synthetic, ShapesTypesAndOrigin) {
  const auto s = make_synthetic({5, 300, 100});
  EXPECT_EQ(s.train.images.sizes(), (std::vector<int64_t>{300, 3, 32, 32}));
  EXPECT_EQ(s.train.images.scalar_type(), at::kByte);
  EXPECT_EQ(s.test.labels.sizes(), (std::vector<int64_t>{100}));
  EXPECT_EQ(s.train.labels.scalar_type(), at::kLong);
  EXPECT_EQ(s.kind, "synthetic");
  EXPECT_EQ(s.origin, "synthetic seed=5 train=300 test=100");
  EXPECT_GE(s.train.labels.min().item<int64_t>(), 0);
  EXPECT_LE(s.train.labels.max().item<int64_t>(), 9);
}

TEST(Synthetic, DeterministicFromTheSeed) {
  const auto a = make_synthetic({11, 200, 50});
  const auto b = make_synthetic({11, 200, 50});
  const auto c = make_synthetic({12, 200, 50});
  EXPECT_TRUE(at::equal(a.train.images, b.train.images));
  EXPECT_TRUE(at::equal(a.test.labels, b.test.labels));
  EXPECT_FALSE(at::equal(a.train.images, c.train.images));
  // A bigger set starts with the same images: each image depends on its index alone.
  const auto bigger = make_synthetic({11, 400, 50});
  EXPECT_TRUE(at::equal(bigger.train.images.narrow(0, 0, 200), a.train.images));
  // Train and test draw from different streams.
  EXPECT_FALSE(at::equal(a.train.images.narrow(0, 0, 50), a.test.images));
}

TEST(Synthetic, ClassesAreBalancedAndPixelsSpread) {
  const auto s = make_synthetic({0, 20000, 100});
  const auto counts = at::bincount(s.train.labels, {}, 10);
  EXPECT_GT(counts.min().item<int64_t>(), 1800);
  EXPECT_LT(counts.max().item<int64_t>(), 2200);
  const auto pixels = s.train.images.to(at::kFloat);
  EXPECT_GT(pixels.std().item<double>(), 30.0);
  EXPECT_GT(pixels.mean().item<double>(), 80.0);
  EXPECT_LT(pixels.mean().item<double>(), 175.0);
}

// Learnable: even a nearest-class-mean classifier, fitted on train and scored on test,
// does far better than the 10 % of guessing.
TEST(Synthetic, ClassStructureIsLearnable) {
  const auto s = make_synthetic({0, 5000, 1000});
  const auto train = s.train.images.to(at::kFloat).flatten(1);
  const auto test = s.test.images.to(at::kFloat).flatten(1);
  std::vector<at::Tensor> means;
  for (int64_t c = 0; c < 10; ++c) means.push_back(train.index({s.train.labels == c}).mean(0));
  const auto predicted = at::cdist(test, at::stack(means)).argmin(1);
  const double accuracy = predicted.eq(s.test.labels).to(at::kFloat).mean().item<double>();
  EXPECT_GT(accuracy, 0.3);
}

}  // namespace
}  // namespace ddpbench
