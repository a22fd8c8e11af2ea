#include <gtest/gtest.h>
#include <sys/stat.h>

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
  // The folder is made and probed with a real file, which is gone again.
  EXPECT_NO_THROW(require_writable(dir / "new/deeper/out.json", "--out"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "new/deeper"));
  EXPECT_TRUE(std::filesystem::is_empty(dir / "new/deeper"));
  testing::write_text(dir / "plain-file", "x");
  const auto message = [](const std::filesystem::path& path) {
    try {
      require_writable(path, "--out");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(dir / "plain-file/out.json").find("--out: cannot write"), std::string::npos);
  EXPECT_NE(message(dir / "plain-file/out.json").find("cannot create folder"), std::string::npos);
  // access() says yes to root there; a real file does not.
  EXPECT_NE(message("/proc/nope/o.json").find("cannot create folder '/proc/nope'"), std::string::npos)
      << message("/proc/nope/o.json");
  EXPECT_NE(message("/proc/self/o.json").find("is not writable"), std::string::npos) << message("/proc/self/o.json");
  EXPECT_THROW(require_writable(dir.path(), "--out"), InputError);
  EXPECT_THROW(require_writable("", "--out"), InputError);
}

// sweep --out-dir s/deep/er --gbench-json /proc/nope/g.json: refused for the second, it left the
// first's folders made.
TEST(AtomicFile, AllWritableOrNoFolderMadeForAny) {
  TempDir dir;
  EXPECT_THROW(require_all_writable({{dir / "s/deep/er/results.json", "--out-dir"}, {"/proc/nope/g.json", "--gbench-json"}}),
               InputError);
  EXPECT_FALSE(std::filesystem::exists(dir / "s"));
  std::filesystem::create_directories(dir / "kept");
  testing::write_text(dir / "kept/mine", "x");
  EXPECT_THROW(require_all_writable({{dir / "kept/out.json", "--out-dir"}, {"/proc/nope/g.json", "--gbench-json"}}),
               InputError);
  EXPECT_EQ(testing::read_text(dir / "kept/mine"), "x") << "a folder that was there stays, with what it holds";
  EXPECT_NO_THROW(require_all_writable({{dir / "a/out.json", "--out-dir"}, {dir / "b/c/g.json", "--gbench-json"}}));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "b/c"));
}

// A link at an output's folder that leads nowhere is no folder the command made: refused, the
// link stays (the ninth attack: every command removed it on its way out).
TEST(AtomicFile, ARefusedOutputLeavesALinkThatLeadsNowhere) {
  TempDir dir;
  std::filesystem::create_symlink("/nonexistent-scratch/me/results", dir / "results");
  EXPECT_THROW(require_all_writable({{dir / "results/results.json", "--out-dir"}}), InputError);
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "results"));
  EXPECT_THROW(require_writable(dir / "results/x.md", "--out"), InputError);
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "results"));
}

// What a refused command made is found where the kernel puts it: `m/../yours` makes `m`, never
// `yours` (a user's empty folder was removed as one made); a name the file system takes whose
// temporary name it does not is refused before any work (it failed after, exit 1).
TEST(AtomicFile, ARefusedOutputRemovesOnlyWhatItMadeAndProbesTheTemporarysName) {
  TempDir dir;
  std::filesystem::create_directories(dir / "yours");
  testing::write_text(dir / "afile", "x");
  EXPECT_THROW(require_all_writable({{dir / "m/../yours/x.md", "--out"}, {dir / "afile/u.txt", "--undecided-out"}}),
               InputError);
  EXPECT_TRUE(std::filesystem::is_directory(dir / "yours"));
  EXPECT_FALSE(std::filesystem::exists(dir / "m"));
  EXPECT_THROW(require_writable(dir / std::string(250, 'w'), "--out"), InputError);
  EXPECT_NO_THROW(require_writable(dir / std::string(240, 'w'), "--out"));
}

// A file replaced keeps its mode (a user's 0600 was made 0644); a new one takes the umask's.
TEST(AtomicFile, AReplacedFileKeepsItsModeAndANewOneTakesTheUmask) {
  TempDir dir;
  testing::write_text(dir / "mine.md", "x");
  std::filesystem::permissions(dir / "mine.md", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  write_file_atomically(dir / "mine.md", "y");
  EXPECT_EQ(std::filesystem::status(dir / "mine.md").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const mode_t before = ::umask(077);
  write_file_atomically(dir / "new.md", "z");
  ::umask(before);
  EXPECT_EQ(std::filesystem::status(dir / "new.md").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

}  // namespace
}  // namespace ddpbench
