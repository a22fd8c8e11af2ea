#pragma once
// A fresh folder under the system temp dir, removed with everything in it at scope exit.
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace ddpbench {

class ScratchDir {
 public:
  /// Throws std::runtime_error when the folder cannot be made.
  explicit ScratchDir(const std::string& prefix = "ddpbench") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a temporary folder " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace ddpbench
