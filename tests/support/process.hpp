#pragma once
// Runs a program to completion with its stdout and stderr captured (tests of the binary).
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness/launch/process_supervisor.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
  double elapsed_s = 0;    // from start to exit (or to the kill, when it ran out of time)
  bool timed_out = false;  // wait() was given a limit and the process outlived it (then killed)
};

/// A started process; wait() collects it. `extra_env` entries (NAME=VALUE) are added to,
/// or replace, this process's environment.
class SpawnedProcess {
 public:
  SpawnedProcess(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> env = environment_with(extra_env);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (dir_ / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (dir_ / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  SpawnedProcess(const SpawnedProcess&) = delete;
  SpawnedProcess& operator=(const SpawnedProcess&) = delete;
  ~SpawnedProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  [[nodiscard]] pid_t pid() const { return pid_; }
  /// Its stderr so far (the file it writes to), to watch it while it runs.
  [[nodiscard]] std::string err_so_far() const { return read_text(dir_ / "err"); }
  /// Waits up to 30 s until its stderr holds `text` (a row's progress line with
  /// --log-interval-steps 1, a line of an injected fault); the moment it first did. Tests wait
  /// for what a process says it did, never for a sleep a loaded machine can outrun.
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> when_said(const std::string& text) const {
    for (int i = 0; i < 1200; ++i) {
      if (err_so_far().find(text) != std::string::npos) return std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return std::nullopt;
  }

  /// Waits for the process; with a limit, one still running then is killed (SIGKILL) and
  /// reported as timed out.
  ProcessResult wait(std::optional<std::chrono::milliseconds> limit = std::nullopt) {
    ProcessResult result;
    if (pid_ > 0) {
      int status = 0;
      if (limit) {
        while (waitpid(pid_, &status, WNOHANG) == 0) {
          if (std::chrono::steady_clock::now() - started_ > *limit) {
            result.timed_out = true;
            ::kill(pid_, SIGKILL);
            waitpid(pid_, &status, 0);
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      } else {
        waitpid(pid_, &status, 0);
      }
      pid_ = -1;
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    result.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    result.out = read_text(dir_ / "out");
    result.err = read_text(dir_ / "err");
    return result;
  }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

inline ProcessResult run_process(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
  return SpawnedProcess(args, extra_env).wait();
}

/// The ddpbench binary under test: $DDPBENCH_BINARY, which ctest sets. Unset, the test fails
/// saying so (a bare name would fail to start, which read as a failed row on the first GPU run).
inline std::string ddpbench_binary() {
  const char* path = std::getenv("DDPBENCH_BINARY");
  if (path == nullptr || *path == '\0') {
    throw std::runtime_error("DDPBENCH_BINARY is not set: ctest sets it (tests/CMakeLists.txt, ENVIRONMENT)");
  }
  return path;
}

/// The processes whose command line holds `marker`.
inline std::vector<pid_t> pids_with(const std::string& marker) {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  while (dirent* entry = ::readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) continue;
    std::string cmdline = read_text(std::string("/proc/") + entry->d_name + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) != std::string::npos) pids.push_back(static_cast<pid_t>(std::stol(entry->d_name)));
  }
  ::closedir(proc);
  return pids;
}

}  // namespace ddpbench::testing
