#include <gtest/gtest.h>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

std::size_t entries(const std::filesystem::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, WritesContentCreatesFoldersAndLeavesNoTemporary) {
  TempDir dir;
  write_file_atomically(dir / "a/b/out.txt", "hello");
  EXPECT_EQ(testing::read_text(dir / "a/b/out.txt"), "hello");
  write_file_atomically(dir / "a/b/out.txt", "replaced");
  EXPECT_EQ(testing::read_text(dir / "a/b/out.txt"), "replaced");
  EXPECT_EQ(entries(dir / "a/b"), 1u);
}

TEST(AtomicFile, FailureLeavesTheOldFileIntact) {
  TempDir dir;
  write_file_atomically(dir / "keep.txt", "old");
  // A folder where the file should go makes the final rename fail.
  std::filesystem::create_directories(dir / "blocked.txt/inner");
  EXPECT_THROW(write_file_atomically(dir / "blocked.txt", "new"), std::runtime_error);
  EXPECT_EQ(testing::read_text(dir / "keep.txt"), "old");
  EXPECT_EQ(entries(dir.path()), 2u);
}

TEST(AtomicFile, RequireWritableNamesTheProblem) {
  TempDir dir;
  EXPECT_NO_THROW(require_writable(dir / "new/deeper/out.json", "--out"));
  EXPECT_FALSE(std::filesystem::exists(dir / "new"));
  testing::write_text(dir / "plain-file", "x");
  try {
    require_writable(dir / "plain-file/out.json", "--out");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--out: cannot write"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("is not a folder"), std::string::npos);
  }
  EXPECT_THROW(require_writable(dir.path(), "--out"), InputError);
  EXPECT_THROW(require_writable("", "--out"), InputError);
}

}  // namespace
}  // namespace ddpbench
