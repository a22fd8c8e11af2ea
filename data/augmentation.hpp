#pragma once
// The tutorial's transforms, RandomCrop(32, padding=P) then RandomHorizontalFlip, ToTensor,
// Normalize(0.5, 0.5), split into a plan (every sample's crop offset and flip for one epoch,
// drawn from the seed) and two ways of applying it: per image on the host and batched on a
// device. Both read the same plan and the same byte-to-float table, so they agree bit for bit.
#include <array>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ddpbench {

enum class AugmentationStream : uint64_t { train = 11, test = 12 };

struct AugmentationPlan {
  int64_t padding = 0;
  std::vector<uint8_t> offset_y;  // crop origin in the padded image, [0, 2 * padding]
  std::vector<uint8_t> offset_x;
  std::vector<uint8_t> flip;      // 1: mirror the crop left to right
  [[nodiscard]] int64_t size() const { return static_cast<int64_t>(flip.size()); }
};

/// Random crops and flips for `samples` dataset indices (indexed by dataset index, so a
/// sample is transformed the same whichever process or batch loads it).
AugmentationPlan random_augmentation(uint64_t seed, int64_t epoch, AugmentationStream stream,
                                     int64_t samples, int64_t padding);

/// No crop, no flip: normalisation only.
AugmentationPlan identity_augmentation(int64_t samples);

/// ToTensor then Normalize(0.5, 0.5) as a table over byte values, in torchvision's
/// arithmetic: (v / 255 - 0.5) / 0.5 in float32.
const std::array<float, 256>& normalization_table();

/// Host path: one CHW uint8 image into `out` (3 * 32 * 32 floats).
void augment_image(const uint8_t* image, int64_t index, const AugmentationPlan& plan, float* out);

/// Device path: the plan's per-sample values as tensors on one device.
struct DeviceAugmentation {
  int64_t padding = 0;
  at::Tensor offset_y, offset_x, flip;  // int64, int64, bool; [samples]
  at::Tensor table;                     // float32 [256]
};
DeviceAugmentation to_device(const AugmentationPlan& plan, const at::Device& device);

/// `images` uint8 [B, 3, 32, 32] on the plan's device, `indices` their dataset indices.
at::Tensor augment_batch(const at::Tensor& images, const at::Tensor& indices,
                         const DeviceAugmentation& plan);

}  // namespace ddpbench
