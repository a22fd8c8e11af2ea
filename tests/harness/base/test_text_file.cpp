#include <gtest/gtest.h>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/text_file.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

TEST(TextFile, ReadsTheWholeFileBytesIncluded) {
  TempDir dir;
  const std::string content("line one\nline two\r\n\0with a nul", 30);
  write_file_atomically(dir / "in.txt", content);
  EXPECT_EQ(read_text_file(dir / "in.txt", "cannot read"), content);
}

TEST(TextFile, AFileThatCannotBeOpenedIsBadInputNamingIt) {
  TempDir dir;
  try {
    (void)read_text_file(dir / "absent.json", "--calibrate: cannot read");
    FAIL() << "no error for a missing file";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--calibrate: cannot read '" + (dir / "absent.json").string() + "'");
  }
}

}  // namespace
}  // namespace ddpbench
