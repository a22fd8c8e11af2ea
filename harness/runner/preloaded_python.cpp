#include "harness/runner/preloaded_python.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "harness/base/clock.hpp"
#include "harness/launch/interruption.hpp"

extern char** environ;

namespace ddpbench {
namespace {

std::filesystem::path modules_file(const std::filesystem::path& socket) {
  return socket.parent_path() / (socket.filename().string() + ".modules");
}

pid_t spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Quiet: its own output is no row's; its errors still reach stderr.
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

}  // namespace

PreloadedPython::PreloadedPython(const std::string& python, const std::filesystem::path& reference_script,
                                 double ready_within_s) {
  std::error_code no_temp;
  std::string pattern = (std::filesystem::temp_directory_path(no_temp) / "ddpbench-python-XXXXXX").string();
  if (no_temp || ::mkdtemp(pattern.data()) == nullptr) {
    std::cerr << "ddpbench: PyTorch's ranks start their own Python: no folder for the preloaded one in $TMPDIR\n";
    return;
  }
  dir_ = pattern;
  const std::filesystem::path socket = dir_ / "rank-server.sock";
  // It ends with this process (its parent), however this one ends.
  pid_ = spawn({python, (reference_script.parent_path() / "rank_server.py").string(), socket.string(),
                std::to_string(::getpid())});
  const auto start = Clock::now();
  std::string why;
  bool said_waiting = false;
  while (pid_ > 0 && why.empty()) {
    if (interruption_signal() != 0) {
      stop();  // the sweep is stopping: no rank will need it
      return;
    }
    if (!said_waiting && seconds_since(start) > 10) {
      std::cerr << "ddpbench: waiting for the preloaded Python (" << python << ") to import torch\n";
      said_waiting = true;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      why = "it exited (" + std::string(WIFEXITED(status) ? "status " + std::to_string(WEXITSTATUS(status))
                                                          : "signal " + std::to_string(WTERMSIG(status))) + ")";
    } else if (std::filesystem::exists(socket) && std::filesystem::exists(modules_file(socket))) {
      ::setenv(kPreloadedPythonSocket, socket.c_str(), 1);
      ::setenv(kPreloadedPythonExecutable, python.c_str(), 1);
      return;
    } else if (seconds_since(start) > ready_within_s) {
      why = "it did not listen within " + std::to_string(static_cast<int>(ready_within_s)) + " s";
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (why.empty()) why = "it could not be started";
  std::cerr << "ddpbench: PyTorch's ranks start their own Python: the preloaded one (" << python << ") failed: " << why
            << "\n";
  stop();
}

PreloadedPython::~PreloadedPython() { stop(); }

void PreloadedPython::stop() {
  if (pid_ > 0) {
    // SIGTERM, and SIGKILL for a server that does not end within 10 s of it: a sweep never hangs on it.
    ::kill(pid_, SIGTERM);
    const auto asked = Clock::now();
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (seconds_since(asked) > 10) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }
  ::unsetenv(kPreloadedPythonSocket);
  ::unsetenv(kPreloadedPythonExecutable);
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

std::string preloaded_python_socket(const std::string& python) {
  const char* socket = std::getenv(kPreloadedPythonSocket);
  const char* executable = std::getenv(kPreloadedPythonExecutable);
  if (socket == nullptr || executable == nullptr || python != executable) return "";
  return std::filesystem::exists(socket) ? socket : "";
}

std::optional<std::string> preloaded_modules(const std::string& python) {
  const std::string socket = preloaded_python_socket(python);
  if (socket.empty()) return std::nullopt;
  std::ifstream in(modules_file(socket));
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return std::nullopt;
  return text.str();
}

}  // namespace ddpbench
