#include <gtest/gtest.h>

#include <tuple>

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

// run --out replaced a sweep's results.json (or a stored baseline: one) with its one row: a run's
// own kind is a result file without a sweep section.
TEST(ResultFile, ARowsResultFileIsOneWithoutASweep) {
  EXPECT_TRUE(is_row_result_document(R"({"schema": "ddpbench/result/v1", "runs": []})"));
  EXPECT_FALSE(is_row_result_document(R"({"schema": "ddpbench/result/v1", "runs": [], "sweep": {}})"));
  EXPECT_TRUE(is_result_document(R"({"schema": "ddpbench/result/v1", "runs": [], "sweep": {}})"));
  EXPECT_FALSE(is_row_result_document("a user's notes"));
}

// A twin compared with anything but its row's run without SyncBatchNorm (the row itself, the
// twin, another row or twin, a run not there), or a row that is no twin compared with
// anything: a file no sweep writes, refused rather than gated on the wrong pair or on none.
TEST(ResultFile, ATwinComparedWithTheRowOrItselfIsRefused) {
  TempDir dir;
  ResultDocument doc;
  doc.sweep = SweepInfo{};
  for (const auto& [name, reference_of, compared_with] :
       {std::tuple{"ddp.torch", "ddp", "ddp"}, {"ddp.torch", "ddp", "ddp.torch"}, {"ddp", "", "ddp.no-sync-bn"},
        {"ddp.torch", "ddp", "single"}, {"ddp.torch", "ddp", "single.torch"}, {"ddp.torch", "ddp", "zzz"}}) {
    doc.sweep->rows = {{"ddp", "faithful", kNotMeasured, 2, ""},
                       {name, "faithful", kNotMeasured, 2, reference_of, compared_with, "SyncBatchNorm"}};
    write_result_file(dir / "r.json", doc);
    EXPECT_NE(read_error(dir / "r.json").find("compared_with '" + std::string(compared_with) + "' must be"),
              std::string::npos)
        << name << " compared with " << compared_with;
  }
  doc.sweep->rows = {{"ddp", "faithful", kNotMeasured, 2, ""},
                     {"ddp.no-sync-bn", "faithful", kNotMeasured, 2, ""},
                     {"ddp.torch", "faithful", kNotMeasured, 2, "ddp", "ddp.no-sync-bn", "SyncBatchNorm"}};
  write_result_file(dir / "r.json", doc);
  EXPECT_EQ(read_error(dir / "r.json"), "");
  // Not a name at all.
  testing::write_text(dir / "n.json", R"({"schema": "ddpbench/result/v1", "environment": {}, "runs": [],
    "sweep": {"rows": [{"name": "ddp.torch", "reference_of": "ddp", "compared_with": 5}]}})");
  EXPECT_NE(read_error(dir / "n.json").find("'compared_with' must be a string (got 5)"), std::string::npos)
      << read_error(dir / "n.json");
}

}  // namespace
}  // namespace ddpbench
