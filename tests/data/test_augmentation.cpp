#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "data/augmentation.hpp"
#include "data/image_set.hpp"

namespace ddpbench {
namespace {

at::Tensor random_images(int64_t n) {
  return at::randint(0, 256, {n, 3, 32, 32}, at::TensorOptions().dtype(at::kByte));
}

at::Tensor host_augment(const at::Tensor& images, const AugmentationPlan& plan) {
  auto out = at::empty({images.size(0), 3, 32, 32}, at::kFloat);
  for (int64_t i = 0; i < images.size(0); ++i) {
    augment_image(images[i].data_ptr<uint8_t>(), i, plan, out[i].data_ptr<float>());
  }
  return out;
}

TEST(Augmentation, TableIsToTensorThenNormalize) {
  const auto& t = normalization_table();
  EXPECT_FLOAT_EQ(t[0], -1.0f);
  EXPECT_FLOAT_EQ(t[255], 1.0f);
  // torchvision: (128 / 255 - 0.5) / 0.5 in float32
  const float expected = (128.0f / 255.0f - 0.5f) / 0.5f;
  EXPECT_EQ(t[128], expected);
}

TEST(Augmentation, IdentityOnlyNormalises) {
  const auto images = random_images(4);
  const auto out = host_augment(images, identity_augmentation(4));
  EXPECT_TRUE(at::allclose(out, (images.to(at::kFloat) / 255.0 - 0.5) / 0.5, 1e-6, 1e-6));
}

TEST(Augmentation, FlipMirrorsColumns) {
  const auto images = random_images(1);
  auto plan = identity_augmentation(1);
  plan.flip[0] = 1;
  const auto out = host_augment(images, plan);
  const auto expected = host_augment(images.flip({3}).contiguous(), identity_augmentation(1));
  EXPECT_TRUE(at::equal(out, expected));
}

TEST(Augmentation, PaddedCropShiftsAndFillsWithZeroPixels) {
  const auto images = random_images(1);
  auto plan = identity_augmentation(1);
  plan.padding = 4;
  plan.offset_y[0] = 0;  // window starts 4 rows above the image
  plan.offset_x[0] = 6;  // and 2 columns right of it
  const auto out = host_augment(images, plan);
  const float zero_pixel = normalization_table()[0];
  EXPECT_EQ(out[0][1][3][10].item<float>(), zero_pixel);  // rows 0..3 come from padding
  EXPECT_EQ(out[0][1][4][10].item<float>(), normalization_table()[images[0][1][0][12].item<uint8_t>()]);
  EXPECT_EQ(out[0][2][31][29].item<float>(), normalization_table()[images[0][2][27][31].item<uint8_t>()]);
  EXPECT_EQ(out[0][0][20][30].item<float>(), zero_pixel) << "column 30 + 2 lies in the padding";
}

TEST(Augmentation, PlansAreDeterministicPerSeedAndEpoch) {
  const auto a = random_augmentation(1, 0, AugmentationStream::train, 5000, 4);
  const auto b = random_augmentation(1, 0, AugmentationStream::train, 5000, 4);
  const auto next_epoch = random_augmentation(1, 1, AugmentationStream::train, 5000, 4);
  const auto test_stream = random_augmentation(1, 0, AugmentationStream::test, 5000, 4);
  EXPECT_EQ(a.flip, b.flip);
  EXPECT_EQ(a.offset_x, b.offset_x);
  EXPECT_NE(a.flip, next_epoch.flip);
  EXPECT_NE(a.offset_y, test_stream.offset_y);
  const auto flips = std::count(a.flip.begin(), a.flip.end(), 1);
  EXPECT_GT(flips, 2300);
  EXPECT_LT(flips, 2700);
  EXPECT_EQ(*std::max_element(a.offset_x.begin(), a.offset_x.end()), 8);
  // Without padding every crop is the whole image, as in the tutorial.
  const auto unpadded = random_augmentation(1, 0, AugmentationStream::train, 100, 0);
  EXPECT_EQ(*std::max_element(unpadded.offset_y.begin(), unpadded.offset_y.end()), 0);
}

TEST(Augmentation, BatchedPathEqualsThePerImagePath) {
  const auto images = random_images(64);
  for (int64_t padding : {0, 4}) {
    const auto plan = random_augmentation(9, 2, AugmentationStream::train, 64, padding);
    const auto device_plan = to_device(plan, at::kCPU);
    const auto indices = at::arange(64, at::kLong);
    EXPECT_TRUE(at::equal(augment_batch(images, indices, device_plan), host_augment(images, plan)))
        << "padding " << padding;
  }
}

}  // namespace
}  // namespace ddpbench
