#include <gtest/gtest.h>

#include "harness/base/input_error.hpp"
#include "reports/result_file.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

std::string read_error(const std::filesystem::path& path) {
  try {
    read_result_file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ResultFile, WritesAndReadsBack) {
  TempDir dir;
  ResultDocument doc;
  doc.runs.emplace_back();
  doc.runs[0].name = "ddp-2gpu";
  write_result_file(dir / "out/r.json", doc);
  const auto back = read_result_file(dir / "out/r.json");
  ASSERT_EQ(back.runs.size(), 1u);
  EXPECT_EQ(back.runs[0].name, "ddp-2gpu");
}

TEST(ResultFile, BadFilesAreInputErrorsNamingTheFile) {
  TempDir dir;
  EXPECT_NE(read_error(dir / "missing.json").find("missing.json"), std::string::npos);
  testing::write_text(dir / "bad.json", "{ not json");
  EXPECT_NE(read_error(dir / "bad.json").find("bad.json' is not valid JSON"), std::string::npos);
  testing::write_text(dir / "other.json", R"({"schema": "something/else", "runs": []})");
  EXPECT_NE(read_error(dir / "other.json").find("not a ddpbench result file"), std::string::npos);
}

}  // namespace
}  // namespace ddpbench
