#include "strategies/coalesced.hpp"

#include <map>

#include <torch/csrc/utils/tensor_flatten.h>

namespace ddpbench {

std::vector<at::Tensor> coalesced(const std::vector<at::Tensor>& tensors,
                                  const std::function<at::Tensor(at::Tensor flat)>& transform) {
  std::map<at::ScalarType, std::vector<std::size_t>> by_dtype;
  for (std::size_t i = 0; i < tensors.size(); ++i) by_dtype[tensors[i].scalar_type()].push_back(i);
  std::vector<at::Tensor> out(tensors.size());
  for (const auto& [dtype, indices] : by_dtype) {
    std::vector<at::Tensor> group;
    for (std::size_t i : indices) group.push_back(tensors[i]);
    const auto parts = torch::utils::unflatten_dense_tensors(transform(torch::utils::flatten_dense_tensors(group)), group);
    for (std::size_t k = 0; k < indices.size(); ++k) out[indices[k]] = parts[k];
  }
  return out;
}

}  // namespace ddpbench
