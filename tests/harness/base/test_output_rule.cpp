// The one output rule (harness/base/output_rule.hpp): an output is never an input or another
// output, however it is spelled or linked, and replaces only a file of its own kind.
// tests/scripts/test_output_rule.py holds scripts/lib/output_rule.py to the same cases.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "harness/base/output_rule.hpp"
#include "support/input_error_message.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

// "ours" files start with "ours": the recogniser of the test's one kind of output.
CommandOutput output(const std::string& name, const std::filesystem::path& path) {
  return {name, path, "a file of ours",
          own_kind_by_text([](std::string_view text) { return text.starts_with("ours"); })};
}

// The message of the refusal, or "" where the files pass.
std::string refusal(const std::vector<CommandInput>& inputs, const std::vector<CommandOutput>& outputs) {
  return testing::input_error_message([&] { check_command_files(inputs, outputs); });
}

TEST(OutputRule, AnOutputIsNeverAnInputHoweverItIsSpelledOrLinked) {
  TempDir dir;
  testing::write_text(dir / "in.json", "ours, and read");
  std::filesystem::create_directories(dir / "sub");
  std::filesystem::create_symlink(dir / "in.json", dir / "link.json");
  std::filesystem::create_hard_link(dir / "in.json", dir / "hard.json");
  for (const auto& same : {dir / "in.json", dir / "sub/../in.json", dir / "./in.json", dir / "link.json",
                           dir / "hard.json"}) {
    const std::string why = refusal({{"CURRENT", dir / "in.json"}}, {output("--out", same)});
    EXPECT_NE(why.find("--out '" + same.string() + "' is the file CURRENT '" + (dir / "in.json").string() + "' reads"),
              std::string::npos)
        << same << ": " << why;
  }
  // Not yet there, an input's path spelled otherwise is still that input.
  EXPECT_NE(refusal({{"--file", dir / "new.json"}}, {output("--out", dir / "sub/../new.json")}), "");
  EXPECT_EQ(refusal({{"CURRENT", dir / "in.json"}}, {output("--out", dir / "out.json")}), "");
}

// One folder under two mounts (a bind mount): two outputs of one name in it are one file before
// either is written, though their paths resolve apart (each write would replace the other's).
TEST(OutputRule, TwoOutputsInOneFolderUnderTwoMountsAreOneFile) {
  TempDir dir;
  std::filesystem::create_directories(dir / "real");
  std::filesystem::create_directories(dir / "alias");
  if (::mount((dir / "real").c_str(), (dir / "alias").c_str(), nullptr, MS_BIND, nullptr) != 0) {
    GTEST_SKIP() << "cannot bind-mount a folder here (needs root): " << std::strerror(errno);
  }
  const std::string clash = refusal({}, {output("--out", dir / "real/c.md"), output("--undecided-out", dir / "alias/c.md")});
  const std::string input = refusal({{"CURRENT", dir / "alias/new.json"}}, {output("--out", dir / "real/new.json")});
  const std::string apart = refusal({}, {output("--out", dir / "real/c.md"), output("--undecided-out", dir / "alias/d.md")});
  ::umount2((dir / "alias").c_str(), MNT_DETACH);
  EXPECT_NE(clash.find("writes too"), std::string::npos) << clash;
  EXPECT_NE(input.find("is the file CURRENT"), std::string::npos) << input;
  EXPECT_EQ(apart, "");
}

// "link/.." is the parent of where the link points, as the kernel resolves it, not the folder that
// holds the link: by text, "l/../in.json" is DIR/in.json, a new file, where the write lands on
// DIR/sub/in.json, the input; and on a user's notes there, which are not of the output's kind.
TEST(OutputRule, ALinkFollowedByDotDotLandsWhereTheKernelSays) {
  TempDir dir;
  std::filesystem::create_directories(dir / "sub/inner");
  testing::write_text(dir / "sub/in.json", "ours, and read");
  testing::write_text(dir / "sub/notes.md", "a user's notes");
  std::filesystem::create_directory_symlink(dir / "sub/inner", dir / "l");
  for (const auto& spelled : {dir / "l/../in.json", dir / "missing/../l/../in.json"}) {
    EXPECT_NE(refusal({{"CURRENT", dir / "sub/in.json"}}, {output("--out", spelled)}).find("is the file CURRENT"),
              std::string::npos)
        << spelled;
  }
  for (const auto& spelled : {dir / "l/../notes.md", dir / "missing/../l/../notes.md"}) {
    EXPECT_NE(refusal({}, {output("--out", spelled)}).find("exists and is not a file of ours"), std::string::npos)
        << spelled;
  }
  EXPECT_NE(refusal({}, {output("--out", dir / "l/../in.json"), output("--json", dir / "sub/in.json")}), "");
  EXPECT_EQ(refusal({{"CURRENT", dir / "sub/in.json"}}, {output("--out", dir / "l/../new.json")}), "");
}

// A link through a folder that is not there yet leads where the kernel will lead it once another
// output makes that folder (the ninth attack: `B -> M/../real`, `--out M/x.md --undecided-out
// B/base.json` wrote over the baseline, exit 0; a dangling `B -> A` made two outputs one file).
TEST(OutputRule, ALinkThroughAFolderNotYetMadeLandsWhereItWillLead) {
  TempDir dir;
  std::filesystem::create_directories(dir / "real");
  testing::write_text(dir / "real/base.json", "ours, and read");
  testing::write_text(dir / "real/notes.txt", "a user's notes");
  std::filesystem::create_symlink("M/../real", dir / "B");
  std::filesystem::create_symlink("A", dir / "D");
  EXPECT_NE(refusal({{"BASELINE", dir / "real/base.json"}}, {output("--out", dir / "M/x.md"),
                                                             output("--undecided-out", dir / "B/base.json")})
                .find("is the file BASELINE"),
            std::string::npos);
  EXPECT_NE(refusal({}, {output("--save-checkpoint", dir / "B/notes.txt")}).find("exists and is not a file of ours"),
            std::string::npos);
  EXPECT_NE(refusal({}, {output("--out", dir / "A/r.json"), output("--save-checkpoint", dir / "D/r.json")})
                .find("writes too"),
            std::string::npos);
  // A loop of links leads nowhere: refused, naming the output.
  std::filesystem::create_symlink("loop2", dir / "loop1");
  std::filesystem::create_symlink("loop1", dir / "loop2");
  EXPECT_NE(refusal({}, {output("--out", dir / "loop1/x.md")}).find("too many links to follow"), std::string::npos);
}

TEST(OutputRule, TwoOutputsAreNeverOneFile) {
  TempDir dir;
  const std::string why =
      refusal({}, {output("--out", dir / "a.json"), output("--save-checkpoint", dir / "sub/../a.json")});
  EXPECT_NE(why.find("--save-checkpoint '" + (dir / "sub/../a.json").string() + "' is the file --out '" +
                     (dir / "a.json").string() + "' writes too"),
            std::string::npos)
      << why;
}

// The seventh attack: `sweep --reports-dir` at a row's result file made a folder of it and wrote
// its reports there; the row failed ("a folder, not a file"), exit 1, files written.
TEST(OutputRule, AnOutputNeverLiesUnderAnotherOutputsFile) {
  TempDir dir;
  const std::string why = refusal({}, {output("row single's result file", dir / "rows/single.json"),
                                       output("--reports-dir's results.json", dir / "rows/single.json/results.json")});
  EXPECT_NE(why.find("--reports-dir's results.json '" + (dir / "rows/single.json/results.json").string() +
                     "' lies under the file row single's result file '" + (dir / "rows/single.json").string() +
                     "' writes"),
            std::string::npos)
      << why;
  const std::string dotted = refusal({}, {output("--reports-dir's results.md", dir / "r/x/../single.json/results.md"),
                                          output("row single's result file", dir / "r/single.json")});
  EXPECT_NE(dotted.find("lies under the file row single's result file"), std::string::npos) << dotted;
  EXPECT_EQ(refusal({}, {output("--out", dir / "rows/single.json"), output("--trace", dir / "rows/single.rank0.json")}),
            "");
}

TEST(OutputRule, AnExistingFileIsReplacedOnlyWhereItIsOfItsOwnKind) {
  TempDir dir;
  testing::write_text(dir / "earlier.json", "ours from before");
  testing::write_text(dir / "mine.svg", "<svg a user's own drawing");
  std::filesystem::create_directories(dir / "folder");
  EXPECT_EQ(refusal({}, {output("--out", dir / "earlier.json")}), "");
  EXPECT_EQ(refusal({}, {output("--out", dir / "new.json")}), "");
  for (const auto& taken : {dir / "mine.svg", dir / "folder"}) {
    const std::string why = refusal({}, {output("--svg", taken)});
    EXPECT_NE(why.find("--svg '" + taken.string() + "' exists and is not a file of ours (what --svg writes)"),
              std::string::npos)
        << why;
  }
  // A recogniser reads what it is given, never a file past its bound.
  const CommandOutput small{"--out", dir / "earlier.json", "a file of ours",
                            own_kind_by_text([](std::string_view) { return true; }, 4)};
  EXPECT_NE(refusal({}, {small}), "");
}

TEST(OutputRule, APathNotGivenIsLeftOut) {
  TempDir dir;
  testing::write_text(dir / "x", "not ours");
  EXPECT_EQ(refusal({{"--init-from", ""}}, {output("--out", ""), output("--json", "")}), "");
}

}  // namespace
}  // namespace ddpbench
