// The FLOP count against numbers worked out by hand and the published ResNet-50 count.
#include <gtest/gtest.h>

#include "models/flop_count.hpp"

namespace ddpbench {
namespace {

TEST(FlopCount, TheTinyModelCountsEveryConvolutionAndTheHeadOnce) {
  ModelOptions tiny;
  tiny.name = "tiny";
  tiny.num_classes = 10;
  // conv1: 8 x 16 x 16 outputs x 3 x 3 x 3 inputs each; conv2: 16 x 8 x 8 x 8 x 3 x 3; fc:
  // 10 x 16 (addmm, not also its inner mm); 2 FLOPs per multiply-add.
  const double conv1 = 2.0 * 8 * 16 * 16 * 27, conv2 = 2.0 * 16 * 8 * 8 * 72, fc = 2.0 * 10 * 16;
  EXPECT_DOUBLE_EQ(forward_flops_per_image(tiny, 32), conv1 + conv2 + fc);
  EXPECT_DOUBLE_EQ(train_flops_per_image(tiny, 32), 3 * (conv1 + conv2 + fc));
  // The count scales with the image: conv outputs grow with its area, the head does not.
  EXPECT_DOUBLE_EQ(forward_flops_per_image(tiny, 64), 4 * (conv1 + conv2) + fc);
}

TEST(FlopCount, ResNet50IsThePublishedFourGigaMultiplyAdds) {
  ModelOptions resnet;
  resnet.name = "resnet50";
  resnet.num_classes = 1000;
  // 4.09 G multiply-adds at 224 x 224 (torchvision's ResNet-50, as fvcore counts it).
  const double flops = forward_flops_per_image(resnet, 224);
  EXPECT_GT(flops, 2 * 4.05e9);
  EXPECT_LT(flops, 2 * 4.15e9);
}

}  // namespace
}  // namespace ddpbench
