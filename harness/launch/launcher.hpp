#pragma once
// The launcher: starts N copies of this binary as the ranks of one run, with the variables
// torchrun would set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), and supervises them through harness/launch/process_supervisor.hpp. No LibTorch.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/launch/process_supervisor.hpp"

namespace ddpbench {

struct LaunchOptions {
  std::string program;            // what to execute (the running binary)
  std::vector<std::string> args;  // its arguments (argv[1..]), the same for every rank
  int64_t nproc = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;        // 0: a free port on this machine
  std::vector<std::string> env;   // NAME=VALUE for every rank, beside torchrun's variables
  SuperviseOptions supervise;
};

struct LaunchOutcome {
  std::optional<ProcessExit> failure;  // the first rank to fail, if any
  int64_t failed_rank = -1;            // its rank
  bool interrupted = false;            // SIGINT/SIGTERM reached the launcher
  int64_t master_port = 0;             // the port the ranks used
};

/// Runs the ranks to completion. Throws std::runtime_error if they cannot be started.
LaunchOutcome launch_ranks(const LaunchOptions& options);

/// A TCP port on `address` that nothing listens on right now.
int64_t free_port(const std::string& address = "127.0.0.1");

}  // namespace ddpbench
