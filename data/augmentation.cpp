#include "data/augmentation.hpp"

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include "data/image_set.hpp"
#include "data/random.hpp"

namespace ddpbench {

AugmentationPlan random_augmentation(uint64_t seed, int64_t epoch, AugmentationStream stream,
                                     int64_t samples, int64_t padding) {
  TORCH_CHECK(padding >= 0 && padding <= 127, "crop padding ", padding, " outside [0, 127]");
  AugmentationPlan plan;
  plan.padding = padding;
  const auto n = static_cast<std::size_t>(samples);
  plan.offset_y.resize(n);
  plan.offset_x.resize(n);
  plan.flip.resize(n);
  const auto choices = static_cast<uint64_t>(2 * padding + 1);
  for (std::size_t i = 0; i < n; ++i) {
    StreamRng rng(stream_key(seed, static_cast<uint64_t>(stream), static_cast<uint64_t>(epoch), i));
    plan.offset_y[i] = static_cast<uint8_t>(rng.below(choices));
    plan.offset_x[i] = static_cast<uint8_t>(rng.below(choices));
    plan.flip[i] = static_cast<uint8_t>(rng.below(2));
  }
  return plan;
}

AugmentationPlan identity_augmentation(int64_t samples) {
  const auto n = static_cast<std::size_t>(samples);
  return AugmentationPlan{0, std::vector<uint8_t>(n, 0), std::vector<uint8_t>(n, 0),
                          std::vector<uint8_t>(n, 0)};
}

const std::array<float, 256>& normalization_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) {
      const float unit = static_cast<float>(v) / 255.0f;
      t[static_cast<std::size_t>(v)] = (unit - 0.5f) / 0.5f;
    }
    return t;
  }();
  return table;
}

void augment_image(const uint8_t* image, int64_t index, const AugmentationPlan& plan, float* out) {
  const auto& table = normalization_table();
  const auto i = static_cast<std::size_t>(index);
  const int64_t shift_y = plan.offset_y[i] - plan.padding;
  const int64_t shift_x = plan.offset_x[i] - plan.padding;
  const bool flip = plan.flip[i] != 0;
  for (int64_t c = 0; c < kImageChannels; ++c) {
    const uint8_t* channel = image + c * kImageSide * kImageSide;
    for (int64_t y = 0; y < kImageSide; ++y) {
      const int64_t sy = y + shift_y;
      float* row = out + (c * kImageSide + y) * kImageSide;
      if (sy < 0 || sy >= kImageSide) {
        for (int64_t x = 0; x < kImageSide; ++x) row[x] = table[0];
        continue;
      }
      for (int64_t x = 0; x < kImageSide; ++x) {
        const int64_t sx = (flip ? kImageSide - 1 - x : x) + shift_x;
        const uint8_t v = (sx >= 0 && sx < kImageSide) ? channel[sy * kImageSide + sx] : 0;
        row[x] = table[v];
      }
    }
  }
}

DeviceAugmentation to_device(const AugmentationPlan& plan, const at::Device& device) {
  const int64_t n = plan.size();
  auto bytes = [&](const std::vector<uint8_t>& v) {
    return at::from_blob(const_cast<uint8_t*>(v.data()), {n}, at::kByte).clone();
  };
  const auto& table = normalization_table();
  DeviceAugmentation d;
  d.padding = plan.padding;
  d.offset_y = bytes(plan.offset_y).to(at::kLong).to(device);
  d.offset_x = bytes(plan.offset_x).to(at::kLong).to(device);
  d.flip = bytes(plan.flip).to(at::kBool).to(device);
  d.table = at::from_blob(const_cast<float*>(table.data()), {256}, at::kFloat).clone().to(device);
  return d;
}

at::Tensor augment_batch(const at::Tensor& images, const at::Tensor& indices,
                         const DeviceAugmentation& plan) {
  const int64_t batch = images.size(0);
  const auto flip = plan.flip.index_select(0, indices);
  at::Tensor crops;
  if (plan.padding == 0) {
    crops = at::where(flip.view({batch, 1, 1, 1}), images.flip({3}), images);
  } else {
    // Gather every sample's own window from the zero-padded batch in one indexing op.
    const int64_t p = plan.padding;
    const auto padded = at::constant_pad_nd(images, {p, p, p, p}, 0);
    const auto steps = at::arange(kImageSide, indices.options());
    const auto rows = plan.offset_y.index_select(0, indices).unsqueeze(1) + steps;
    const auto cols = plan.offset_x.index_select(0, indices).unsqueeze(1) +
                      at::where(flip.unsqueeze(1), (kImageSide - 1) - steps, steps);
    const auto sample = at::arange(batch, indices.options()).view({batch, 1, 1});
    crops = padded.permute({0, 2, 3, 1})
                .index({sample, rows.unsqueeze(2), cols.unsqueeze(1)})
                .permute({0, 3, 1, 2});
  }
  return plan.table.index_select(0, crops.reshape({-1}).to(at::kLong)).view(crops.sizes());
}

}  // namespace ddpbench
