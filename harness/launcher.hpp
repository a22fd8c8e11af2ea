#pragma once
// The launcher: starts N copies of this binary as the ranks of one run, with the variables
// torchrun would set, and supervises them. Their stderr is relayed line by line, prefixed
// with the rank, and its tail kept. When a rank fails or dies, the others get SIGTERM, then
// SIGKILL after a grace period; SIGINT or SIGTERM to the launcher stops them all. Children
// die with the launcher (PR_SET_PDEATHSIG), so none is left behind. No LibTorch.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddpbench {

struct LaunchOptions {
  std::string program;             // what to execute (the running binary: /proc/self/exe)
  std::vector<std::string> args;   // its arguments (argv[1..]), the same for every rank
  int64_t nproc = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;         // 0: a free port on this machine
  std::chrono::milliseconds grace{5000};  // between SIGTERM and SIGKILL
  std::size_t stderr_tail_lines = 20;
};

struct RankFailure {
  int64_t rank = 0;
  int exit_code = 0;   // when it exited
  int signal = 0;      // when a signal killed it
  std::vector<std::string> stderr_tail;
  [[nodiscard]] std::string describe() const;  // "rank 1 was killed by signal 9 (Killed)"
};

struct LaunchOutcome {
  std::optional<RankFailure> failure;  // the first rank to fail, if any
  bool interrupted = false;            // SIGINT/SIGTERM reached the launcher
  int64_t master_port = 0;             // the port the ranks used
};

/// Runs the ranks to completion. Throws std::runtime_error if they cannot be started.
LaunchOutcome launch_ranks(const LaunchOptions& options);

/// A TCP port on `address` that nothing listens on right now.
int64_t free_port(const std::string& address = "127.0.0.1");

}  // namespace ddpbench
