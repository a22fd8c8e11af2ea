#pragma once
// The one collective that models and the runner need from a process group: an element-wise
// sum over all processes, in place. SyncBatchNorm and the runner's gathers depend on this
// interface only; harness/distributed/communicator.hpp implements it over c10d.
#include <cstdint>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace ddpbench {

/// Element-wise sum over all processes of a group, in place. Every process calls it in the
/// same order with tensors of the same shape. `phase` names the step of the run it belongs
/// to ("SyncBN", "evaluation"): a sum that cannot complete fails naming it.
class CrossProcessSum {
 public:
  virtual ~CrossProcessSum() = default;
  virtual void sum(at::Tensor& tensor, std::string_view phase) = 0;
  [[nodiscard]] virtual int64_t rank() const = 0;
  [[nodiscard]] virtual int64_t world_size() const = 0;
};

/// Every process's `row` (same length everywhere) stacked by rank, [world_size, numel], on
/// every process: each fills its own row of zeros and the rows are summed.
at::Tensor all_gather_rows(CrossProcessSum& group, const at::Tensor& row, std::string_view phase);

}  // namespace ddpbench
