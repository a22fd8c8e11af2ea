#pragma once
// Gradient averaging as torch.nn.parallel.DistributedDataParallel's Reducer does it:
// parameters in reverse registration order (roughly the order backward produces their
// gradients) are packed into buckets of at most bucket_bytes (the first one smaller, so
// communication starts early); a hook on each parameter's gradient accumulator copies its
// gradient into the bucket's flat buffer, and the bucket's allreduce starts, asynchronously,
// as soon as its last gradient arrives, while backward goes on. finish() waits for them all
// and writes the averages back into .grad. Without overlap, every bucket is reduced after
// backward instead: same buckets, same arithmetic, same result.
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>

#include "harness/distributed/communicator.hpp"
#include "harness/timing/nvtx.hpp"

namespace ddpbench {

struct ReducerOptions {
  int64_t bucket_bytes = 25LL << 20;       // DDP's bucket_cap_mb = 25
  int64_t first_bucket_bytes = 1LL << 20;  // DDP's _DEFAULT_FIRST_BUCKET_BYTES
  bool overlap = true;
};

class GradientReducer {
 public:
  GradientReducer(std::vector<at::Tensor> parameters, std::shared_ptr<Communicator> comm, ReducerOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Before each backward.
  void prepare_for_backward(int64_t step);
  /// After backward: reduces what has not started (a parameter that received no gradient
  /// contributes zeros), waits for every bucket, and leaves the averaged gradients in .grad.
  void finish();

  [[nodiscard]] int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  [[nodiscard]] std::vector<int64_t> bucket_sizes_bytes() const;
  [[nodiscard]] int64_t gradient_bytes() const;
  /// Sum over the last step's buckets of their allreduce durations (overlapping backward
  /// when overlap is on); NaN when the backend cannot tell.
  [[nodiscard]] double last_allreduce_s() const { return last_allreduce_s_; }

 private:
  struct Slot {
    at::Tensor parameter;
    int64_t bucket = 0;
    int64_t offset = 0;  // in elements, within the bucket's flat buffer
  };
  struct Bucket {
    at::Tensor flat;
    std::vector<int64_t> slots;
    int64_t pending = 0;  // gradients still to arrive this step
    bool launched = false;
    std::unique_ptr<PendingSum> work;
    nvtx::ThreadSpanningRange range;
  };
  class AccumulateHook;

  void mark_ready(int64_t slot);
  void copy_in(Slot& slot);
  void launch_ready_buckets();  // in bucket order, so every rank issues the same sequence

  std::shared_ptr<Communicator> comm_;
  ReducerOptions options_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // parameters hold them weakly
  std::mutex mutex_;  // hooks run on autograd's threads
  int64_t next_to_launch_ = 0;
  int64_t step_ = 0;
  bool active_ = false;
  double last_allreduce_s_ = 0;
};

}  // namespace ddpbench
