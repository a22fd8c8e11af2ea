#pragma once
// A rank's side of a lockstep run (scripts/lib/lockstep.py, `scripts/ci-bench --against`): two
// builds run the same row at once and take turns step by step, so that whatever the machine
// does falls on both. Before each step the rank blocks on a socket read (never a spin: on two
// cores a spinning idle build takes the active one's core) until the coordinator gives its
// build the turn; after the step it says it is done. Off unless DDPBENCH_LOCKSTEP_SOCKET is set.
// Protocol, one line each: "hello ARM ROW RANK WORLD PID", then per step "go" (coordinator) and
// "done STEP" (rank; STEP -1: the turn passed without a step); "end" when training is over, and
// "bye" when every build's is.
// No LibTorch.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace ddpbench {

class LockstepTurns {
 public:
  /// Connected to the coordinator when the environment names one (DDPBENCH_LOCKSTEP_SOCKET and
  /// DDPBENCH_LOCKSTEP_ARM), else null: the row runs free. Throws std::runtime_error naming the
  /// socket when it is named and cannot be reached.
  static std::unique_ptr<LockstepTurns> from_environment(const std::string& row, int64_t rank, int64_t world);
  LockstepTurns(const std::string& socket_path, const std::string& hello);
  ~LockstepTurns();
  LockstepTurns(const LockstepTurns&) = delete;
  LockstepTurns& operator=(const LockstepTurns&) = delete;

  /// Blocks until this build has the turn; false when a signal (SIGINT, SIGTERM) interrupted
  /// the wait or the coordinator hung up while one is pending. Throws std::runtime_error when
  /// the coordinator hung up otherwise: the row cannot be timed in lockstep.
  bool wait_for_turn();
  /// The turn is over: `step` ran (or -1: none did). Only after a turn was given.
  void release(int64_t step);
  /// Training is over: the coordinator gives the other build every turn from now on, and this
  /// call blocks until the other build's training is over too ("bye", or the coordinator gone).
  /// Never throws: a coordinator already gone holds nothing.
  void end();
  /// The seconds spent blocked in wait_for_turn so far: not training, left out of train_time_s.
  [[nodiscard]] double waited_s() const { return waited_s_; }

 private:
  void send_line(const std::string& line);
  /// The coordinator's next line (blocking); nullopt when it hung up, the read failed (hang_up_
  /// says which), or a signal asked this process to stop.
  std::optional<std::string> read_line();
  int fd_ = -1;
  bool holding_ = false;
  bool ended_ = false;
  double waited_s_ = 0;
  std::string buffered_;
  std::string hang_up_;
};

}  // namespace ddpbench
