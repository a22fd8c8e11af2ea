#include "harness/phase_timer.hpp"

#include <array>
#include <chrono>
#include <utility>
#include <vector>

#ifdef DDPBENCH_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace ddpbench {
namespace {

constexpr std::size_t kPhases = 6;

double& slot(PhaseSeconds& s, Phase phase) {
  switch (phase) {
    case Phase::data: return s.data_s;
    case Phase::forward: return s.forward_s;
    case Phase::backward: return s.backward_s;
    case Phase::comm: return s.comm_s;
    case Phase::optimizer: return s.optimizer_s;
    case Phase::allreduce: return s.allreduce_s;
  }
  return s.data_s;
}

class SteadyClockTimer final : public PhaseTimer {
 public:
  void begin(Phase phase) override { started_[static_cast<std::size_t>(phase)] = Clock::now(); }
  void end(Phase phase) override {
    const std::chrono::duration<double> d = Clock::now() - started_[static_cast<std::size_t>(phase)];
    slot(totals_, phase) += d.count();
  }
  PhaseSeconds collect() override { return std::exchange(totals_, PhaseSeconds{}); }
  void add(Phase phase, double seconds) override { slot(totals_, phase) += seconds; }

 private:
  using Clock = std::chrono::steady_clock;
  std::array<Clock::time_point, kPhases> started_{};
  PhaseSeconds totals_;
};

#ifdef DDPBENCH_HAVE_CUDA
// Events come from a pool that grows to the most intervals one step records and is reused.
class CudaEventTimer final : public PhaseTimer {
 public:
  explicit CudaEventTimer(const c10::Device& device) : device_(device) {}

  void begin(Phase phase) override {
    if (used_ == pool_.size()) pool_.emplace_back();
    open_[static_cast<std::size_t>(phase)] = used_;
    Interval& interval = pool_[used_++];
    interval.phase = phase;
    c10::cuda::CUDAGuard guard(device_);
    interval.start.record();
  }

  void end(Phase phase) override {
    const std::size_t index = std::exchange(open_[static_cast<std::size_t>(phase)], kNone);
    if (index == kNone) return;
    c10::cuda::CUDAGuard guard(device_);
    pool_[index].stop.record();
  }

  void add(Phase phase, double seconds) override { slot(added_, phase) += seconds; }

  PhaseSeconds collect() override {
    PhaseSeconds totals = std::exchange(added_, PhaseSeconds{});
    for (std::size_t i = 0; i < used_; ++i) {
      Interval& interval = pool_[i];
      interval.stop.synchronize();
      slot(totals, interval.phase) += static_cast<double>(interval.start.elapsed_time(interval.stop)) / 1e3;
    }
    used_ = 0;
    return totals;
  }

 private:
  struct Interval {
    Phase phase = Phase::data;
    at::cuda::CUDAEvent start{cudaEventDefault};
    at::cuda::CUDAEvent stop{cudaEventDefault};
  };
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  c10::Device device_;
  std::vector<Interval> pool_;
  std::size_t used_ = 0;
  std::array<std::size_t, kPhases> open_ = {kNone, kNone, kNone, kNone, kNone, kNone};
  PhaseSeconds added_;
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
