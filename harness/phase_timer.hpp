#pragma once
// Per-step phase times, measured where the work runs: CUDA events on the device's stream
// for a GPU (no host synchronisation until collect()), a steady clock on the CPU. Every
// phase is also an NVTX range of the same name, payload the global step.
#include <memory>
#include <string_view>

#include <c10/core/Device.h>

#include "harness/nvtx.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

// allreduce is not a slice of the step but the summed duration of its gradient
// allreduces, which overlap backward; strategies report it through add().
enum class Phase { data, forward, backward, comm, optimizer, allreduce };
std::string_view phase_name(Phase phase);

class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  virtual void begin(Phase phase) = 0;
  virtual void end(Phase phase) = 0;
  /// Seconds per phase since the last collect(); waits for the work it timed.
  virtual PhaseSeconds collect() = 0;
  /// Adds a duration measured elsewhere (NaN: not measured) to this step's `phase`.
  virtual void add(Phase phase, double seconds) = 0;
  /// The payload of the NVTX ranges that follow.
  void set_step(int64_t step) { step_ = step; }
  [[nodiscard]] int64_t step() const { return step_; }

 private:
  int64_t step_ = 0;
};

std::unique_ptr<PhaseTimer> make_phase_timer(const c10::Device& device);

/// Times one phase for the scope's lifetime, inside an NVTX range of the phase's name.
class PhaseScope {
 public:
  PhaseScope(PhaseTimer& timer, Phase phase)
      : timer_(timer), phase_(phase), range_(std::string(phase_name(phase)), timer.step()) {
    timer_.begin(phase_);
  }
  ~PhaseScope() { timer_.end(phase_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimer& timer_;
  Phase phase_;
  nvtx::ScopedRange range_;
};

}  // namespace ddpbench
