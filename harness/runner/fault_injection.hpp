#pragma once
// The test-only faults a row plays when asked (--inject-*), so that the diagnosis and the CI
// gate can be tried against a known cause: a rank that dies (SIGKILL) or hangs alive before a
// step's collectives, or dies inside the step's first collective once its progress record
// says it entered it (ahead of the others, as a rank the OOM killer takes mid-allreduce), and
// steps stretched by real busy work, on every rank (a slower build) or on one (a straggler).
// The runner calls it around each step.
#include <cstdint>
#include <optional>

#include "harness/control/run_config.hpp"
#include "harness/distributed/communicator.hpp"

namespace ddpbench {

class FaultInjection {
 public:
  /// `comm`: the rank's communicator (null in a row without one).
  FaultInjection(const RunConfig& config, int64_t rank, Communicator* comm);

  /// Before `global_step`'s first collective: this rank kills itself, hangs (alive, its
  /// heartbeat beating) until SIGINT or SIGTERM asks it to stop, or arms its death inside the
  /// step's first collective, where asked to.
  void before_step(int64_t global_step) const;

  /// Whether this rank's steps are stretched anywhere.
  [[nodiscard]] bool slows_steps() const { return slowdown_ > 0; }
  /// Whether this rank's steps are stretched in `phase`.
  [[nodiscard]] bool slows(SlowedPhase phase) const { return slowdown_ > 0 && phase == phase_; }

  /// Busy work for the slowdown's fraction of `step_s`, the host time this step's training
  /// took; returns the seconds spent (after the optimizer step).
  [[nodiscard]] double stretch(double step_s) const;
  /// Busy work in `phase` (data, forward, backward) for the slowdown's fraction of the last
  /// step's training time, when this rank is slowed there; returns the seconds spent.
  double stretch_in(SlowedPhase phase) const;
  /// This step's training starts now, and took `training_s` of host time (busy work aside).
  void training_starts() { stretched_s_ = 0; }
  void training_took(double training_s);

 private:
  int64_t rank_;
  Communicator* comm_;
  std::optional<int64_t> fault_rank_, fault_step_;
  InjectedFault fault_kind_;
  double slowdown_ = 0;
  SlowedPhase phase_ = SlowedPhase::optimizer;
  double last_training_s_ = 0;
  mutable double stretched_s_ = 0;  // busy work since the training started
};

}  // namespace ddpbench
