#include "harness/runner/fault_injection.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "harness/base/clock.hpp"
#include "harness/launch/interruption.hpp"

namespace ddpbench {

FaultInjection::FaultInjection(const RunConfig& config, int64_t rank, Communicator* comm)
    : rank_(rank),
      comm_(comm),
      fault_rank_(config.inject_fault_rank),
      fault_step_(config.inject_fault_step),
      fault_kind_(config.inject_fault_kind),
      slowdown_(!config.inject_slowdown_rank || *config.inject_slowdown_rank == rank ? config.inject_slowdown : 0),
      phase_(config.inject_slowdown_phase) {}

void FaultInjection::before_step(int64_t global_step) const {
  if (fault_rank_ != rank_ || fault_step_ != global_step) return;
  std::fprintf(stderr, "ddpbench: rank %lld: --inject-fault-step %lld: %s\n", static_cast<long long>(rank_),
               static_cast<long long>(global_step),
               fault_kind_ == InjectedFault::kill   ? "killing this rank"
               : fault_kind_ == InjectedFault::hang ? "hanging here, alive, until signalled"
                                                    : "killing this rank inside the step's first collective");
  std::fflush(stderr);
  if (fault_kind_ == InjectedFault::kill) std::raise(SIGKILL);
  if (fault_kind_ == InjectedFault::kill_in_collective) {
    if (comm_ == nullptr) std::raise(SIGKILL);  // validate() admits it for ddp only
    // Dead a little after entering: two heartbeats, so the others read it as inside, ahead.
    comm_->on_next_collective([] {
      std::this_thread::sleep_for(2 * Communicator::heartbeat_period() + std::chrono::milliseconds(100));
      std::raise(SIGKILL);
    });
    return;
  }
  // Alive, as a rank stuck in its own code is: the heartbeat thread keeps beating, and only a
  // signal (the launcher stopping the row) ends the wait.
  while (interruption_signal() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

double FaultInjection::stretch(double step_s) const {
  if (slowdown_ <= 0 || !(step_s > 0)) return 0;
  // Busy, not asleep: the rank does the extra work a slower build would, holding its core.
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(slowdown_ * step_s));
  volatile uint64_t spins = 0;
  while (Clock::now() < until) spins = spins + 1;
  const double spent = seconds_since(start);
  stretched_s_ += spent;
  return spent;
}

double FaultInjection::stretch_in(SlowedPhase phase) const {
  return slows(phase) && phase != SlowedPhase::optimizer ? stretch(last_training_s_) : 0;
}

void FaultInjection::training_took(double training_s) { last_training_s_ = std::max(0.0, training_s - stretched_s_); }

}  // namespace ddpbench
