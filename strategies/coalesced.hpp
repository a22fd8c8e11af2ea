#pragma once
// Moving many small tensors as few large ones: grouped by dtype, each group flattened into
// one buffer, the buffer transformed (sent, broadcast, copied to a device), and the results
// handed back as views shaped like the inputs.
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ddpbench {

/// Per input tensor, in order, its view into `transform(flat buffer of its dtype group)`.
std::vector<at::Tensor> coalesced(const std::vector<at::Tensor>& tensors,
                                  const std::function<at::Tensor(at::Tensor flat)>& transform);

}  // namespace ddpbench
