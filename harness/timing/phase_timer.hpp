#pragma once
// Per-step timing, measured where the work runs: CUDA events on the device's stream for a
// GPU, a steady clock on the CPU. A step's phases (data, forward, backward, comm,
// optimizer) are intervals inside it; its duration runs from the previous step's end (or
// the epoch's start) to its own. finish_step() closes a step and hands back a resolver, so
// the host need not wait for the device until the runner chooses to (each step, or once
// per log interval). Every phase is also a named range (NVTX and PyTorch's profiler) of the
// same name.
#include <functional>
#include <memory>
#include <string_view>

#include <c10/core/Device.h>

#include "harness/timing/named_range.hpp"
#include "harness/base/step_record.hpp"

namespace ddpbench {

// allreduce is not a slice of the step but the time its gradient allreduces were in
// flight, most of it hidden under backward; collective_wait is the time blocked in
// collectives inside forward and backward. Both are reported through add(). replicate is
// timed inside forward (its own scope nested in forward's) and stays part of it.
enum class Phase { data, forward, backward, comm, optimizer, allreduce, collective_wait, replicate };
std::string_view phase_name(Phase phase);
/// The field of `phases` that holds `phase`.
double& seconds_of(PhaseSeconds& phases, Phase phase);

struct StepTiming {
  double time_s = 0;
  PhaseSeconds phases;
};

class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  virtual void begin(Phase phase) = 0;
  virtual void end(Phase phase) = 0;
  /// Adjusts this step's phases with figures measured elsewhere. `adjust` is called once,
  /// when the step's timing is resolved (the device has finished the step), so it may read
  /// CUDA events recorded during it.
  virtual void add(std::function<void(PhaseSeconds&)> adjust) = 0;
  /// Adds `seconds` (negative: taken away; NaN: not measured) to this step's `phase`.
  void add(Phase phase, double seconds) {
    add([phase, seconds](PhaseSeconds& phases) { seconds_of(phases, phase) += seconds; });
  }
  /// The next step's duration starts here (the start of an epoch).
  virtual void mark_epoch_start() = 0;
  /// Closes the step. The returned function gives its timing, waiting for the device.
  virtual std::function<StepTiming()> finish_step() = 0;

  /// Closes the step and waits for its phases: for tests and callers that sync anyway.
  PhaseSeconds collect() { return finish_step()().phases; }
  /// The payload of the NVTX ranges that follow.
  void set_step(int64_t step) { step_ = step; }
  [[nodiscard]] int64_t step() const { return step_; }

 private:
  int64_t step_ = 0;
};

std::unique_ptr<PhaseTimer> make_phase_timer(const c10::Device& device);

/// Times one phase for the scope's lifetime, inside a named range of the phase's name.
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
  NamedScope range_;
};

}  // namespace ddpbench
