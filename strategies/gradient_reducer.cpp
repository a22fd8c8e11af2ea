#include "strategies/gradient_reducer.hpp"

#include <algorithm>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace ddpbench {

// Fires after AccumulateGrad has written the parameter's gradient for this backward.
class GradientReducer::AccumulateHook final : public torch::autograd::FunctionPostHook {
 public:
  AccumulateHook(GradientReducer* reducer, int64_t slot) : reducer_(reducer), slot_(slot) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    reducer_->mark_ready(slot_);
    return outputs;
  }

 private:
  GradientReducer* reducer_;
  int64_t slot_;
};

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, std::shared_ptr<Communicator> comm,
                                 ReducerOptions options)
    : comm_(std::move(comm)), options_(options) {
  TORCH_CHECK(comm_ != nullptr, "GradientReducer needs a communicator");
  // Reverse registration order; a bucket closes when the next parameter would overflow it
  // or has another dtype or device. A parameter larger than the cap gets a bucket alone.
  auto cap_of = [&](std::size_t bucket) {
    return bucket == 0 ? std::min(options_.first_bucket_bytes, options_.bucket_bytes) : options_.bucket_bytes;
  };
  int64_t open_bytes = 0;
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    const at::Tensor& p = *it;
    if (!p.requires_grad()) continue;
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fits = !buckets_.empty() && open_bytes + bytes <= cap_of(buckets_.size() - 1) &&
                      slots_.back().parameter.options().type_equal(p.options());
    if (!fits) {
      buckets_.emplace_back();
      open_bytes = 0;
    }
    slots_.push_back(Slot{p, static_cast<int64_t>(buckets_.size()) - 1, open_bytes / static_cast<int64_t>(p.element_size())});
    buckets_.back().slots.push_back(static_cast<int64_t>(slots_.size()) - 1);
    open_bytes += bytes;
  }
  for (Bucket& bucket : buckets_) {
    int64_t numel = 0;
    for (int64_t s : bucket.slots) numel += slots_[static_cast<std::size_t>(s)].parameter.numel();
    const at::Tensor& first = slots_[static_cast<std::size_t>(bucket.slots.front())].parameter;
    bucket.flat = at::zeros({numel}, first.options().requires_grad(false));
  }
  if (options_.overlap) {
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      auto accumulator = torch::autograd::impl::grad_accumulator(slots_[s].parameter);
      accumulator->add_post_hook(std::make_unique<AccumulateHook>(this, static_cast<int64_t>(s)));
      accumulators_.push_back(std::move(accumulator));
    }
  }
}

GradientReducer::~GradientReducer() = default;

std::vector<int64_t> GradientReducer::bucket_sizes_bytes() const {
  std::vector<int64_t> sizes;
  for (const Bucket& b : buckets_) sizes.push_back(b.flat.numel() * static_cast<int64_t>(b.flat.element_size()));
  return sizes;
}

int64_t GradientReducer::gradient_bytes() const {
  int64_t total = 0;
  for (int64_t b : bucket_sizes_bytes()) total += b;
  return total;
}

void GradientReducer::prepare_for_backward(int64_t step) {
  std::lock_guard lock(mutex_);
  step_ = step;
  next_to_launch_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int64_t>(b.slots.size());
    b.launched = false;
    b.work.reset();
  }
  active_ = true;
}

void GradientReducer::copy_in(Slot& slot) {
  Bucket& bucket = buckets_[static_cast<std::size_t>(slot.bucket)];
  auto view = bucket.flat.narrow(0, slot.offset, slot.parameter.numel());
  const at::Tensor& grad = slot.parameter.grad();
  if (grad.defined()) {
    view.copy_(grad.reshape({-1}));
  } else {
    view.zero_();
  }
}

void GradientReducer::mark_ready(int64_t slot_index) {
  std::lock_guard lock(mutex_);
  if (!active_) return;  // a backward the reducer was not prepared for (evaluation never runs one)
  Slot& slot = slots_[static_cast<std::size_t>(slot_index)];
  copy_in(slot);
  Bucket& bucket = buckets_[static_cast<std::size_t>(slot.bucket)];
  if (--bucket.pending == 0) launch_ready_buckets();
}

void GradientReducer::launch_ready_buckets() {
  const double world = static_cast<double>(comm_->world_size());
  while (next_to_launch_ < bucket_count()) {
    Bucket& bucket = buckets_[static_cast<std::size_t>(next_to_launch_)];
    if (bucket.pending > 0) return;
    // Averaging by dividing first, as DDP does, keeps the sum in range for fp16 buckets.
    bucket.flat.div_(world);
    bucket.range.start("allreduce bucket " + std::to_string(next_to_launch_), step_);
    bucket.work = comm_->sum_async(bucket.flat);
    bucket.launched = true;
    ++next_to_launch_;
  }
}

void GradientReducer::finish() {
  {
    std::lock_guard lock(mutex_);
    for (Bucket& bucket : buckets_) {
      if (bucket.launched) continue;
      for (int64_t s : bucket.slots) copy_in(slots_[static_cast<std::size_t>(s)]);
      bucket.pending = 0;
    }
    launch_ready_buckets();
    active_ = false;
  }
  double total = 0;
  for (Bucket& bucket : buckets_) {
    bucket.work->wait();
    bucket.range.end();
    total += bucket.work->duration_s();
  }
  last_allreduce_s_ = total;
  at::NoGradGuard no_grad;
  for (Slot& slot : slots_) {
    const Bucket& bucket = buckets_[static_cast<std::size_t>(slot.bucket)];
    auto averaged = bucket.flat.narrow(0, slot.offset, slot.parameter.numel()).view(slot.parameter.sizes());
    if (slot.parameter.grad().defined()) {
      slot.parameter.mutable_grad().copy_(averaged);
    } else {
      slot.parameter.mutable_grad() = averaged.clone();
    }
  }
}

}  // namespace ddpbench
