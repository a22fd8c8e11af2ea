#pragma once
// Starting and supervising child processes (the ranks of a run, the rows of a sweep):
// each child's stderr is relayed line by line under a label and its tail kept; when one
// fails, the others get SIGTERM and, after a grace period, SIGKILL; SIGINT or SIGTERM to
// this process (harness/launch/interruption.hpp) stops them all the same way; children die
// with this process (PR_SET_PDEATHSIG), so none is left behind. No LibTorch.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace ddpbench {

struct ProcessSpec {
  std::string label;              // "rank 1", "row ddp-2gpu": prefixes relayed lines
  std::string program;            // an absolute path: no PATH search, no shell
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> env;   // the complete environment, NAME=VALUE
  bool discard_stdout = false;
};

/// How this binary says bad input (main, then exit 2): a child's line starting so is its own.
inline constexpr std::string_view kBadInputPrefix = "ddpbench: error: ";

struct ProcessExit {
  std::string label;
  int exit_code = 0;  // when it exited
  int signal = 0;     // when a signal ended it
  std::vector<std::string> stderr_tail;
  [[nodiscard]] bool failed() const { return signal != 0 || exit_code != 0; }
  /// "rank 1 was killed by signal 9 (Killed)", "row x exited with status 2".
  [[nodiscard]] std::string describe() const;
  /// The last `lines` lines of stderr, newline-separated.
  [[nodiscard]] std::string tail(std::size_t lines) const;
  /// What a child of this binary found bad in its input (exit 2 and its last "ddpbench: error:
  /// why" line): the why; nullopt for any other end.
  [[nodiscard]] std::optional<std::string> bad_input() const;
};

struct SuperviseOptions {
  std::chrono::milliseconds grace{5000};  // between SIGTERM and SIGKILL
  std::size_t stderr_tail_lines = 20;
  bool prefix_relayed_lines = true;       // "[label] line"; off relays lines unchanged
  bool relay = true;                      // off: stderr is kept (the tail) but not shown
  // Lines kept in the tail but not shown (a rank's bad input, which its launcher says once).
  std::function<bool(std::string_view line)> withhold;
  // Called every round of supervision (about every 50 ms) while children run, and once when
  // the first child fails, before the others are stopped: what the caller watches of them
  // (the ranks' progress) is then still as it was when the failure came.
  std::function<void()> on_poll;
  std::function<void()> on_first_failure;
};

struct SupervisedRun {
  std::vector<ProcessExit> exits;          // in the order of the specs
  std::optional<std::size_t> first_failure;  // index into exits of the failure that stopped the rest
  bool interrupted = false;                // SIGINT/SIGTERM reached this process
};

/// Starts every spec and returns when all have ended. Throws std::runtime_error when a
/// process cannot be started (the ones already started are killed first).
SupervisedRun run_supervised(const std::vector<ProcessSpec>& specs, const SuperviseOptions& options = {});

/// This process's environment with `overrides` (NAME=VALUE) replacing or adding entries, and
/// without the variables `drop` says yes to (by name).
std::vector<std::string> environment_with(const std::vector<std::string>& overrides,
                                          const std::function<bool(std::string_view name)>& drop = {});

/// `name`'s path from PATH, as a shell finds it (a name holding '/' is taken as given);
/// empty when no executable of that name is found. ProcessSpec execs an absolute path.
std::string find_executable(const std::string& name);

/// The running executable's absolute path.
std::string current_executable();

}  // namespace ddpbench
