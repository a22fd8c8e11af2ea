#pragma once
// A model's training FLOPs per image, counted once per model and input size from the shapes
// of its convolutions and matrix products, as they run (ATen's RecordFunction observers).
#include <cstdint>

#include "models/registry.hpp"

namespace ddpbench {

/// The forward pass's FLOPs for one `image_side` x `image_side` RGB image, a multiply-add
/// counted as 2: aten::convolution (2 x output elements x in-channels per group x kernel
/// area), aten::addmm, aten::mm and aten::bmm (2 x M x K x N per matrix); an op run inside
/// one of these is not counted again. Norms, activations and pooling are left out, as the
/// usual counts (fvcore, the papers' GFLOPs) leave them out.
double forward_flops_per_image(const ModelOptions& options, int64_t image_side);

/// Training FLOPs per image: forward plus backward, counted as 3x forward (backward computes
/// the gradients of the inputs and of the weights, each as costly as forward).
double train_flops_per_image(const ModelOptions& options, int64_t image_side);

}  // namespace ddpbench
