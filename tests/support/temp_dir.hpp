#pragma once
// Scratch folders and small file helpers for tests.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "harness/base/scratch_dir.hpp"

namespace ddpbench::testing {

// Tests' scratch folders are the harness's own.
class TempDir : public ScratchDir {
 public:
  TempDir() : ScratchDir("ddpbench-test") {}
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace ddpbench::testing
