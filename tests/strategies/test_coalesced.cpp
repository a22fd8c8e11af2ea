#include <gtest/gtest.h>

#include <algorithm>

#include <ATen/ATen.h>

#include "strategies/coalesced.hpp"

namespace ddpbench {
namespace {

TEST(Coalesced, OneTransformPerDtypeAndViewsInTheInputsOrder) {
  const std::vector<at::Tensor> tensors = {at::arange(6, at::kFloat).reshape({2, 3}), at::arange(4, at::kLong),
                                           at::full({3}, 7.0f), at::scalar_tensor(5.0, at::kDouble)};
  std::vector<int64_t> flat_sizes;
  const auto out = coalesced(tensors, [&](at::Tensor flat) {
    flat_sizes.push_back(flat.numel());
    return flat * 2;
  });
  // float (6 + 3 elements), long (4), double (1): three buffers, not four copies.
  std::sort(flat_sizes.begin(), flat_sizes.end());
  EXPECT_EQ(flat_sizes, (std::vector<int64_t>{1, 4, 9}));
  ASSERT_EQ(out.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(out[i].sizes(), tensors[i].sizes()) << i;
    EXPECT_EQ(out[i].scalar_type(), tensors[i].scalar_type()) << i;
    EXPECT_TRUE(at::equal(out[i], tensors[i] * 2)) << i;
  }
  EXPECT_TRUE(coalesced({}, [](at::Tensor flat) { return flat; }).empty());
}

}  // namespace
}  // namespace ddpbench
