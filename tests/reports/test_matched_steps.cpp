#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/base/input_error.hpp"
#include "reports/matched_steps.hpp"
#include "reports/paired_compare.hpp"
#include "support/proven_documents.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

using testing::sample_run;

// 16 steps, the first 4 warm-up (the slow first step among them).
const std::vector<double> kBaseSteps = {0.90,  0.30,  0.25,  0.24,  0.241, 0.262, 0.239, 0.251,
                                        0.233, 0.244, 0.260, 0.238, 0.236, 0.252, 0.240, 0.247};
// The candidate's steady steps over the baseline's, in four lockstep runs: about 10 % slower,
// with a burst in each of three runs (1.35, 0.85, 1.60) that the trimmed mean leaves out.
const std::vector<std::vector<double>> kFactors = {
    {1.10, 1.12, 1.08, 1.11, 1.09, 1.35, 1.10, 1.07, 1.13, 1.10, 1.09, 1.12},
    {1.06, 1.14, 1.10, 1.09, 0.85, 1.11, 1.12, 1.08, 1.10, 1.13, 1.07, 1.09},
    {1.12, 1.08, 1.11, 1.10, 1.09, 1.10, 1.60, 1.11, 1.08, 1.12, 1.10, 1.09},
    {1.09, 1.11, 1.10, 1.12, 1.08, 1.10, 1.09, 1.11, 1.13, 1.07, 1.10, 1.08}};
// With d = log(candidate / baseline) per step: (scipy.stats.trim_mean(d[4::2], 0.2) +
// scipy.stats.trim_mean(d[5::2], 0.2)) / 2, SciPy 1.17: the even and the odd steady steps apart.
// (Run 1's differs from the trimmed mean of all twelve, 0.090660517791493.)
const std::vector<double> kScipyTrimMeans = {0.09866291472916613, 0.08943511959212967, 0.09754183098132108,
                                             0.09299587545996171};

RunResult with_steps(const std::vector<double>& times, int64_t repetition) {
  RunResult r = sample_run("single", "faithful", 1, 4.0, 2000.0, repetition);
  r.warmup_steps = 4;
  r.config["warmup-steps"] = 4;
  r.steps = static_cast<int64_t>(times.size());  // an epoch cut by max-steps: a record a step
  r.config["max-steps"] = r.steps;
  r.images_trained = 256 * r.steps;
  r.step_records.clear();
  for (std::size_t k = 0; k < times.size(); ++k) {
    r.step_records.push_back({0, static_cast<int64_t>(k), 256, times[k], 2.0, {}});
  }
  // Each round's first step (warm-up, never matched) its own, as two runs never time alike.
  if (!r.step_records.empty()) r.step_records.front().time_s += 1e-3 * static_cast<double>(repetition);
  return r;
}

std::vector<double> candidate_steps(std::size_t run) {
  std::vector<double> times = kBaseSteps;
  for (std::size_t k = 0; k < kFactors[run].size(); ++k) times[4 + k] *= kFactors[run][k];
  return times;
}

TEST(MatchedSteps, ARunsLogRatioIsScipysTrimmedMeansOfItsEvenAndOddSteadySteps) {
  for (std::size_t run = 0; run < kFactors.size(); ++run) {
    const auto ratio = matched_step_log_ratio(with_steps(kBaseSteps, 0), with_steps(candidate_steps(run), 0));
    ASSERT_TRUE(ratio.has_value());
    EXPECT_NEAR(*ratio, kScipyTrimMeans[run], 1e-12) << "run " << run;
  }
}

TEST(MatchedSteps, StepsThatDoNotMatchGiveNoRatio) {
  const RunResult base = with_steps(kBaseSteps, 0);
  std::vector<double> fewer(kBaseSteps.begin(), kBaseSteps.end() - 1);
  EXPECT_FALSE(matched_step_log_ratio(base, with_steps(fewer, 0)).has_value()) << "a step count apart";
  RunResult renumbered = with_steps(kBaseSteps, 0);
  renumbered.step_records[7].step = 70;
  EXPECT_FALSE(matched_step_log_ratio(base, renumbered).has_value()) << "another step at one position";
  RunResult zero = with_steps(kBaseSteps, 0);
  zero.step_records[9].time_s = 0;
  EXPECT_FALSE(matched_step_log_ratio(base, zero).has_value()) << "a step that took no time";
  RunResult all_warmup = with_steps(kBaseSteps, 0);
  all_warmup.warmup_steps = 16;
  EXPECT_FALSE(matched_step_log_ratio(all_warmup, all_warmup).has_value()) << "no steady step";
}

ResultDocument lockstep_rounds(bool candidate) {
  ResultDocument doc;
  doc.environment.libtorch_version = "2.11.0";
  doc.environment.gpus = {{"NVIDIA A100-SXM4-40GB", 40LL << 30, "8.0"}};  // sample_run's rows are on cuda:0
  for (std::size_t run = 0; run < kFactors.size(); ++run) {
    doc.runs.push_back(with_steps(candidate ? candidate_steps(run) : kBaseSteps, static_cast<int64_t>(run)));
  }
  return doc;
}

// Across runs, step_time_s is tested on the runs' trimmed means: with 4 runs nothing is trimmed,
// and the one-sided p is scipy.stats.ttest_1samp(kScipyTrimMeans, 0, alternative="greater").
TEST(MatchedSteps, PairedStepTimeTestsTheRunsMatchedRatiosAsScipy) {
  PairedOptions options;
  options.metrics = {"step_time_s"};
  options.min_rounds = 4;
  options.max_rounds = 4;
  const PairedResult r = compare_paired(lockstep_rounds(false), lockstep_rounds(true), options);
  ASSERT_EQ(r.comparisons.size(), 1u);
  const PairedComparison& c = r.comparisons.front();
  EXPECT_TRUE(c.matched_steps);
  ASSERT_EQ(c.log_ratios.size(), 4u);
  for (std::size_t run = 0; run < 4; ++run) EXPECT_NEAR(c.log_ratios[run], kScipyTrimMeans[run], 1e-12);
  EXPECT_NEAR(c.p_slower, 1.2524360233379248e-05, 1e-12);
  EXPECT_NEAR(c.change, std::expm1(0.09465893519064464), 1e-12);
  EXPECT_EQ(c.verdict, Verdict::regression) << markdown_paired(r, options);
  EXPECT_NE(markdown_paired(r, options).find("matched steady steps"), std::string::npos);
}

// Rounds whose steps match nowhere (files without comparable step records) are compared by
// each round's median step time, every round alike. One round that does not match where the
// others do is a damaged file, never a quiet switch of every round to the other statistic.
TEST(MatchedSteps, RowsMatchedNowhereUseMediansAndOneUnmatchedRoundIsBadInput) {
  PairedOptions options;
  options.metrics = {"step_time_s"};
  options.min_rounds = 4;
  options.max_rounds = 4;
  ResultDocument none = lockstep_rounds(true);
  for (auto& run : none.runs) run.step_records.clear();  // files from before step records
  const PairedResult r = compare_paired(lockstep_rounds(false), none, options);
  ASSERT_EQ(r.comparisons.size(), 1u);
  EXPECT_FALSE(r.comparisons.front().matched_steps);
  for (const double d : r.comparisons.front().log_ratios) EXPECT_NEAR(d, 0.0, 1e-12) << "sample_run's median, both sides";
  // One round's records without the others': bad input, never half its rounds matched.
  ResultDocument one_unmatched = lockstep_rounds(true);
  one_unmatched.runs[2].step_records.clear();
  try {
    (void)compare_paired(lockstep_rounds(false), one_unmatched, options);
    FAIL() << "a round without step records was read beside matched ones";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the steady steps of round 2 do not match"), std::string::npos) << e.what();
  }
  // A record dropped or added: a row whose records are not its steps did other work (the proof).
  for (const auto damage : {0, 1}) {
    ResultDocument cand = lockstep_rounds(true);
    if (damage == 0) cand.runs[2].step_records.pop_back();
    if (damage == 1) cand.runs[2].step_records.push_back({0, 16, 256, 0.2, 2.0, {}});
    cand.sweep = SweepInfo{};
    cand.sweep->repeat = static_cast<int64_t>(cand.runs.size());  // its rounds, as the gate merges them
    const ProvenResults proven = prove_results(cand, "the candidate");
    EXPECT_NE(proven.document().runs[2].reason.find("step records where it trained 16 steps"), std::string::npos)
        << "damage " << damage << ": " << proven.document().runs[2].reason;
  }
}

// What the proof refuses in step records: a time that is no time, steps out of order or twice.
TEST(MatchedSteps, TheProofRefusesDamagedStepRecords) {
  for (const auto damage : {0, 1, 2, 3}) {
    ResultDocument cand = lockstep_rounds(true);
    auto& records = cand.runs[1].step_records;
    if (damage == 0) records[6].time_s = 0;
    if (damage == 1) records[6].time_s = -0.1;
    if (damage == 2) records[6].step = 5;  // step 5 twice
    if (damage == 3) std::swap(records[6], records[7]);
    EXPECT_THROW((void)compare_paired(lockstep_rounds(false), cand, PairedOptions{}), InputError) << "damage " << damage;
  }
}

}  // namespace
}  // namespace ddpbench
