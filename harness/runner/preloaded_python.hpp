#pragma once
// A Python that already holds torch (strategies/pytorch/rank_server.py), started once for a
// sweep's PyTorch rows: each of their ranks is forked from it (rank_client.py) rather than
// started and importing torch again, and a row's check that torch is there reads what the
// server imported instead of starting a Python to find out. The ranks find it through the
// environment this sets; where it is gone they start their own Python, as without it.
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

namespace ddpbench {

/// The environment variables the sweep's server is announced by (for the rows and their ranks).
inline constexpr const char* kPreloadedPythonSocket = "DDPBENCH_PYTORCH_SERVER";
inline constexpr const char* kPreloadedPythonExecutable = "DDPBENCH_PYTORCH_SERVER_PYTHON";

class PreloadedPython {
 public:
  /// Starts `python` on rank_server.py beside `reference_script`, waits until it listens (at
  /// most `ready_within_s`), then announces it. A server that fails to start is said on stderr
  /// and the ranks start their own Python.
  PreloadedPython(const std::string& python, const std::filesystem::path& reference_script, double ready_within_s = 120);
  ~PreloadedPython();
  PreloadedPython(const PreloadedPython&) = delete;
  PreloadedPython& operator=(const PreloadedPython&) = delete;
  [[nodiscard]] bool running() const { return pid_ > 0; }

 private:
  void stop();
  pid_t pid_ = -1;
  std::filesystem::path dir_;
};

/// The socket of the server announced in this process's environment when it runs `python`;
/// empty when none is announced for that Python or it is gone.
std::string preloaded_python_socket(const std::string& python);

/// What that server imported ("torch torchvision"); nullopt where there is none.
std::optional<std::string> preloaded_modules(const std::string& python);

}  // namespace ddpbench
