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

}  // namespace
}  // namespace ddpbench
