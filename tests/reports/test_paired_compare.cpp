#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/base/input_error.hpp"
#include "harness/base/statistics.hpp"
#include "reports/paired_compare.hpp"
#include "support/proven_documents.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

using testing::sample_run;

// One build's rounds: each row's train time in round r (repetition r); images/s follow.
ResultDocument rounds(const std::map<std::string, std::vector<double>>& times) {
  ResultDocument doc;
  doc.environment.gpus = {{"NVIDIA H200", 141LL << 30, "9.0"}};
  doc.environment.libtorch_version = "2.11.0";
  for (const auto& [name, row] : times) {
    for (std::size_t r = 0; r < row.size(); ++r) {
      doc.runs.push_back(sample_run(name, "faithful", 1, row[r], 50000.0 / row[r], static_cast<int64_t>(r)));
    }
  }
  return doc;
}

// The machine's drift, round by round: the same for both builds in a round, up to 25 % apart
// between rounds (what a neighbour's load does), times a little noise of each run's own.
std::vector<double> drifting(double seconds, double factor, std::size_t n, double own_noise) {
  static const double drift[] = {1.00, 1.18, 0.93, 1.25, 1.05, 0.97, 1.12, 1.02, 0.95, 1.21, 1.08, 0.99};
  static const double noise[] = {0.3, -0.8, 0.5, 1.0, -0.4, -1.0, 0.7, -0.2, 0.9, -0.6, 0.1, -0.9};
  std::vector<double> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(seconds * factor * drift[i % 12] * (1 + own_noise * noise[i % 12]));
  return out;
}

const PairedComparison& comparison(const PairedResult& r, const std::string& row, const std::string& metric = "train_time_s") {
  for (const auto& c : r.comparisons) {
    if (c.row == row && c.metric == metric) return c;
  }
  throw std::runtime_error("no comparison of " + row + " " + metric);
}

// A row 12 % slower round after round is a regression with its size and interval; the rows
// beside it, as fast as before within the drift, are unchanged and say so by their interval.
// The drift (up to 25 % between rounds) cancels in each round's ratio.
TEST(PairedCompare, OneRowTwelvePercentSlowerIsARegressionTheOthersUnchanged) {
  const auto base = rounds({{"single", drifting(10, 1.0, 8, 0.01)}, {"ddp-2", drifting(6, 1.0, 8, 0.01)}});
  const auto cand = rounds({{"single", drifting(10, 1.0, 8, 0.012)}, {"ddp-2", drifting(6, 1.12, 8, 0.012)}});
  const PairedResult r = compare_paired(base, cand, {});
  const auto& ddp = comparison(r, "ddp-2");
  EXPECT_EQ(ddp.verdict, Verdict::regression) << markdown_paired(r, {});
  EXPECT_EQ(ddp.log_ratios.size(), 8u);
  EXPECT_NEAR(ddp.change, 0.12, 0.01);
  EXPECT_LT(ddp.ci_low, 0.12);
  EXPECT_GT(ddp.ci_high, 0.12);
  EXPECT_GT(ddp.ci_low, 0.05);
  const auto& single = comparison(r, "single");
  EXPECT_EQ(single.verdict, Verdict::unchanged) << single.why;
  EXPECT_NE(single.why.find("CI inside"), std::string::npos) << single.why;
  EXPECT_TRUE(r.regression());
  const std::string md = markdown_paired(r, {});
  EXPECT_NE(md.find("- ddp-2 (faithful) train_time_s: 12."), std::string::npos) << md;
  EXPECT_NE(md.find("% slower, 95 % CI +"), std::string::npos) << md;
  EXPECT_NE(md.find(", 8 pairs: REGRESSION"), std::string::npos) << md;
}

// The direction of a rate: fewer images a second is worse, and reads as slower.
TEST(PairedCompare, FewerImagesASecondIsSlower) {
  const auto base = rounds({{"ddp-2", drifting(6, 1.0, 6, 0.005)}});
  const auto cand = rounds({{"ddp-2", drifting(6, 1.15, 6, 0.005)}});
  PairedOptions o;
  o.metrics = {"steady_images_per_s"};
  const PairedResult r = compare_paired(base, cand, o);
  const auto& c = comparison(r, "ddp-2", "steady_images_per_s");
  EXPECT_EQ(c.verdict, Verdict::regression) << c.why;
  EXPECT_NEAR(c.change, 0.15, 0.01);
}

// Too few pairs, or an interval that reaches past the threshold, asks for more rounds of that
// row alone; at the cap the row is within the noise, and says where it stopped.
TEST(PairedCompare, AnUndecidedRowAsksForMoreRoundsUntilTheCap) {
  PairedOptions o;
  o.min_rounds = 4;
  o.max_rounds = 6;
  // About 5 % slower with 4 % noise: neither clearly beyond 5 % nor clearly inside it.
  const auto base = rounds({{"single", drifting(10, 1.0, 6, 0.0)}, {"ddp-2", drifting(6, 1.0, 6, 0.0)}});
  const auto cand = rounds({{"single", drifting(10, 1.0, 6, 0.001)}, {"ddp-2", drifting(6, 1.05, 6, 0.04)}});
  const auto first = [](const ResultDocument& d, std::size_t n) {
    ResultDocument cut = d;
    cut.runs.clear();
    for (const auto& run : d.runs) {
      if (run.repetition < static_cast<int64_t>(n)) cut.runs.push_back(run);
    }
    return cut;
  };
  const PairedResult three = compare_paired(first(base, 3), first(cand, 3), o);
  EXPECT_TRUE(comparison(three, "single").needs_more_rounds) << "no verdict on fewer than --min-rounds pairs";
  const PairedResult four = compare_paired(first(base, 4), first(cand, 4), o);
  EXPECT_FALSE(comparison(four, "single").needs_more_rounds);
  EXPECT_EQ(comparison(four, "single").verdict, Verdict::unchanged);
  EXPECT_TRUE(comparison(four, "ddp-2").needs_more_rounds) << comparison(four, "ddp-2").why;
  EXPECT_EQ(four.undecided_rows(), std::vector<std::string>{"ddp-2"});
  const PairedResult six = compare_paired(base, cand, o);
  const auto& capped = comparison(six, "ddp-2");
  EXPECT_FALSE(capped.needs_more_rounds);
  EXPECT_EQ(capped.verdict, Verdict::cannot_judge) << "its bound reaches past 5 %: a 5 % slowdown could hide there";
  EXPECT_NE(capped.why.find("still undecided after 6 pairs (the cap is 6 rounds)"), std::string::npos) << capped.why;
  EXPECT_TRUE(six.undecided_rows().empty());
  EXPECT_FALSE(six.regression());
  EXPECT_EQ(six.exit_code(), 2);
}

// At the cap, "no regression" means the rounds exclude one: an undecided comparison whose
// one-sided upper bound is below the threshold is within the noise; one whose bound reaches past
// it is cannot judge, too noisy, naming the bound (a busy machine's +1.8 %, CI -8.6 to +13.4 %,
// passed as "within the noise").
TEST(PairedCompare, AtTheCapNoRegressionMeansTheBoundExcludesOne) {
  PairedOptions o;
  o.min_rounds = 4;
  o.max_rounds = 8;
  const std::vector<double> base(8, 10.0);
  const std::vector<double> busy = {9.2, 11.2, 9.5, 11.0, 9.7, 10.8, 9.3, 10.6};
  const PairedResult noisy = compare_paired(rounds({{"ddp-2", base}}), rounds({{"ddp-2", busy}}), o);
  const auto& c = comparison(noisy, "ddp-2");
  ASSERT_LT(std::fabs(c.change), o.threshold) << "neither beyond the threshold";
  ASSERT_GT(c.ci_high, o.threshold) << "nor inside it";
  EXPECT_EQ(c.verdict, Verdict::cannot_judge) << c.why;
  EXPECT_GT(c.upper_bound, o.threshold);
  EXPECT_LT(c.upper_bound, c.ci_high) << "one-sided at 95 %, tighter than the two-sided interval's end";
  EXPECT_NE(c.why.find("too noisy"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("95 % upper bound +"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("reaches past the 5.0 % threshold"), std::string::npos) << c.why;
  EXPECT_EQ(noisy.exit_code(), 2);
  EXPECT_NE(markdown_paired(noisy, o).find("Cannot judge"), std::string::npos) << markdown_paired(noisy, o);
  // Faster and noisy: not inside ±5 %, but no slowdown of 5 % fits the rounds.
  const std::vector<double> faster = {9.0, 9.9, 9.3, 10.0, 9.1, 9.8, 9.4, 9.7};
  const PairedResult quick = compare_paired(rounds({{"ddp-2", base}}), rounds({{"ddp-2", faster}}), o);
  const auto& f = comparison(quick, "ddp-2");
  ASSERT_LT(f.ci_low, -o.threshold) << "undecided: its interval reaches past -5 %";
  ASSERT_NE(f.verdict, Verdict::improved) << f.why;
  EXPECT_EQ(f.verdict, Verdict::within_noise) << f.why;
  EXPECT_LT(f.upper_bound, o.threshold);
  EXPECT_NE(f.why.find("below the 5.0 % threshold"), std::string::npos) << f.why;
  EXPECT_EQ(quick.exit_code(), 0);
}

// A coarse metric (the lockstep gate's train_time_s) asks for no rounds of its own: while its
// row's other metrics ask for more it waits; at its row's last look (the others decided, or
// none) it is judged at the cap's alpha, as any last look is, so a clear change there is a
// regression and not a pass at a first look's sliver of alpha.
TEST(PairedCompare, ACoarseMetricAsksForNoRoundsAndIsJudgedAtItsRowsLastLook) {
  PairedOptions o;
  o.min_rounds = 4;
  o.max_rounds = 10;
  o.coarse_metrics = {"train_time_s"};
  o.metrics = {"steady_images_per_s", "train_time_s"};
  // train_time_s 25 % slower with 8 % noise (Holm p 0.002-0.01: past a first look's alpha, within the
  // cap's); the steady rate unchanged within 0.5 %, and ddp-2's
  // train time noisy around 5 % with its rate noisy too (its row goes on).
  auto base = rounds({{"ddp-2", drifting(6, 1.0, 4, 0.0)}, {"single", drifting(10, 1.0, 4, 0.0)}});
  auto cand = rounds({{"ddp-2", drifting(6, 1.05, 4, 0.04)}, {"single", drifting(10, 1.25, 4, 0.08)}});
  for (std::size_t i = 0; i < cand.runs.size(); ++i) {
    const double wobble = cand.runs[i].name == "single" ? 0.005 : 0.08;
    cand.runs[i].steady_images_per_s = base.runs[i].steady_images_per_s * (1 + wobble * ((i % 2) ? 1 : -1));
  }
  const PairedResult r = compare_paired(base, cand, o);
  EXPECT_EQ(comparison(r, "single", "steady_images_per_s").verdict, Verdict::unchanged);
  const auto& last = comparison(r, "single");
  EXPECT_EQ(last.verdict, Verdict::regression) << last.why;
  EXPECT_NE(last.why.find("the cap's alpha"), std::string::npos) << last.why;
  const auto& waiting = comparison(r, "ddp-2");
  EXPECT_TRUE(comparison(r, "ddp-2", "steady_images_per_s").needs_more_rounds);
  EXPECT_FALSE(waiting.needs_more_rounds) << "a coarse metric asked for a round";
  EXPECT_NE(waiting.why.find("asks for no rounds of its own"), std::string::npos) << waiting.why;
  EXPECT_EQ(r.undecided_rows(), std::vector<std::string>{"ddp-2"});
  EXPECT_NE(markdown_paired(r, o).find("coarse metrics (train_time_s)"), std::string::npos);
  // A coarse metric alone: its row stops at --min-rounds, judged there at the cap's alpha.
  o.metrics = {"train_time_s"};
  const PairedResult alone = compare_paired(base, cand, o);
  EXPECT_EQ(comparison(alone, "single").verdict, Verdict::regression) << comparison(alone, "single").why;
  EXPECT_TRUE(alone.undecided_rows().empty());
  o.coarse_metrics = {"step_time_s"};
  EXPECT_THROW((void)compare_paired(base, cand, o), InputError) << "a coarse metric that is not compared";
}

// One row whose p-value passes alpha alone is no regression among four more rows with the
// same evidence: Holm holds the chance of any false alarm across them all.
TEST(PairedCompare, HolmHoldsTheFalseAlarmRateAcrossRows) {
  PairedOptions o;
  o.min_rounds = 4;
  o.max_rounds = 4;  // one look: alpha itself
  o.threshold = 0.01;
  // Four rounds: nothing trimmed, so the p-value is the plain paired t test's, one-sided (0.0235).
  const std::vector<double> base_times = {10, 10, 10, 10};
  const std::vector<double> cand_times = {10.2, 11.6, 10.8, 11.2};
  const PairedResult alone = compare_paired(rounds({{"a", base_times}}), rounds({{"a", cand_times}}), o);
  const double p = comparison(alone, "a").p_value;
  ASSERT_LT(p, 0.05);
  ASSERT_GT(5 * p, 0.05) << "the rows must be borderline for this test to mean anything";
  EXPECT_EQ(comparison(alone, "a").verdict, Verdict::regression);
  std::map<std::string, std::vector<double>> five_base, five_cand;
  for (const char* row : {"a", "b", "c", "d", "e"}) {
    five_base[row] = base_times;
    five_cand[row] = cand_times;
  }
  const PairedResult five = compare_paired(rounds(five_base), rounds(five_cand), o);
  for (const auto& c : five.comparisons) {
    EXPECT_NEAR(c.p_holm, 5 * p, 1e-12);
    EXPECT_NE(c.verdict, Verdict::regression) << c.row;
  }
  EXPECT_FALSE(five.regression());
}

// One-sided in the direction of the change: the p-value is half the two-sided test's, and a row
// that got faster neither counts among the slower ones under Holm nor is ever a regression.
TEST(PairedCompare, EachDirectionIsItsOwnOneSidedFamily) {
  PairedOptions o;
  o.min_rounds = 4;
  o.max_rounds = 4;
  o.threshold = 0.01;
  const std::vector<double> base_times = {10, 10, 10, 10};
  const std::vector<double> slower = {10.2, 11.6, 10.8, 11.2};
  std::vector<double> faster;
  for (double t : slower) faster.push_back(100 / t);  // the same log ratios, negated
  const std::vector<double> logs = {std::log(1.02), std::log(1.16), std::log(1.08), std::log(1.12)};
  const double two_sided = paired_t_test(logs, 0.05).p_value;
  const PairedResult r = compare_paired(rounds({{"a", base_times}, {"b", base_times}}),
                                        rounds({{"a", slower}, {"b", faster}}), o);
  const auto& a = comparison(r, "a");
  const auto& b = comparison(r, "b");
  EXPECT_NEAR(a.p_value, two_sided / 2, 1e-12);
  EXPECT_NEAR(a.p_slower, two_sided / 2, 1e-12);
  EXPECT_NEAR(a.p_faster, 1 - two_sided / 2, 1e-12);
  EXPECT_NEAR(b.p_value, two_sided / 2, 1e-12);
  // Each alone in its direction's family: Holm over two rows, one of them at p near 1, leaves
  // the other's p at twice its own.
  EXPECT_NEAR(a.p_holm, 2 * a.p_value, 1e-12);
  EXPECT_NEAR(b.p_holm, 2 * b.p_value, 1e-12);
  EXPECT_EQ(a.verdict, Verdict::regression) << a.why;
  EXPECT_EQ(b.verdict, Verdict::improved) << b.why;
}

// The looks spend alpha: nothing below --min-rounds, the levels add up to alpha, most of it at
// the cap; a p-value that passes the cap's level but not an earlier look's is not yet a
// regression, and the row runs on.
TEST(PairedCompare, TheLooksSpendAlphaMostAtTheCap) {
  PairedOptions o;
  o.min_rounds = 4;
  o.max_rounds = 12;
  EXPECT_EQ(alpha_at_look(3, o), 0.0);
  double spent = 0;
  for (int64_t n = o.min_rounds; n <= o.max_rounds; ++n) spent += alpha_at_look(n, o);
  EXPECT_NEAR(spent, o.alpha, 1e-15);
  EXPECT_NEAR(alpha_at_look(o.max_rounds, o), kCapLookShare * o.alpha, 1e-15);
  EXPECT_NEAR(alpha_at_look(o.min_rounds, o), (1 - kCapLookShare) * o.alpha / 8, 1e-15);
  o.max_rounds = 4;
  EXPECT_EQ(alpha_at_look(4, o), o.alpha) << "one look spends it all";
  o.max_rounds = 12;
  o.threshold = 0.01;
  const PairedResult r = compare_paired(rounds({{"a", {10, 10, 10, 10}}}), rounds({{"a", {10.6, 11.5, 10.9, 11.2}}}), o);
  const auto& c = comparison(r, "a");
  ASSERT_LT(c.p_holm, alpha_at_look(o.max_rounds, o));
  ASSERT_GT(c.p_holm, alpha_at_look(4, o));
  EXPECT_EQ(r.looks, 9);
  EXPECT_NE(c.verdict, Verdict::regression);
  EXPECT_TRUE(c.needs_more_rounds);
  EXPECT_NE(markdown_paired(r, o).find("9 looks (rounds 4 to 12): each before the cap at alpha 0.00125, the cap's at "
                                       "0.04000"),
            std::string::npos)
      << markdown_paired(r, o);
}

// The claim itself, tried: unchanged builds gated as ci-bench gates them (five rows, a look each
// round from 4 to 8, only the undecided rows run on, a regression at any look stands), with a
// heavy-tailed noise (Student t, 3 degrees of freedom, and a neighbour's burst of load, 1.5x,
// on either build in a tenth of the runs). No threshold, so that every change the test calls
// significant is an alarm and alpha itself is what is tried. The false alarms stay within
// alpha; the same rounds tested at alpha at every look do not.
TEST(PairedCompare, AnAdaptiveGateOnUnchangedBuildsAlarmsAtMostAlpha) {
  PairedOptions o;
  o.min_rounds = 4;
  o.max_rounds = 8;
  o.threshold = 0;
  std::mt19937_64 random(2027);
  std::student_t_distribution<double> noise(3.0);
  std::uniform_real_distribution<double> uniform(0, 1);
  const auto one_run = [&] { return 10 * std::exp(0.05 * noise(random)) * (uniform(random) < 0.1 ? 1.5 : 1.0); };
  const std::vector<std::string> rows = {"a", "b", "c", "d", "e"};
  const auto first = [](const std::map<std::string, std::vector<double>>& times, const std::set<std::string>& running,
                        std::map<std::string, std::vector<double>>& cut, int64_t n) {
    for (const auto& [row, all] : times) {
      if (running.count(row)) cut[row].assign(all.begin(), all.begin() + n);
    }
  };
  constexpr int kGates = 1000;
  int alarms = 0, alarms_at_alpha_each_look = 0;
  for (int gate = 0; gate < kGates; ++gate) {
    std::map<std::string, std::vector<double>> base, cand;
    for (const auto& row : rows) {
      for (int64_t r = 0; r < o.max_rounds; ++r) {
        base[row].push_back(one_run());
        cand[row].push_back(one_run());
      }
    }
    // The gate: a stopped row keeps the rounds it ran and is not run again.
    std::set<std::string> running(rows.begin(), rows.end());
    std::map<std::string, std::vector<double>> base_ran, cand_ran;
    bool alarm = false, alarm_each_look = false;
    for (int64_t n = o.min_rounds; n <= o.max_rounds; ++n) {
      first(base, running, base_ran, n);
      first(cand, running, cand_ran, n);
      if (!running.empty() && !alarm) {
        const PairedResult r = compare_paired(rounds(base_ran), rounds(cand_ran), o);
        alarm = r.regression();
        const auto undecided = r.undecided_rows();
        running = std::set<std::string>(undecided.begin(), undecided.end());
      }
      // The control: every row's first n rounds, at alpha (a single look).
      PairedOptions single_look = o;
      single_look.min_rounds = single_look.max_rounds = n;
      std::map<std::string, std::vector<double>> base_n, cand_n;
      first(base, std::set<std::string>(rows.begin(), rows.end()), base_n, n);
      first(cand, std::set<std::string>(rows.begin(), rows.end()), cand_n, n);
      alarm_each_look = alarm_each_look || compare_paired(rounds(base_n), rounds(cand_n), single_look).regression();
    }
    alarms += alarm;
    alarms_at_alpha_each_look += alarm_each_look;
  }
  // Three standard errors above alpha: a procedure at alpha passes but for 1 run in 700.
  const double bound = o.alpha + 3 * std::sqrt(o.alpha * (1 - o.alpha) / kGates);
  EXPECT_LE(alarms, bound * kGates) << alarms << " false alarms in " << kGates << " gates";
  EXPECT_GT(alarms_at_alpha_each_look, bound * kGates)
      << "the control, alpha at each of 5 looks: " << alarms_at_alpha_each_look << " in " << kGates;
  std::cout << "false alarms in " << kGates << " unchanged gates: " << alarms << " (alpha " << o.alpha
            << "); alpha at each look: " << alarms_at_alpha_each_look << "\n";
}

// Fails closed: a row that ran on the baseline build and fails on the candidate is a
// regression, unless allowed; rounds that ran on one side only are named and dropped; a row
// run with other settings on the two sides, and bad bounds, are bad input.
TEST(PairedCompare, FailedRowsUnpairedRoundsAndOtherSettings) {
  auto base = rounds({{"single", drifting(10, 1.0, 5, 0.01)}, {"dp-2", drifting(8, 1.0, 5, 0.01)}});
  auto cand = rounds({{"single", drifting(10, 1.0, 5, 0.01)}, {"dp-2", drifting(8, 1.0, 5, 0.01)}});
  for (auto& run : cand.runs) {
    if (run.name == "dp-2") {
      run.status = RunStatus::failed;
      run.reason = "std::bad_alloc";
    }
    if (run.name == "single" && run.repetition == 2) run.status = RunStatus::interrupted;
  }
  const PairedResult r = compare_paired(base, cand, {});
  ASSERT_EQ(r.failed_rows.size(), 2u) << markdown_paired(r, {});
  EXPECT_EQ(r.failed_rows[0], "dp-2 (faithful): no round ran on the candidate");
  // A build that fails one round of five is no better for the four it survived.
  EXPECT_EQ(r.failed_rows[1].rfind("single (faithful): interrupted on the candidate in round(s) 2, where the baseline "
                                   "build ran it", 0),
            0u)
      << r.failed_rows[1];
  EXPECT_TRUE(r.regression());
  PairedOptions allow;
  allow.allow_missing = {"dp-2", "single"};
  EXPECT_FALSE(compare_paired(base, cand, allow).regression());
  // Every row allowed missing and none timed: no pass (it was exit 0), cannot judge.
  auto none_ran = cand;
  for (auto& run : none_ran.runs) {
    run.status = RunStatus::failed;
    run.reason = "std::bad_alloc";
  }
  const PairedResult nothing = compare_paired(base, none_ran, allow);
  EXPECT_FALSE(nothing.regression());
  EXPECT_EQ(nothing.exit_code(), 2);
  ASSERT_FALSE(nothing.cannot_judge.empty());
  EXPECT_EQ(nothing.cannot_judge.back().rfind("nothing was timed", 0), 0u) << nothing.cannot_judge.back();
  // A round on one side only is no failure of either build: named and dropped.
  auto fewer = rounds({{"single", drifting(10, 1.0, 5, 0.01)}});
  std::erase_if(fewer.runs, [](const RunResult& run) { return run.repetition == 2; });
  const PairedResult dropped = compare_paired(rounds({{"single", drifting(10, 1.0, 5, 0.01)}}), fewer, {});
  ASSERT_EQ(dropped.unpaired_rounds.size(), 1u);
  EXPECT_EQ(dropped.unpaired_rounds[0], "single (faithful): round(s) 2 only in the baseline build's file; dropped");
  EXPECT_EQ(comparison(dropped, "single").rounds, (std::vector<int64_t>{0, 1, 3, 4}));
  // Rounds both files' sweeps planned and neither holds are said, as the stored mode says them
  // (they passed in silence, "No regression.").
  auto gapped = rounds({{"single", drifting(10, 1.0, 6, 0.01)}});
  gapped.sweep = SweepInfo{};
  gapped.sweep->repeat = 6;
  std::erase_if(gapped.runs, [](const RunResult& run) { return run.repetition == 2 || run.repetition == 4; });
  const PairedResult gaps = compare_paired(gapped, gapped, {});
  ASSERT_EQ(gaps.unpaired_rounds.size(), 1u) << markdown_paired(gaps, {});
  EXPECT_EQ(gaps.unpaired_rounds[0].rfind("single (faithful): 2 of 6 planned repetitions (2, 4) are absent from both "
                                          "builds' files", 0),
            0u)
      << gaps.unpaired_rounds[0];

  auto other = rounds({{"single", drifting(10, 1.0, 5, 0.01)}});
  for (auto& run : other.runs) run.config["amp"] = "bf16";
  EXPECT_THROW(compare_paired(rounds({{"single", drifting(10, 1.0, 5, 0.01)}}), other, {}), InputError);
  PairedOptions bad;
  bad.min_rounds = 5;
  bad.max_rounds = 4;
  EXPECT_THROW(compare_paired(base, base, bad), InputError);
  auto twice = base;
  twice.runs.push_back(twice.runs.front());
  EXPECT_THROW(compare_paired(twice, base, {}), InputError);
}

// A twin and dp-2 are rows like any other here: each against itself on the baseline build.
TEST(PairedCompare, EveryRowIsTimedTwinsIncluded) {
  const auto base = rounds({{"dp-2", drifting(8, 1.0, 6, 0.005)}, {"ddp-2.torch", drifting(7, 1.0, 6, 0.005)}});
  const auto cand = rounds({{"dp-2", drifting(8, 1.3, 6, 0.005)}, {"ddp-2.torch", drifting(7, 1.0, 6, 0.005)}});
  const PairedResult r = compare_paired(base, cand, {});
  EXPECT_EQ(comparison(r, "dp-2").verdict, Verdict::regression);
  EXPECT_EQ(comparison(r, "ddp-2.torch").verdict, Verdict::unchanged);
  EXPECT_TRUE(r.not_compared.empty());
}

// What the attack found (helper, this issue): each a pass that should have failed, or a file
// that should have been refused.
TEST(AdversarialPairedGate, UnmeasuredDisjointOtherWorkAndOutliersDoNotPass) {
  const auto base = rounds({{"ddp-2", drifting(6, 1.0, 12, 0.01)}});
  // A metric the candidate no longer measures, where the baseline build did, fails the row.
  auto unmeasured = base;
  for (auto& run : unmeasured.runs) run.train_time_s = kNotMeasured;
  const PairedResult lost = compare_paired(base, unmeasured, {});
  EXPECT_TRUE(lost.regression());
  ASSERT_EQ(lost.failed_rows.size(), 1u);
  EXPECT_NE(lost.failed_rows[0].find("no round ran on the candidate"), std::string::npos) << lost.failed_rows[0];
  EXPECT_NE(markdown_paired(lost, {}).find("says ok, but it measured no train_time_s"), std::string::npos);
  // One row's rounds numbered apart pair nothing: bad input, not 0 pairs within the noise
  // beside a row that pairs.
  const auto two_rows = rounds({{"ddp-2", drifting(6, 1.0, 12, 0.01)}, {"single", drifting(9, 1.0, 12, 0.01)}});
  auto renumbered = two_rows;
  for (auto& run : renumbered.runs) {
    if (run.name == "ddp-2") run.repetition += 100;
  }
  try {
    compare_paired(two_rows, renumbered, {});
    ADD_FAILURE() << "rounds 0-11 against 100-111 were taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ddp-2 (faithful) has no round that ran on both builds"), std::string::npos)
        << e.what();
  }
  // Half the work on the same settings reads faster only if it is let through.
  auto half = base;
  for (auto& run : half.runs) run.images_trained /= 2;
  const PairedResult halved = compare_paired(base, half, {});
  EXPECT_TRUE(halved.regression());
  EXPECT_NE(markdown_paired(halved, {}).find("did less work than configured: it trained 25000 images"),
            std::string::npos);
  auto elsewhere = base;
  elsewhere.environment.host = "another-host";
  EXPECT_THROW(compare_paired(base, elsewhere, {}), InputError);
  PairedOptions twice;
  twice.metrics = {"train_time_s", "train_time_s"};
  EXPECT_THROW(compare_paired(base, base, twice), InputError);
  PairedOptions accuracy;
  accuracy.metrics = {"test_accuracy"};
  EXPECT_THROW(compare_paired(base, base, accuracy), InputError);
  auto negative = base;
  negative.runs[0].repetition = -1;
  EXPECT_THROW(compare_paired(negative, negative, {}), InputError);
  auto tiny = base;
  tiny.runs[0].train_time_s = 1e-300;
  EXPECT_THROW(compare_paired(tiny, base, {}), InputError);
  // Twice as slow in 11 rounds of 12; in the other, a 20x burst on the baseline build.
  auto doubled = base;
  for (auto& run : doubled.runs) run.train_time_s *= 2;
  doubled.runs[11].train_time_s = base.runs[11].train_time_s / 20;
  const PairedResult burst = compare_paired(base, doubled, {});
  EXPECT_EQ(comparison(burst, "ddp-2").verdict, Verdict::regression) << markdown_paired(burst, {});
  EXPECT_NEAR(comparison(burst, "ddp-2").change, 1.0, 0.05);
}

// The second attack's cases (issue 27, after the one-sided test): each gave "no regression" or
// took what it should have refused.
TEST(AdversarialPairedGate, AbsentRoundsAllowedRowsSlowedBaselinesAndOtherMachines) {
  const auto base = rounds({{"a", drifting(6, 1.0, 12, 0.01)}, {"b", drifting(9, 1.0, 12, 0.01)}});
  // Row a left out of rounds 0-10 by a candidate that ran b in them, twice as slow in 11: not
  // a round on one side only (dropped) but a row absent where the candidate ran.
  auto absent = rounds({{"a", drifting(6, 2.0, 12, 0.01)}, {"b", drifting(9, 1.0, 12, 0.01)}});
  std::erase_if(absent.runs, [](const RunResult& r) { return r.name == "a" && r.repetition < 11; });
  const PairedResult left_out = compare_paired(base, absent, {});
  EXPECT_TRUE(left_out.regression()) << markdown_paired(left_out, {});
  ASSERT_EQ(left_out.failed_rows.size(), 1u);
  EXPECT_EQ(left_out.failed_rows[0], "a (faithful): absent on the candidate in round(s) 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "
                                     "10, which it ran other rows of, where the baseline build ran it");
  // Allowed to fail, a row 50 % slower in the rounds it ran is still a regression.
  auto slower = rounds({{"a", drifting(6, 1.5, 12, 0.01)}, {"b", drifting(9, 1.0, 12, 0.01)}});
  for (auto& r : slower.runs) {
    if (r.name == "a" && r.repetition == 2) r.status = RunStatus::failed;
  }
  PairedOptions allow;
  allow.allow_missing = {"a"};
  const PairedResult allowed = compare_paired(base, slower, allow);
  EXPECT_TRUE(allowed.regression()) << markdown_paired(allowed, allow);
  EXPECT_EQ(comparison(allowed, "a").verdict, Verdict::regression);
  EXPECT_EQ(comparison(allowed, "a").log_ratios.size(), 11u);
  ASSERT_EQ(allowed.allowed_missing.size(), 1u);
  EXPECT_EQ(allowed.allowed_missing[0], "a (faithful): failed on the candidate in round(s) 2, where the baseline build ran it");
  // A baseline slowed on purpose hides a regression of the candidate's: refused.
  auto slowed = rounds({{"a", drifting(6, 1.5, 12, 0.01)}});
  for (auto& r : slowed.runs) r.config["inject-slowdown"] = 0.5;
  try {
    compare_paired(slowed, rounds({{"a", drifting(6, 1.3, 12, 0.01)}}), {});
    ADD_FAILURE() << "a slowed baseline was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ran with --inject-slowdown 0.5:"), std::string::npos) << e.what();
  }
  // A slowed candidate is how the gate is measured: judged, and caught.
  EXPECT_TRUE(compare_paired(rounds({{"a", drifting(6, 1.0, 12, 0.01)}}), slowed, {}).regression());
  // Another machine is never paired, whatever --allow-env-mismatch allows.
  PairedOptions mismatch;
  mismatch.allow_env_mismatch = {"all"};
  auto other_host = base;
  other_host.environment.host = "elsewhere";
  try {
    compare_paired(base, other_host, mismatch);
    ADD_FAILURE() << "rounds of two machines were paired";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not run side by side (host:"), std::string::npos) << e.what();
  }
  // A round that ran on another host than its file's (a row `sweep --resume` kept from another
  // machine, under this one's environment: the sixth attack's "regression" from two machines).
  auto moved = base;
  moved.environment.host = "vm";
  for (auto& r : moved.runs) r.nodes = {"vm"};
  auto kept = moved;
  kept.runs[0].nodes = {"ci-runner-17"};
  EXPECT_NO_THROW(compare_paired(moved, moved, {}));
  try {
    compare_paired(moved, kept, mismatch);
    ADD_FAILURE() << "a round of another machine was paired";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ran on ci-runner-17, not on the file's host vm"), std::string::npos) << e.what();
  }
  // Another build type, or threads, is the stored mode's rule: cannot judge, until allowed.
  auto debug = base;
  debug.environment.build_type = "Debug";
  const PairedResult unjudged = compare_paired(base, debug, {});
  EXPECT_EQ(unjudged.exit_code(), 2);
  EXPECT_TRUE(unjudged.comparisons.empty());
  ASSERT_EQ(unjudged.cannot_judge.size(), 1u);
  EXPECT_NE(unjudged.cannot_judge[0].find("build type: not recorded vs Debug (--allow-env-mismatch build-type"),
            std::string::npos)
      << unjudged.cannot_judge[0];
  PairedOptions build_type;
  build_type.allow_env_mismatch = {"build-type"};
  EXPECT_FALSE(compare_paired(base, debug, build_type).comparisons.empty());
  // A name that is two lines would be two rows to run next.
  auto named = base;
  named.runs[0].name = "a\nb";
  EXPECT_THROW(compare_paired(named, named, {}), InputError);
  named.runs[0].name = "a|b";
  EXPECT_THROW(compare_paired(named, named, {}), InputError);
}

// The third attack's cases: a row that lost rounds reaches the cap with fewer pairs; an allowed
// row's unmeasured round; an edited slowdown; names a line reader splits; other work.
TEST(AdversarialPairedGate, ALostRoundStillReachesTheCapAndOtherEdits) {
  const auto base = rounds({{"a", drifting(6, 1.0, 12, 0.01)}});
  auto slower = rounds({{"a", drifting(6, 1.12, 12, 0.012)}});
  // The baseline build's round 3 failed: 11 pairs, and the row ran its 12th round, the cap's.
  auto flaky = base;
  flaky.runs[3].status = RunStatus::failed;
  const PairedResult lost = compare_paired(flaky, slower, {});
  EXPECT_EQ(comparison(lost, "a").rounds_run, 12);
  EXPECT_EQ(comparison(lost, "a").verdict, Verdict::regression) << markdown_paired(lost, {});
  EXPECT_FALSE(comparison(lost, "a").needs_more_rounds);
  // Allowed to fail in 9 of 12 rounds: 3 pairs at the cap cannot be judged (never a pass), and
  // are not asked for again.
  auto mostly_failed = rounds({{"a", drifting(6, 2.0, 12, 0.01)}});
  for (auto& r : mostly_failed.runs) {
    if (r.repetition < 9) r.status = RunStatus::failed;
  }
  PairedOptions allow;
  allow.allow_missing = {"a"};
  const PairedResult three = compare_paired(base, mostly_failed, allow);
  EXPECT_FALSE(comparison(three, "a").needs_more_rounds);
  EXPECT_NE(comparison(three, "a").why.find("3 pairs, fewer than the 4 any verdict needs (the cap is 12 rounds, and its "
                                            "row ran 12): cannot judge"),
            std::string::npos)
      << comparison(three, "a").why;
  EXPECT_TRUE(three.undecided_rows().empty());
  // Allowed, one round unmeasured on the candidate: judged on the other 11.
  auto unmeasured = rounds({{"a", drifting(6, 1.5, 12, 0.01)}});
  unmeasured.runs[5].train_time_s = kNotMeasured;
  const PairedResult eleven = compare_paired(base, unmeasured, allow);
  EXPECT_EQ(comparison(eleven, "a").verdict, Verdict::regression) << markdown_paired(eleven, allow);
  EXPECT_EQ(comparison(eleven, "a").log_ratios.size(), 11u);
  // A slowdown as a string, true or negative is an edited baseline.
  using nlohmann::json;
  for (const json& edited : {json("0.5"), json(true), json(-0.5), json::array({0.5})}) {
    auto slowed = base;
    for (auto& r : slowed.runs) r.config["inject-slowdown"] = edited;
    EXPECT_THROW(compare_paired(slowed, slower, {}), InputError) << edited.dump();
  }
  auto zero = base;
  for (auto& r : zero.runs) r.config["inject-slowdown"] = 0.0;
  auto zero_candidate = slower;
  for (auto& r : zero_candidate.runs) r.config["inject-slowdown"] = 0.0;
  EXPECT_TRUE(compare_paired(zero, zero_candidate, {}).regression());
  // Names and modes Python's splitlines() would break, and an empty name.
  for (const std::string& name : std::vector<std::string>{"a\x7f" "b", "a\xc2\x85" "b", "a\xe2\x80\xa8" "b", ""}) {
    auto named = base;
    named.runs[0].name = name;
    EXPECT_THROW(compare_paired(named, named, {}), InputError) << nlohmann::json(name).dump();
  }
  auto moded = base;
  for (auto& r : moded.runs) r.mode = "faith\nful";
  EXPECT_THROW(compare_paired(moded, moded, {}), InputError);
  // Another strategy than its configuration's is other work; no evaluation, or half the steps,
  // is less work than its own configuration asks: the candidate's row fails.
  auto other = slower;
  for (auto& r : other.runs) r.strategy = "dp";
  const PairedResult other_work = compare_paired(base, other, {});
  EXPECT_TRUE(other_work.regression());
  const auto said = proven(other).failed_by_proof();
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.front().find("did other work than configured: it ran strategy dp where its configuration asks single"),
            std::string::npos)
      << said.front();
  auto unevaluated = slower;
  for (auto& r : unevaluated.runs) r.eval_images = 0;
  EXPECT_TRUE(compare_paired(base, unevaluated, {}).regression());
  auto half_the_steps = slower;
  for (auto& r : half_the_steps.runs) r.steps /= 2;
  const PairedResult halved = compare_paired(base, half_the_steps, {});
  EXPECT_TRUE(halved.regression());
  EXPECT_NE(markdown_paired(halved, {}).find("trained 98 of the 196 steps"), std::string::npos);
  PairedOptions endless;
  endless.max_rounds = 1000000;
  EXPECT_THROW(compare_paired(base, slower, endless), InputError);
}

// compare's --out and --undecided-out replace only what compare wrote (the output rule): a file
// that starts with compare's own marker, never one that merely ends like a verdict (a user's notes
// ending "No regression seen last week", the attack) or holds name-like lines (requirements.txt,
// VERSION, an empty __init__.py).
TEST(PairedCompare, ItsOutputsAreRecognisedAndNothingElse) {
  const auto base = rounds({{"single", drifting(10, 1.0, 6, 0.01)}});
  EXPECT_TRUE(is_comparison_text(comparison_file(markdown_paired(compare_paired(base, base, {}), {}))));
  EXPECT_TRUE(is_comparison_text(comparison_file(markdown_comparison(compare_results(base, base, {}), {}))));
  EXPECT_FALSE(is_comparison_text(markdown_comparison(compare_results(base, base, {}), {})));
  EXPECT_FALSE(is_comparison_text("# My notes\n\nNo regression seen last week\n"));
  EXPECT_FALSE(is_comparison_text("No regression.\n"));
  EXPECT_FALSE(is_comparison_text(""));
  EXPECT_TRUE(is_undecided_rows_text(undecided_rows_file({})));
  EXPECT_TRUE(is_undecided_rows_text(undecided_rows_file({"ddp-2", "single.torch"})));
  for (const char* theirs : {"", "torch\nnumpy\nscipy\n", "1.2.3\n", "ddp-2\nsingle.torch\n", "my notes here\n"}) {
    EXPECT_FALSE(is_undecided_rows_text(theirs)) << theirs;
  }
  EXPECT_FALSE(is_undecided_rows_text(std::string(kUndecidedRowsMarker) + "my notes here\n"));
}
}  // namespace
}  // namespace ddpbench
