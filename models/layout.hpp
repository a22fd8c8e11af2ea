#pragma once
// Memory layouts of a model's tensors.
#include <torch/nn/module.h>

namespace ddpbench {

/// Re-lays every 4-D parameter as channels-last (NHWC) in place: LibTorch's C++ Module has
/// no to(MemoryFormat).
void to_channels_last(torch::nn::Module& module);

}  // namespace ddpbench
