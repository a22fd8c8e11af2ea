#pragma once
// Runs a program to completion with its stdout and stderr captured (tests of the binary).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

extern char** environ;

namespace ddpbench::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
};

inline ProcessResult run_process(const std::vector<std::string>& args) {
  TempDir dir;
  const std::string out_path = (dir / "out").string();
  const std::string err_path = (dir / "err").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  ProcessResult result;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  result.out = read_text(out_path);
  result.err = read_text(err_path);
  return result;
}

/// The ddpbench binary under test: $DDPBENCH_BINARY, which ctest sets.
inline std::string ddpbench_binary() {
  const char* path = std::getenv("DDPBENCH_BINARY");
  return path != nullptr ? path : "ddpbench";
}

}  // namespace ddpbench::testing
