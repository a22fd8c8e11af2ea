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

}  // namespace ddpbench
