#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "harness/base/statistics.hpp"

namespace ddpbench {
namespace {

TEST(Statistics, QuantilesInterpolateLikeNumpy) {
  const Quantiles q = quantiles({4, 1, 3, 2, 5});
  EXPECT_DOUBLE_EQ(q.p50, 3);
  EXPECT_DOUBLE_EQ(q.p90, 4.6);
  EXPECT_DOUBLE_EQ(q.max, 5);
  EXPECT_TRUE(std::isnan(quantiles({}).p50));
}

TEST(Statistics, MedianIsTheMiddleOrTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(Statistics, SamplesNotMeasuredAreLeftOut) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_DOUBLE_EQ(median({nan, 3, 1}), 2);
  EXPECT_DOUBLE_EQ(quantiles({nan, 2, 1}).max, 2);
  EXPECT_TRUE(std::isnan(quantile({nan}, 0.5)));
}

// Golden p-values from scipy 1.x, scipy.stats.mannwhitneyu(a, b, alternative="two-sided").
TEST(Statistics, MannWhitneyPValuesAreScipys) {
  EXPECT_NEAR(mann_whitney_p({1, 2, 3}, {4, 5, 6}), 0.1, 1e-12);  // exact: 2 of 20 arrangements
  EXPECT_NEAR(mann_whitney_p({1, 2}, {3, 4}), 1.0 / 3.0, 1e-12);
  // Ties: the normal approximation with the tie correction, whatever the sizes.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3}, {1, 2, 3}), 1.0, 1e-12);
  EXPECT_NEAR(mann_whitney_p({1, 2, 2, 3}, {2, 3, 3, 4}), 0.1720337089218229, 1e-12);
  EXPECT_NEAR(mann_whitney_p({1, 1, 1}, {1, 1, 2}), 0.5049850750938458, 1e-12);
  EXPECT_NEAR(mann_whitney_p({5, 5, 6, 7}, {5, 6, 6, 8, 9}), 0.37485714268334, 1e-12);
  EXPECT_NEAR(mann_whitney_p({1, 1, 2}, {2, 3, 3}), 0.11014892418594699, 1e-12);
  // Both sides above 8 values: the approximation.
  std::vector<double> ten, shifted;
  for (int i = 0; i < 10; ++i) {
    ten.push_back(i);
    shifted.push_back(i + 0.5);
  }
  EXPECT_NEAR(mann_whitney_p(ten, shifted), 0.7337299956962472, 1e-12);
  std::vector<double> a, b;
  for (int i = 0; i < 30; ++i) {
    a.push_back(i);
    b.push_back(i + 100);
  }
  EXPECT_LT(mann_whitney_p(a, b), 1e-8);  // normal approximation
}

// Lopsided samples (8 values against thousands) take the exact path, as scipy's: computed
// from the Gaussian binomial in milliseconds, where a table of every (i, j, U) would need
// gigabytes. Golden values from scipy.stats.mannwhitneyu(a, b, alternative="two-sided").
TEST(Statistics, MannWhitneyIsExactAndCheapForLopsidedSamples) {
  std::vector<double> eight, many;
  for (int i = 0; i < 8; ++i) eight.push_back(i);
  for (int i = 0; i < 5000; ++i) many.push_back(i + 3.5);
  const double p = mann_whitney_p(eight, many);
  EXPECT_NEAR(p / 2.787431752621147e-23, 1.0, 1e-9);
  std::vector<double> spread, dense;
  for (int i = 0; i < 8; ++i) spread.push_back(0.5 * i);
  for (int i = 0; i < 2000; ++i) dense.push_back(i * 0.01);
  EXPECT_NEAR(mann_whitney_p(spread, dense), 5.581354004619148e-05, 1e-15);
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4}, {5, 6, 7, 8}), 0.02857142857142857, 1e-15);
  EXPECT_NEAR(mann_whitney_p({3.1, 1.2, 7.7}, {0.5, 2.2, 9.1, 4.4, 6.0, 8.8, 10.2, 11.3, 12.9, 0.1, -1.0}),
              0.6593406593406593, 1e-12);
}

// A value that was not measured (NaN) or is infinite is no sample: it never reaches the test,
// and a side with none left has no p-value. (A NaN once stalled the count of ties forever.)
TEST(Statistics, MannWhitneyLeavesOutWhatWasNotMeasured) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, nan, inf}, {4, 5, 6, -inf}), 0.1, 1e-12);
  EXPECT_TRUE(std::isnan(mann_whitney_p({nan, nan}, {1, 2})));
  EXPECT_TRUE(std::isnan(mann_whitney_p({1, 2}, {})));
}

// How often chance alone names the same rank the slowest k steps in n.
TEST(Statistics, BinomialUpperTail) {
  EXPECT_DOUBLE_EQ(binomial_upper_tail(0, 5, 0.5), 1.0);
  EXPECT_NEAR(binomial_upper_tail(5, 5, 0.5), 1.0 / 32, 1e-12);
  EXPECT_NEAR(binomial_upper_tail(3, 4, 0.5), 5.0 / 16, 1e-12);
  EXPECT_NEAR(binomial_upper_tail(2, 3, 1.0 / 3), 7.0 / 27, 1e-12);
  EXPECT_DOUBLE_EQ(binomial_upper_tail(6, 5, 0.5), 0.0);
  EXPECT_LT(binomial_upper_tail(17, 17, 0.5), 1e-5);
}

// The straggler test picks the slowest rank after the fact. Over every way chance can make one
// rank the slowest in each of n steps (all r^n, equally likely), testing the rank slowest most
// often (the worst pick) must reach p < alpha in at most alpha of them: the binomial alone did in
// 6.3 % at 4 ranks over 3 steps and 24 % at 8 ranks over 20 (issue 55).
TEST(Statistics, TheSlowestOfRanksPickedAfterTheFactIsFlaggedByChanceAtMostAlpha) {
  for (const auto& [ranks, steps] : std::vector<std::pair<int64_t, int64_t>>{{2, 9}, {3, 7}, {4, 3}, {4, 7}, {8, 5}}) {
    int64_t outcomes = 1;
    for (int64_t s = 0; s < steps; ++s) outcomes *= ranks;
    int64_t flagged = 0, flagged_uncorrected = 0;
    for (int64_t outcome = 0; outcome < outcomes; ++outcome) {
      std::vector<int64_t> slowest_in(static_cast<std::size_t>(ranks), 0);
      for (int64_t rest = outcome, s = 0; s < steps; ++s, rest /= ranks) ++slowest_in[static_cast<std::size_t>(rest % ranks)];
      const int64_t most = *std::max_element(slowest_in.begin(), slowest_in.end());
      flagged += slowest_of_ranks_p(most, steps, ranks) < 0.05 ? 1 : 0;
      flagged_uncorrected += binomial_upper_tail(most, steps, 1.0 / static_cast<double>(ranks)) < 0.05 ? 1 : 0;
    }
    const double rate = static_cast<double>(flagged) / static_cast<double>(outcomes);
    EXPECT_LE(rate, 0.05) << ranks << " ranks, " << steps << " steps";
    if (ranks == 4 && steps == 3) {
      EXPECT_NEAR(static_cast<double>(flagged_uncorrected) / 64, 4.0 / 64, 1e-12) << "the binomial alone: 6.3 %";
    }
  }
  // The bound: the ranks times the binomial's tail, at most 1; one rank is no pick at all.
  EXPECT_NEAR(slowest_of_ranks_p(5, 5, 2), 2.0 / 32, 1e-12);
  EXPECT_NEAR(slowest_of_ranks_p(3, 3, 4), 4.0 / 64, 1e-12);
  EXPECT_DOUBLE_EQ(slowest_of_ranks_p(1, 3, 4), 1.0);
  EXPECT_DOUBLE_EQ(slowest_of_ranks_p(2, 2, 1), 1.0);
  EXPECT_NEAR(slowest_of_ranks_p(9, 10, 2), 2 * binomial_upper_tail(9, 10, 0.5), 1e-15);
}

// scipy.stats.trim_mean(x, 0.2), SciPy 1.17: floor(0.2 n) cut from each end, non-finite values left out.
TEST(Statistics, TrimmedMeanIsScipys) {
  EXPECT_NEAR(trimmed_mean({3.0, -1.0, 10.0, 2.5, 0.5, 7.0, 100.0, 1.5, 2.0, 4.0, -50.0}), 2.9285714285714284, 1e-15);
  EXPECT_NEAR(trimmed_mean({2.0, 1.0, 4.0, std::nan("")}), 2.3333333333333335, 1e-15) << "below 5 values nothing is cut";
  EXPECT_TRUE(std::isnan(trimmed_mean({})));
}

// Values from SciPy 1.16 (scipy.stats.t.cdf and .ppf), on both tails and a fractional df.
TEST(Statistics, StudentTIsScipys) {
  EXPECT_NEAR(student_t_cdf(-2.5, 3), 0.04385332350403278, 1e-12);
  EXPECT_NEAR(student_t_cdf(0.7, 7), 0.7467412239022, 1e-12);
  EXPECT_NEAR(student_t_cdf(4.0, 11), 0.9989569032165125, 1e-12);
  EXPECT_NEAR(student_t_cdf(-0.1, 1), 0.4682744825694465, 1e-12);
  EXPECT_NEAR(student_t_cdf(1.5, 2.5), 0.8760817734568519, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 3), 3.1824463052837078, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.975, 7), 2.364624251592784, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.995, 11), 3.1058065155392804, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.9, 1), 3.0776835371752544, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.025, 5), -2.5705818356363155, 1e-9);
  EXPECT_TRUE(std::isnan(student_t_quantile(1.0, 3)));
}

// scipy.stats.ttest_rel(log(candidate), log(baseline)) and its confidence_interval(0.95); and
// ttest_1samp on differences with a 90 % interval.
TEST(Statistics, PairedTTestIsScipysTtestRel) {
  const std::vector<double> base = {10.0, 10.4, 9.8, 10.1, 10.2, 9.9}, cand = {11.2, 11.3, 10.9, 11.4, 11.0, 11.1};
  std::vector<double> d;
  for (std::size_t i = 0; i < base.size(); ++i) d.push_back(std::log(cand[i]) - std::log(base[i]));
  const PairedTTest t = paired_t_test(d, 0.05);
  EXPECT_EQ(t.n, 6);
  EXPECT_NEAR(t.mean, 0.1022836406126113, 1e-12);
  EXPECT_NEAR(t.p_value, 4.027569378431128e-05, 1e-10);
  EXPECT_NEAR(t.ci_low, 0.08277432179581048, 1e-9);
  EXPECT_NEAR(t.ci_high, 0.12179295942941212, 1e-9);
  const PairedTTest u = paired_t_test({0.02, -0.01, 0.03, 0.00, 0.01, std::nan("")}, 0.10);
  EXPECT_EQ(u.n, 5);
  EXPECT_NEAR(u.p_value, 0.23019964108049884, 1e-10);
  EXPECT_NEAR(u.ci_low, -0.005074433190623234, 1e-9);
  EXPECT_NEAR(u.ci_high, 0.025074433190623226, 1e-9);
  // One pair has no spread to test; equal pairs are certain either way.
  EXPECT_TRUE(std::isnan(paired_t_test({0.1}, 0.05).p_value));
  EXPECT_EQ(paired_t_test({0.1, 0.1, 0.1}, 0.05).p_value, 0.0);
  EXPECT_EQ(paired_t_test({0.0, 0.0}, 0.05).p_value, 1.0);
}

// scipy.stats.trim_mean(d, 0.2), mstats.trimmed_stde(d, limits=(0.2, 0.2)) and
// mstats.trimmed_mean_ci(..., alpha): a doubling in 11 rounds of 12, and one round's 20x burst.
TEST(Statistics, TrimmedPairedTTestIsScipysTrimmedMeanTest) {
  std::vector<double> d = {0.69, 0.70, 0.68, 0.71, 0.69, 0.72, 0.70, 0.69, 0.68, 0.71, 0.70, std::log(1.0 / 20)};
  const PairedTTest t = trimmed_paired_t_test(d, 0.05);
  EXPECT_EQ(t.n, 12);
  EXPECT_NEAR(t.mean, 0.695, 1e-12);
  EXPECT_NEAR(t.p_value, 5.949980257829972e-13, 1e-15);
  EXPECT_NEAR(t.ci_low, 0.68171476, 1e-7);
  EXPECT_NEAR(t.ci_high, 0.70828524, 1e-7);
  EXPECT_GT(paired_t_test(d, 0.05).p_value, 0.01) << "the plain test, which the burst defeats";
  const PairedTTest u = trimmed_paired_t_test({0.02, -0.01, 0.03, 0.00, 0.01, 0.05, -0.02}, 0.10);
  EXPECT_NEAR(u.mean, 0.01, 1e-12);
  EXPECT_NEAR(u.p_value, 0.4112543622558611, 1e-9);
  EXPECT_NEAR(u.ci_low, -0.01326036, 1e-7);
  EXPECT_NEAR(u.ci_high, 0.03326036, 1e-7);
  // Below 5 differences nothing is trimmed.
  const std::vector<double> four = {0.02, -0.01, 0.03, 0.00};
  EXPECT_EQ(trimmed_paired_t_test(four, 0.05).p_value, paired_t_test(four, 0.05).p_value);
}

// statsmodels' multipletests(p, method="holm"): [0.04, 0.09, 0.09, 0.025, 0.5]; NaN left out.
TEST(Statistics, HolmIsStatsmodels) {
  const auto adjusted = holm_adjusted({0.01, 0.04, 0.03, 0.005, std::nan(""), 0.5});
  const std::vector<double> expected = {0.04, 0.09, 0.09, 0.025, std::nan(""), 0.5};
  ASSERT_EQ(adjusted.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(adjusted[i]));
    } else {
      EXPECT_NEAR(adjusted[i], expected[i], 1e-12) << i;
    }
  }
}

}  // namespace
}  // namespace ddpbench
