#include "strategies/bucket_allreduce_hook.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <ATen/core/jit_type.h>

#ifdef DDPBENCH_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace ddpbench {
namespace {

// A mark on the training device: a host time on the CPU, an event on the current stream on
// a GPU (so it reads when the device got there, not when the host asked).
struct Mark {
  Clock::time_point host;
#ifdef DDPBENCH_HAVE_CUDA
  std::shared_ptr<at::cuda::CUDAEvent> event;
#endif
  bool set = false;
};

Mark mark_now(const c10::Device& device) {
  Mark m;
  m.host = Clock::now();
  m.set = true;
#ifdef DDPBENCH_HAVE_CUDA
  if (device.is_cuda()) {
    m.event = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    m.event->record(c10::cuda::getCurrentCUDAStream(device.index()));
  }
#else
  (void)device;
#endif
  return m;
}

// Seconds from `from` to `to`, both marks of one step on one device.
double seconds_from(const Mark& from, const Mark& to) {
#ifdef DDPBENCH_HAVE_CUDA
  if (from.event && to.event) return static_cast<double>(from.event->elapsed_time(*to.event)) / 1e3;
#endif
  return seconds_between(from.host, to.host);
}

#ifdef DDPBENCH_HAVE_CUDA
// Ends a bucket's range when the stream reaches it (no CUDA calls are allowed in here).
void CUDART_CB end_range_on_stream(void* range) {
  auto* held = static_cast<std::shared_ptr<OpenRange>*>(range);
  (*held)->end();
  delete held;
}
#endif

}  // namespace

struct BucketTimeline::Interval {
  std::size_t bucket = 0;
  Mark start, end;
  std::shared_ptr<OpenRange> range;
};

struct BucketTimeline::Step {
  int64_t step = 0;
  std::mutex mutex;
  std::vector<Interval> intervals;
  std::vector<std::pair<std::size_t, Mark>> ready;  // each bucket as the Reducer handed it over
  std::vector<std::pair<std::size_t, Mark>> gradients;  // each parameter's gradient as backward made it
  Mark backward_start;
  Mark last_gradient;
  std::optional<BucketCommFigures> figures;  // once resolved

  // Under the mutex, after the device has finished the step.
  BucketCommFigures resolve();
};

BucketTimeline::BucketTimeline(c10::Device device) : device_(device), step_(std::make_shared<Step>()) {}
BucketTimeline::~BucketTimeline() = default;

void BucketTimeline::start_step(int64_t step) {
  std::lock_guard lock(mutex_);
  step_ = std::make_shared<Step>();
  step_->step = step;
}

void BucketTimeline::backward_started() {
  std::lock_guard lock(mutex_);
  std::lock_guard step_lock(step_->mutex);
  step_->backward_start = mark_now(device_);
}

void BucketTimeline::gradient_ready(std::size_t parameter) {
  std::lock_guard lock(mutex_);
  std::lock_guard step_lock(step_->mutex);
  step_->gradients.emplace_back(parameter, mark_now(device_));
}

void BucketTimeline::bucket_ready(std::size_t bucket_index) {
  std::lock_guard lock(mutex_);
  std::lock_guard step_lock(step_->mutex);
  step_->ready.emplace_back(bucket_index, mark_now(device_));
}

void BucketTimeline::last_gradient_ready() {
  std::lock_guard lock(mutex_);
  std::lock_guard step_lock(step_->mutex);
  step_->last_gradient = mark_now(device_);
  // Where backward's own work ends on a timeline: the allreduce time before it was hidden.
  named_mark("last gradient ready", step_->step);
}

void BucketTimeline::start_alone_backward() {
  std::lock_guard lock(mutex_);
  held_for_alone_ = std::exchange(step_, std::make_shared<Step>());
}

std::vector<GradientReady> BucketTimeline::finish_alone_backward() {
  std::shared_ptr<Step> alone;
  {
    std::lock_guard lock(mutex_);
    alone = std::exchange(step_, held_for_alone_ ? held_for_alone_ : std::make_shared<Step>());
    held_for_alone_.reset();
  }
  std::lock_guard step_lock(alone->mutex);
  std::vector<GradientReady> gradients;
  if (!alone->backward_start.set) return gradients;
  for (const auto& [parameter, mark] : alone->gradients) {
    gradients.push_back({parameter, seconds_from(alone->backward_start, mark)});
  }
  return gradients;
}

std::vector<std::size_t> BucketTimeline::unfinished_buckets() {
  std::lock_guard lock(mutex_);
  std::lock_guard step_lock(step_->mutex);
  std::vector<std::size_t> unfinished;
  for (const Interval& interval : step_->intervals) {
    if (!interval.end.set) unfinished.push_back(interval.bucket);
  }
  return unfinished;
}

BucketTimeline::Token BucketTimeline::launched(std::size_t bucket_index) {
  std::lock_guard lock(mutex_);
  std::lock_guard step_lock(step_->mutex);
  Interval interval;
  interval.bucket = bucket_index;
  interval.range = std::make_shared<OpenRange>("allreduce bucket " + std::to_string(bucket_index), step_->step);
  interval.start = mark_now(device_);
  step_->intervals.push_back(std::move(interval));
  return Token{step_, step_->intervals.size() - 1};
}

void BucketTimeline::completed(const Token& token) {
  std::lock_guard step_lock(token.step->mutex);
  Interval& interval = token.step->intervals[token.slot];
  interval.end = mark_now(device_);
#ifdef DDPBENCH_HAVE_CUDA
  if (device_.is_cuda()) {
    // A host function per bucket costs the stream a callback: only where a range is open.
    if (interval.range->open()) {
      cudaLaunchHostFunc(c10::cuda::getCurrentCUDAStream(device_.index()).stream(), end_range_on_stream,
                         new std::shared_ptr<OpenRange>(interval.range));
    }
    return;
  }
#endif
  interval.range->end();
}

BucketCommFigures BucketTimeline::Step::resolve() {
  if (figures) return *figures;
  figures.emplace();
  BucketCommFigures& f = *figures;
  f.buckets = static_cast<int64_t>(intervals.size());
  if (intervals.empty()) return f;
  // Every mark as seconds after backward's start (else the first launch, which comes first
  // on the stream too).
  const Mark& origin = backward_start.set ? backward_start : intervals.front().start;
  for (const auto& [parameter, mark] : gradients) f.gradients.push_back({parameter, seconds_from(origin, mark)});
  std::vector<std::pair<double, double>> spans;
  double last_end = 0;
  for (const Interval& i : intervals) {
    if (!i.end.set) continue;  // failed: the step fails with it
    spans.emplace_back(seconds_from(origin, i.start), seconds_from(origin, i.end));
    const auto [start, end] = spans.back();
    BucketSpan span{i.bucket, kNotMeasured, start, end, std::max(0.0, end - std::max(start, last_end))};
    last_end = std::max(last_end, end);
    for (const auto& [bucket, mark] : ready) {
      if (bucket == i.bucket) span.ready_s = seconds_from(origin, mark);
    }
    f.spans.push_back(span);
  }
  // Overlapping allreduces (Gloo runs several at once) count once: the union of the spans.
  std::sort(spans.begin(), spans.end());
  double covered_until = -1;
  for (const auto& [start, end] : spans) {
    const double from = std::max(start, covered_until);
    if (end > from) f.allreduce_s += end - from;
    covered_until = std::max(covered_until, end);
  }
  if (last_gradient.set) {
    const double last_gradient_s = seconds_from(origin, last_gradient);
    f.exposed_s = std::max(0.0, last_end - last_gradient_s);
    for (const auto& [start, end] : spans) f.launched_before_last_gradient += start < last_gradient_s ? 1 : 0;
    if (backward_start.set) f.backward_compute_s = last_gradient_s;
  }
  return f;
}

namespace {
constexpr std::size_t kKeptSteps = 256;
}  // namespace

std::function<BucketCommFigures()> BucketTimeline::finish_step() {
  std::shared_ptr<Step> step;
  {
    std::lock_guard lock(mutex_);
    step = std::exchange(step_, std::make_shared<Step>());
    finished_.push_back(step);
    if (first_gradient_order_.empty()) {
      std::lock_guard step_lock(step->mutex);
      for (const auto& [parameter, mark] : step->gradients) first_gradient_order_.push_back(parameter);
    }
    while (finished_.size() > kKeptSteps) finished_.pop_front();
  }
  return [step] {
    std::lock_guard step_lock(step->mutex);
    return step->resolve();
  };
}

BucketCommFigures BucketTimeline::last_step_figures() {
  std::shared_ptr<Step> step;
  {
    std::lock_guard lock(mutex_);
    if (finished_.empty()) return {};
    step = finished_.back();
  }
  std::lock_guard step_lock(step->mutex);
  return step->resolve();
}

BucketTimelineSummary BucketTimeline::summary(int64_t first_steady_step) {
  std::vector<BucketCommFigures> steps;
  std::vector<int64_t> numbers;
  std::vector<std::size_t> order;
  {
    std::lock_guard lock(mutex_);
    order = first_gradient_order_;
    for (const auto& step : finished_) {
      std::lock_guard step_lock(step->mutex);
      steps.push_back(step->resolve());
      numbers.push_back(step->step);
    }
  }
  BucketTimelineSummary s;
  if (steps.empty()) return s;
  // The final layout's steps, the first of them (the rebuild's) left out; of those, the
  // steady ones where there are any.
  const std::size_t layout = steps.back().spans.size();
  std::size_t first = steps.size();
  while (first > 0 && steps[first - 1].spans.size() == layout) --first;
  if (steps.size() - first > 1) ++first;
  std::size_t steady = first;
  while (steady < steps.size() && numbers[steady] < first_steady_step) ++steady;
  if (steady < steps.size()) first = steady;
  std::map<std::size_t, BucketSpan> sums;
  std::map<std::size_t, double> gradient_sums;
  double backward = 0;
  for (std::size_t i = first; i < steps.size(); ++i) {
    for (const GradientReady& g : steps[i].gradients) gradient_sums[g.parameter] += g.ready_s;
    for (const BucketSpan& span : steps[i].spans) {
      BucketSpan& sum = sums.try_emplace(span.bucket, BucketSpan{span.bucket, 0, 0, 0, 0}).first->second;
      sum.ready_s += span.ready_s;
      sum.start_s += span.start_s;
      sum.end_s += span.end_s;
      sum.wire_s += span.wire_s;
    }
    backward += steps[i].backward_compute_s;
  }
  s.steps = static_cast<int64_t>(steps.size() - first);
  const auto n = static_cast<double>(s.steps);
  for (auto& [bucket, sum] : sums) {
    s.buckets.push_back(BucketSpan{bucket, sum.ready_s / n, sum.start_s / n, sum.end_s / n, sum.wire_s / n});
  }
  s.backward_compute_s = backward / n;
  for (std::size_t parameter : order) {
    const auto it = gradient_sums.find(parameter);
    if (it != gradient_sums.end()) s.gradients.push_back({parameter, it->second / n});
  }
  return s;
}

BucketAllreduceHook::BucketAllreduceHook(const Communicator& comm, c10::Device device, bool overlap,
                                         CommHook compression, std::shared_ptr<BucketTimeline> timeline)
    : marks_(comm.marks()),
      group_(comm.process_group()),
      device_(device),
      overlap_(overlap),
      compression_(compression),
      timeline_(std::move(timeline)) {
  TORCH_CHECK(compression != CommHook::builtin_fp16, "the built-in FP16_COMPRESS hook is the Reducer's, not this one");
}

c10::intrusive_ptr<c10::ivalue::Future> BucketAllreduceHook::runHook(c10d::GradBucket& bucket) {
  // The Reducer hands buckets over in order; the last one is ready when backward's last
  // gradient is.
  const bool last = bucket.isLast();
  timeline_->bucket_ready(bucket.getIndex());
  if (last) timeline_->last_gradient_ready();
  if (overlap_) return launch(bucket.getBufferRef(), bucket.getIndex());
  if (!last) {
    std::vector<c10::Device> devices;
    if (device_.is_cuda()) devices.push_back(device_);
    auto result = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors(), devices);
    held_.push_back(Held{bucket.getBufferRef(), bucket.getIndex(), result});
    return result;
  }
  for (Held& held : std::exchange(held_, {})) {
    launch(held.buffer, held.index)->addCallback([result = held.result](c10::ivalue::Future& done) {
      if (done.hasError()) {
        result->setError(done.exception_ptr());
      } else {
        result->markCompleted(done.value());
      }
    });
  }
  return launch(bucket.getBufferRef(), bucket.getIndex());
}

c10::intrusive_ptr<c10::ivalue::Future> BucketAllreduceHook::launch(at::Tensor buffer, std::size_t index) {
  const bool compressed = compression_ != CommHook::allreduce;
  at::Tensor wire = buffer;
  if (compressed) {
    // As default_hooks.fp16_compress_hook / bf16_compress_hook: cast for the wire, divide
    // there, and copy the result back into the bucket when it arrives.
    wire = buffer.to(compression_ == CommHook::fp16 ? at::kHalf : at::kBFloat16).div_(group_->getSize());
  } else {
    // The Reducer's own path multiplies by 1 / world size while copying gradients into the
    // bucket (at::mul_out with a wrapped scalar); this is the same product, elementwise.
    buffer.mul_(1.0 / static_cast<double>(group_->getSize()));
  }
  const BucketTimeline::Token token = timeline_->launched(index);
  const int64_t sequence = marks_->enter("allreduce of bucket " + std::to_string(index));
  std::vector<at::Tensor> tensors{wire};
  auto work = group_->allreduce(tensors);
  // then(), not a side callback: the Reducer waits on the returned future, so the callback
  // has run before backward returns. On Gloo it runs when the allreduce is done; on NCCL the
  // future completes at enqueue, so it runs then, and the marks it records (and the copy back
  // of a compressed bucket) are ordered on the current stream, which the device reaches when
  // the allreduce is done. A failed allreduce is never left: the rank stays inside it in its
  // progress record.
  return work->getFuture()->then(
      [timeline = timeline_, token, marks = marks_, sequence, compressed, buffer](c10::ivalue::Future& done) {
        if (!done.hasError()) {
          timeline->completed(token);
          marks->leave(sequence);
        }
        if (!compressed) return done.value();
        at::Tensor bucket = buffer;
        bucket.copy_(done.value().toTensorVector().at(0));
        return c10::IValue(std::vector<at::Tensor>{bucket});
      },
      c10::ListType::ofTensors());
}

at::Tensor BucketAllreduceHook::parseHookResult(const c10::IValue& result) {
  return c10d::detail::parseCppCommHookResult(result);
}

}  // namespace ddpbench
