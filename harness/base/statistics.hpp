#pragma once
// Statistics of measured samples, for the runner (step-time quantiles), the reports (medians
// of repetitions) and compare (the rank test). Non-finite samples (not measured) are left out.
#include <cstdint>
#include <limits>
#include <vector>

namespace ddpbench {

struct Quantiles {
  double p50 = std::numeric_limits<double>::quiet_NaN();
  double p90 = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
};

/// The q-quantile (0 <= q <= 1) with linear interpolation, as numpy's default; NaN when
/// there is no finite value.
double quantile(std::vector<double> values, double q);

/// The median (the mean of the middle two for an even count); NaN when empty.
double median(std::vector<double> values);

/// p50, p90 and the maximum.
Quantiles quantiles(std::vector<double> values);

/// Two-sided p-value of the Mann-Whitney U test, as scipy.stats.mannwhitneyu's default: exact
/// when a side has at most 8 values and none are tied, else the normal approximation with tie
/// and continuity corrections; NaN when a side has no finite value (non-finite ones are left out).
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

/// P(X >= k) for X ~ Binomial(n, p): how often chance alone would do as well (1 for k <= 0).
double binomial_upper_tail(int64_t k, int64_t n, double p);

/// How often chance alone makes some one of `ranks` equally likely ranks the slowest in `k` or
/// more of `n` steps, for a rank picked after the fact (the slowest): the Bonferroni bound
/// ranks x P(Binomial(n, 1 / ranks) >= k), at most 1. Testing the picked rank as if it had been
/// named in advance (the binomial alone) flags even rows far more often than alpha.
double slowest_of_ranks_p(int64_t k, int64_t n, int64_t ranks);

/// P(T <= t) for Student's t with `df` > 0 degrees of freedom (scipy.stats.t.cdf).
double student_t_cdf(double t, double df);

/// The t with P(T <= t) = p, 0 < p < 1 (scipy.stats.t.ppf), to 1e-10 relative.
double student_t_quantile(double p, double df);

/// A paired t test on differences: their mean, the two-sided p-value of "mean 0" and the
/// (1 - alpha) confidence interval of the mean (scipy.stats.ttest_rel on the two samples,
/// with its confidence_interval). NaN p and interval with fewer than 2 finite differences; all
/// differences equal: p 0 (or 1 when they are 0) and an interval of that one value.
struct PairedTTest {
  double mean = std::numeric_limits<double>::quiet_NaN();
  double p_value = std::numeric_limits<double>::quiet_NaN();
  double ci_low = std::numeric_limits<double>::quiet_NaN();
  double ci_high = std::numeric_limits<double>::quiet_NaN();
  int64_t n = 0;
};
PairedTTest paired_t_test(const std::vector<double>& differences, double alpha);

/// The 20 % trimmed mean of the finite values (scipy.stats.trim_mean(x, 0.2)): floor(0.2 n)
/// cut from each end; NaN with none.
double trimmed_mean(std::vector<double> values);

/// The same test on the 20 % trimmed mean of the differences (Tukey and McLaughlin; Yuen's test
/// for one sample): the lowest and highest floor(0.2 n) differences are trimmed, the standard
/// error comes from the winsorised variance, on n - 2 floor(0.2 n) - 1 degrees of freedom. One
/// round's burst in five moves it little, where it widens the plain test's interval many-fold.
/// Below 5 differences nothing is trimmed and it is paired_t_test. `mean` is the trimmed mean.
PairedTTest trimmed_paired_t_test(const std::vector<double>& differences, double alpha);

/// Holm's step-down adjustment of p-values (statsmodels' multipletests method "holm"): reject
/// where the adjusted value is below alpha, and the chance of any false rejection among them
/// stays at most alpha. NaN p-values stay NaN and are not counted.
std::vector<double> holm_adjusted(const std::vector<double>& p_values);

}  // namespace ddpbench
