#include <gtest/gtest.h>

#include "harness/control/row_outputs.hpp"

namespace ddpbench {
namespace {

TEST(RowOutputs, ATraceIsNamedAfterTheRowsJsonSoRepetitionsKeepTheirOwn) {
  EXPECT_EQ(trace_file_name("/r/rows/faithful/ddp-2gpu.json", 1), "ddp-2gpu.rank1.trace.json");
  EXPECT_EQ(trace_file_name("/r/rows/faithful/ddp-2gpu.r3.json", 0), "ddp-2gpu.r3.rank0.trace.json");
  EXPECT_EQ(trace_file_name("row", 2), "row.rank2.trace.json");
}

// The sweep checked each row's result file and checkpoint, but not the traces its run writes: a
// user's file at a rank's trace failed the row after the rows before it had run (exit 1).
TEST(RowOutputs, ATracedRowListsEachRanksTraceUnderBothNames) {
  RunConfig c;
  c.out = "/r/rows/faithful/ddp-2.r1.json";
  c.save_checkpoint = "/r/w.pt";
  const auto none = [](const std::filesystem::path&) { return false; };
  ASSERT_EQ(row_outputs(c, 2, true, none).size(), 2u) << "untraced: the result file and the checkpoint";
  c.trace_steps = "3:3";
  const auto traced = row_outputs(c, 2, true, none, "row 'ddp-2 (faithful)' repetition 1");
  ASSERT_EQ(traced.size(), 6u);
  EXPECT_EQ(traced[0].name, "row 'ddp-2 (faithful)' repetition 1's result file");
  EXPECT_EQ(traced[1].name, "row 'ddp-2 (faithful)' repetition 1's --save-checkpoint");
  EXPECT_EQ(traced[4].name, "row 'ddp-2 (faithful)' repetition 1's --trace-steps (rank 1's trace)");
  EXPECT_EQ(traced[4].path, std::filesystem::path("/r/rows/faithful/ddp-2.r1.rank1.trace.json"));
  EXPECT_EQ(traced[5].path, std::filesystem::path("/r/rows/faithful/ddp-2.r1.rank1.trace.json.gz"));
  EXPECT_EQ(row_outputs(c, 2, false, none).size(), 2u) << "ranks of another launcher check their own";
  EXPECT_EQ(row_outputs(c, 1, true, none)[2].name, "--trace-steps (rank 0's trace)");
}

// A sweep file (or a checkpoint) put at the synthetic cache's names was overwritten by the set:
// the cache's files are outputs, which no input may be.
TEST(RowOutputs, TheSyntheticCachesFilesAreARowsOutputsWhereItReadsThroughIt) {
  RunConfig c;
  c.dataset = DatasetKind::synthetic;
  c.cache_dir = "/c";
  c.seed = 1;
  c.synthetic_train_images = 512;
  c.synthetic_test_images = 128;
  const auto cache = synthetic_cache_outputs(c);
  ASSERT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache[0].path, std::filesystem::path("/c/synthetic/v1-seed1-train512-test128/train.bin"));
  EXPECT_EQ(cache[2].path, std::filesystem::path("/c/synthetic/v1-seed1-train512-test128/crc32.txt"));
  EXPECT_TRUE(cache[1].own_kind("/c/synthetic/v1-seed1-train512-test128/test.bin"));
  c.cache_dir = "none";
  EXPECT_TRUE(synthetic_cache_outputs(c).empty()) << "in memory: no file";
  c.cache_dir = "/c";
  c.dataset = DatasetKind::cifar10;
  EXPECT_TRUE(synthetic_cache_outputs(c).empty());
}

}  // namespace
}  // namespace ddpbench
