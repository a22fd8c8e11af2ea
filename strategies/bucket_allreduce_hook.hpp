#pragma once
// DDP's communication hook: PyTorch's default allreduce of a gradient bucket (sum, scaled by
// 1 / world size as the Reducer's built-in path scales it), or its fp16/bf16 compression
// hooks (the bucket cast for the wire, divided, allreduced, cast back), with a clock around each
// bucket from its launch to its completion, an NVTX range that ends at completion, and the
// bucket entered and left in the rank's progress record (harness/distributed/communicator.hpp).
// With overlap off, buckets are held until the last one is ready (the last gradient of
// backward) and then launched in order: the same buckets and arithmetic, no overlap.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include "harness/base/clock.hpp"
#include "harness/base/step_record.hpp"
#include "harness/distributed/communicator.hpp"
#include "strategies/strategy_options.hpp"
#include "harness/timing/named_range.hpp"

namespace ddpbench {

/// One bucket of one step, in seconds after backward started, on the step's device.
struct BucketSpan {
  std::size_t bucket = 0;
  double ready_s = kNotMeasured;  // the Reducer handed it over: its last gradient was ready
  double start_s = kNotMeasured;  // its allreduce launched
  double end_s = kNotMeasured;    // ... and completed
  // On the wire: from its launch, or the completion of every allreduce launched before it if
  // later, to its completion. Launch to completion also holds the wait behind earlier buckets.
  double wire_s = kNotMeasured;
};

/// When backward produced one parameter's gradient, in seconds after backward started.
struct GradientReady {
  std::size_t parameter = 0;  // the Reducer's index of the parameter
  double ready_s = kNotMeasured;
};

/// One step's communication, resolved once the step has finished on the device.
struct BucketCommFigures {
  double allreduce_s = 0;  // time with at least one bucket allreduce in flight
  double exposed_s = 0;    // from the last gradient's readiness to the last completion
  int64_t buckets = 0;
  int64_t launched_before_last_gradient = 0;  // buckets whose allreduce overlapped backward
  double backward_compute_s = kNotMeasured;   // from backward's start to its last gradient
  std::vector<BucketSpan> spans;              // in launch order
  std::vector<GradientReady> gradients;       // as backward made them ready
};

/// What a projection of this row needs (reports/projection.hpp): each bucket's ready time and
/// allreduce time after backward's start, and backward's compute, as means over the steady
/// steps (after the warm-up, as the row's other steady figures) since the buckets took their
/// final layout (the first such step, the rebuild's, left out); and what the tuning advisor
/// needs (reports/tuning_advice.hpp) to lay out buckets of any size: every gradient's ready
/// time over the same steps, in the order of the first step, the order the Reducer rebuilt
/// its buckets from.
struct BucketTimelineSummary {
  std::vector<BucketSpan> buckets;  // by bucket index; the means of each step's marks
  std::vector<GradientReady> gradients;
  double backward_compute_s = kNotMeasured;
  int64_t steps = 0;
};

/// The launch and completion of every bucket allreduce of one step. Launches and
/// completions are recorded from autograd's and the backend's threads.
class BucketTimeline {
 public:
  explicit BucketTimeline(c10::Device device);
  ~BucketTimeline();
  BucketTimeline(const BucketTimeline&) = delete;
  BucketTimeline& operator=(const BucketTimeline&) = delete;

  void start_step(int64_t step);
  /// Hands over this step's record; the function reads it (waiting on nothing: call it
  /// after the device has finished the step), computing its figures once.
  std::function<BucketCommFigures()> finish_step();
  /// The figures of the last step handed over (after the device has finished it).
  [[nodiscard]] BucketCommFigures last_step_figures();
  /// The steps handed over from step `first_steady_step` on, summarised (after the device has
  /// finished them); all of the final layout's where none is that late.
  [[nodiscard]] BucketTimelineSummary summary(int64_t first_steady_step);

  struct Step;
  /// A launched allreduce, for completed().
  struct Token {
    std::shared_ptr<Step> step;
    std::size_t slot = 0;
  };
  /// Backward starts (on a GPU: once the current stream reaches here).
  void backward_started();
  /// Backward produced the gradient of the Reducer's parameter `parameter` (a hook on its
  /// gradient accumulator, run before the Reducer's own).
  void gradient_ready(std::size_t parameter);
  /// The Reducer hands a bucket over: its gradients are all ready.
  void bucket_ready(std::size_t bucket_index);
  /// Backward's last gradient is ready (on a GPU: once the current stream reaches here).
  void last_gradient_ready();
  /// A bucket's allreduce launches, after what the current stream has queued so far.
  Token launched(std::size_t bucket_index);
  /// The bucket's allreduce has completed (on a GPU: once the current stream reaches here).
  void completed(const Token& token);
  /// A backward outside the steps, with no allreduce beside it (the Reducer not expecting
  /// it): its gradient marks go to a record of their own, given back by finish_alone_backward
  /// (after the device has finished it) as seconds after backward_started; the steps' records
  /// are left as they were.
  void start_alone_backward();
  [[nodiscard]] std::vector<GradientReady> finish_alone_backward();
  /// This step's buckets whose allreduce was launched and has not completed (one that
  /// failed never completes), in launch order.
  [[nodiscard]] std::vector<std::size_t> unfinished_buckets();

 private:
  struct Interval;
  c10::Device device_;
  std::mutex mutex_;
  std::shared_ptr<Step> step_;
  std::shared_ptr<Step> held_for_alone_;  // the step in progress while an alone backward runs
  std::deque<std::shared_ptr<Step>> finished_;  // the last kKeptSteps handed over
  std::vector<std::size_t> first_gradient_order_;  // as the first step with gradients made them ready
};

class BucketAllreduceHook final : public c10d::CommHookInterface {
 public:
  /// `compression`: allreduce, fp16 or bf16 (the built-in hook is the Reducer's own).
  BucketAllreduceHook(const Communicator& comm, c10::Device device, bool overlap, CommHook compression,
                      std::shared_ptr<BucketTimeline> timeline);
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

 private:
  struct Held {
    at::Tensor buffer;
    std::size_t index = 0;
    c10::intrusive_ptr<c10::ivalue::Future> result;
  };
  c10::intrusive_ptr<c10::ivalue::Future> launch(at::Tensor buffer, std::size_t index);

  std::shared_ptr<CollectiveMarks> marks_;  // never the communicator: the last owner would end
                                           // the group on the backend's own thread
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  c10::Device device_;
  bool overlap_;
  CommHook compression_;
  std::shared_ptr<BucketTimeline> timeline_;
  std::vector<Held> held_;  // overlap off: buckets waiting for the last one
};

}  // namespace ddpbench
