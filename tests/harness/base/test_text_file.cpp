#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

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

// A folder given as a result file failed as "basic_filebuf::underflow" (exit 1, compare's
// regression); a FIFO or /dev/zero hung every command that read it.
TEST(TextFile, WhatIsNoRegularFileIsRefusedUnread) {
  TempDir dir;
  std::filesystem::create_directories(dir / "folder");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  std::filesystem::create_symlink(dir / "folder", dir / "link");
  const auto refusal = [](const std::filesystem::path& path) {
    try {
      (void)read_text_file(path, "cannot read result file");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("read");
  };
  EXPECT_EQ(refusal(dir / "folder"), "cannot read result file '" + (dir / "folder").string() + "': a folder, not a file");
  EXPECT_EQ(refusal(dir / "link"), "cannot read result file '" + (dir / "link").string() + "': a folder, not a file");
  EXPECT_EQ(refusal(dir / "fifo"),
            "cannot read result file '" + (dir / "fifo").string() + "': not a regular file (a FIFO, a socket or a device)");
  EXPECT_EQ(refusal("/dev/zero"), "cannot read result file '/dev/zero': not a regular file (a FIFO, a socket or a device)");
}

}  // namespace
}  // namespace ddpbench
