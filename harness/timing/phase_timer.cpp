#include "harness/timing/phase_timer.hpp"

#include "harness/base/clock.hpp"

#include <array>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#ifdef DDPBENCH_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace ddpbench {
namespace {

constexpr std::size_t kPhases = 8;

}  // namespace

double& seconds_of(PhaseSeconds& s, Phase phase) {
  switch (phase) {
    case Phase::data: return s.data_s;
    case Phase::forward: return s.forward_s;
    case Phase::backward: return s.backward_s;
    case Phase::comm: return s.comm_s;
    case Phase::optimizer: return s.optimizer_s;
    case Phase::allreduce: return s.allreduce_s;
    case Phase::collective_wait: return s.collective_wait_s;
    case Phase::replicate: return s.replicate_s;
  }
  return s.data_s;
}

namespace {

// On the CPU the work is done when the call returns: the clock reads are the timings.
class SteadyClockTimer final : public PhaseTimer {
 public:
  void begin(Phase phase) override { started_[static_cast<std::size_t>(phase)] = Clock::now(); }
  void end(Phase phase) override {
    const std::chrono::duration<double> d = Clock::now() - started_[static_cast<std::size_t>(phase)];
    seconds_of(totals_, phase) += d.count();
  }
  void add(std::function<void(PhaseSeconds&)> adjust) override { added_.push_back(std::move(adjust)); }
  void mark_epoch_start() override { last_boundary_ = Clock::now(); }
  std::function<StepTiming()> finish_step() override {
    const auto now = Clock::now();
    for (auto& adjust : std::exchange(added_, {})) adjust(totals_);
    StepTiming timing{seconds_between(last_boundary_, now), std::exchange(totals_, PhaseSeconds{})};
    last_boundary_ = now;
    return [timing] { return timing; };
  }

 private:
  std::array<Clock::time_point, kPhases> started_{};
  Clock::time_point last_boundary_ = Clock::now();
  PhaseSeconds totals_;
  std::vector<std::function<void(PhaseSeconds&)>> added_;
};

#ifdef DDPBENCH_HAVE_CUDA
// Events are recycled through a free list shared with the resolvers, which may run after
// several more steps have been queued.
class EventPool {
 public:
  std::shared_ptr<at::cuda::CUDAEvent> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    auto e = std::move(free_.back());
    free_.pop_back();
    return e;
  }
  void give_back(std::shared_ptr<at::cuda::CUDAEvent> e) {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(e));
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<at::cuda::CUDAEvent>> free_;
};

class CudaEventTimer final : public PhaseTimer {
 public:
  explicit CudaEventTimer(const c10::Device& device) : device_(device), pool_(std::make_shared<EventPool>()) {}

  void begin(Phase phase) override {
    c10::cuda::CUDAGuard guard(device_);
    Interval interval{phase, pool_->take(), pool_->take()};
    interval.start->record();
    open_[static_cast<std::size_t>(phase)] = intervals_.size();
    intervals_.push_back(std::move(interval));
  }

  void end(Phase phase) override {
    const std::size_t index = std::exchange(open_[static_cast<std::size_t>(phase)], kNone);
    if (index == kNone) return;
    c10::cuda::CUDAGuard guard(device_);
    intervals_[index].stop->record();
  }

  void add(std::function<void(PhaseSeconds&)> adjust) override { added_.push_back(std::move(adjust)); }

  void mark_epoch_start() override {
    c10::cuda::CUDAGuard guard(device_);
    last_boundary_ = pool_->take();
    last_boundary_->record();
  }

  std::function<StepTiming()> finish_step() override {
    c10::cuda::CUDAGuard guard(device_);
    if (!last_boundary_) mark_epoch_start();
    auto boundary = pool_->take();
    boundary->record();
    auto previous = std::exchange(last_boundary_, boundary);
    return [pool = pool_, intervals = std::exchange(intervals_, {}), added = std::exchange(added_, {}), previous,
            boundary]() mutable {
      StepTiming timing;
      boundary->synchronize();
      timing.time_s = static_cast<double>(previous->elapsed_time(*boundary)) / 1e3;
      for (auto& i : intervals) {
        seconds_of(timing.phases, i.phase) += static_cast<double>(i.start->elapsed_time(*i.stop)) / 1e3;
        pool->give_back(std::move(i.start));
        pool->give_back(std::move(i.stop));
      }
      for (auto& adjust : added) adjust(timing.phases);
      // The step's end stays the next step's start; only the previous boundary is free.
      pool->give_back(std::move(previous));
      return timing;
    };
  }

 private:
  struct Interval {
    Phase phase = Phase::data;
    std::shared_ptr<at::cuda::CUDAEvent> start, stop;
  };
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  c10::Device device_;
  std::shared_ptr<EventPool> pool_;
  std::vector<Interval> intervals_;
  std::array<std::size_t, kPhases> open_ = {kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone};
  std::vector<std::function<void(PhaseSeconds&)>> added_;
  std::shared_ptr<at::cuda::CUDAEvent> last_boundary_;
};
#endif

}  // namespace

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::data: return "data";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::comm: return "comm";
    case Phase::optimizer: return "optimizer";
    case Phase::allreduce: return "allreduce";
    case Phase::collective_wait: return "collective wait";
    case Phase::replicate: return "replicate";
  }
  return "?";
}

std::unique_ptr<PhaseTimer> make_phase_timer(const c10::Device& device) {
#ifdef DDPBENCH_HAVE_CUDA
  if (device.is_cuda()) return std::make_unique<CudaEventTimer>(device);
#endif
  (void)device;
  return std::make_unique<SteadyClockTimer>();
}

}  // namespace ddpbench
