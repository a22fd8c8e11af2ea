#include <gtest/gtest.h>

#include "reports/report_sections.hpp"

#include "reports/markdown_report.hpp"
#include "reports/straggler_judgement.hpp"

namespace ddpbench {
namespace {

std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(MarkdownReport, OneRowPerRunWithUnitsFormatted) {
  RunResult r;
  r.name = "single";
  r.strategy = "single";
  r.device = "cuda:0";
  r.dataset = "cifar10";
  r.train_time_s = 13.08;
  r.images_per_s = 3823.4;
  r.step_time_s = {0.0641, 0.07, 0.2};
  r.test_accuracy = 0.27;
  r.final_loss = 1.25;
  r.peak_memory_bytes = 3LL << 30;
  const std::string md = markdown_runs_table({r});
  EXPECT_EQ(count_lines(md), 3u) << md;
  EXPECT_NE(md.find("| single | single | 1 | cuda:0 | cifar10 | ok | 13.08 s | 3,823 | - | 64.1 ms | 70.0 ms | 27.0 % | 1.250 | 3.00 GiB |"),
            std::string::npos)
      << md;
}

// A row across nodes says so beside its processes; a row on one node does not.
TEST(MarkdownReport, ARowAcrossNodesSaysHowItsRanksWerePlaced) {
  RunResult r;
  r.name = "ddp-2node";
  r.strategy = "ddp";
  r.world_size = 4;
  r.nodes = {"node1", "node2"};
  r.ranks_per_node = {2, 2};
  RunResult local = r;
  local.name = "ddp-4";
  local.nodes = {"node1"};
  local.ranks_per_node = {4};
  const std::string md = markdown_runs_table({r, local});
  EXPECT_NE(md.find("| ddp-2node | ddp | 4 (2 nodes x 2 ranks) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| ddp-4 | ddp | 4 |"), std::string::npos) << md;
}

// A row whose steps were all warm-up measured no steady figure and judged no straggler: said.
TEST(MarkdownReport, ARowWithNoStepAfterTheWarmupSaysSo) {
  RunResult r;
  r.name = "ddp";
  r.steps = 4;
  r.warmup_steps = 6;
  EXPECT_NE(markdown_runs_table({r}).find("- ddp: no step after the warm-up (--warmup-steps 6 of its 4 steps): its "
                                          "steady figures and stragglers were not measured"),
            std::string::npos);
  r.warmup_steps = 3;
  EXPECT_EQ(markdown_runs_table({r}).find("no step after the warm-up"), std::string::npos);
}

// The straggler test (the rank picked as the slowest, slowest beyond chance for such a pick: p below
// 0.05) cannot flag 2 ranks over 3 steady steps (best p = 2 x 0.5^3 = 0.25): the row says it could
// not be judged, rather than imply no straggler; over 6 steps (0.031) or at 4 ranks over 4 (0.016)
// it could, and says nothing. At 4 ranks over 3 steps the uncorrected test could (1/64); the
// corrected cannot (4/64).
TEST(MarkdownReport, AStragglerTheTestCouldNotFlagOnFewStepsIsNotJudged) {
  RunResult r;
  r.name = "ddp-2";
  r.strategy = "ddp";
  r.world_size = 2;
  r.steps = 5;
  r.warmup_steps = 2;
  r.straggler_steps = 3;
  r.straggler_of_steps = 3;
  r.straggler_p = 0.25;
  const std::string md = markdown_runs_table({r});
  EXPECT_NE(md.find("- ddp-2: straggler: could not be judged: 3 steady steps of 2 ranks (some rank the slowest in "
                    "every one is p = 0.250 by chance, not below 0.05; the test needs 6 steady steps or more)"),
            std::string::npos)
      << md;
  EXPECT_DOUBLE_EQ(best_straggler_p(3, 2), 0.25);
  EXPECT_EQ(steps_to_judge_straggler(2), 6);
  EXPECT_EQ(steps_to_judge_straggler(3), 4);  // 3/81 = 0.037
  EXPECT_EQ(steps_to_judge_straggler(8), 3);  // 8/512
  RunResult enough = r;
  enough.straggler_of_steps = 6;
  EXPECT_EQ(straggler_not_judged(enough), "");
  RunResult four = r;
  four.world_size = 4;
  EXPECT_NE(straggler_not_judged(four), "") << "4 ranks over 3 steps: p reaches 4/64 at best";
  four.straggler_of_steps = 4;
  EXPECT_EQ(straggler_not_judged(four), "") << "4 ranks over 4 steps: p can reach 4/256";
  RunResult five_steps = r;
  five_steps.straggler_of_steps = 5;  // 0.0625: still not below 0.05
  EXPECT_NE(straggler_not_judged(five_steps), "");
  RunResult flagged = r;
  flagged.straggler = true;  // from a row without per-step times: flagged by its spread, judged
  EXPECT_EQ(straggler_not_judged(flagged), "");
  RunResult failed = r;
  failed.status = RunStatus::failed;
  EXPECT_EQ(straggler_not_judged(failed), "");
  RunResult one_rank = r;
  one_rank.world_size = 1;
  EXPECT_EQ(straggler_not_judged(one_rank), "");
  EXPECT_EQ(markdown_runs_table({enough}).find("straggler"), std::string::npos);
}

TEST(MarkdownReport, NotesCutAndFailedRowsAndEscapesPipes) {
  RunResult cut;
  cut.name = "a|b";
  cut.epoch_cut = true;
  cut.steps = 20;
  cut.steps_per_epoch = 196;
  cut.epochs = 1;
  RunResult failed;
  failed.name = "ddp";
  failed.status = RunStatus::failed;
  failed.reason = "rank 1 died\nsignal 9";
  const std::string md = markdown_runs_table({cut, failed});
  EXPECT_NE(md.find("| a\\|b |"), std::string::npos) << md;
  EXPECT_NE(md.find("- a\\|b: epoch cut to 20 of 196 steps"), std::string::npos) << md;
  // 2 epochs of 4 steps read "cut to 8": steps counts every epoch's.
  RunResult two = cut;
  two.epochs = 2;
  two.steps = 8;
  EXPECT_EQ(epoch_cut_note(two, true), "each of 2 epochs cut to 4 of 196 steps (--max-steps)");
  EXPECT_EQ(epoch_cut_note(two, false), "each of 2 epochs cut to 4 steps (--max-steps)");
  EXPECT_NE(markdown_runs_table({two}).find("- a\\|b: each of 2 epochs cut to 4 of 196 steps"), std::string::npos);
  // The reason is a numbered note under the table, its mark in the row's status.
  EXPECT_NE(md.find("| failed [1] |"), std::string::npos) << md;
  EXPECT_NE(md.find("- [1] rank 1 died signal 9"), std::string::npos) << md;
}

}  // namespace
}  // namespace ddpbench
