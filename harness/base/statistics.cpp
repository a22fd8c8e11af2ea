#include "harness/base/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ddpbench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> finite_sorted(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }), values.end());
  std::sort(values.begin(), values.end());
  return values;
}

double sorted_quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// Number of ways (m choose from m+n) to reach each U, by the classic recursion.
std::vector<double> u_distribution(std::size_t m, std::size_t n) {
  std::vector<std::vector<double>> prev(n + 1), cur(n + 1);
  for (std::size_t j = 0; j <= n; ++j) prev[j] = {1.0};  // m = 0: U = 0 in one way
  for (std::size_t i = 1; i <= m; ++i) {
    cur[0] = {1.0};
    for (std::size_t j = 1; j <= n; ++j) {
      // f(i, j, u) = f(i - 1, j, u - j) + f(i, j - 1, u)
      std::vector<double> f(i * j + 1, 0.0);
      for (std::size_t u = 0; u < prev[j].size(); ++u) f[u + j] += prev[j][u];
      for (std::size_t u = 0; u < cur[j - 1].size(); ++u) f[u] += cur[j - 1][u];
      cur[j] = std::move(f);
    }
    std::swap(prev, cur);
  }
  return prev[n];
}

}  // namespace

double quantile(std::vector<double> values, double q) { return sorted_quantile(finite_sorted(std::move(values)), q); }

double median(std::vector<double> values) { return quantile(std::move(values), 0.5); }

Quantiles quantiles(std::vector<double> values) {
  const auto sorted = finite_sorted(std::move(values));
  if (sorted.empty()) return {};
  return {sorted_quantile(sorted, 0.5), sorted_quantile(sorted, 0.9), sorted.back()};
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t m = a.size(), n = b.size();
  if (m == 0 || n == 0) return kNaN;
  // U of a: pairs where a wins, ties counting half.
  double u = 0;
  for (double x : a) {
    for (double y : b) u += x > y ? 1.0 : (x == y ? 0.5 : 0.0);
  }
  const double mean = static_cast<double>(m * n) / 2;
  std::vector<double> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  double ties = 0;  // sum of t^3 - t over groups of t equal values
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    const double t = static_cast<double>(j - i);
    ties += t * t * t - t;
    i = j;
  }
  // As scipy.stats.mannwhitneyu(method="auto"): the exact distribution when a sample has at
  // most 8 values and nothing is tied (with ties it is not U's distribution); otherwise the
  // normal approximation with the tie correction and the continuity correction.
  if (ties == 0 && std::min(m, n) <= 8) {
    const auto counts = u_distribution(m, n);
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    const double distance = std::fabs(u - mean);
    double tail = 0;
    for (std::size_t k = 0; k < counts.size(); ++k) {
      if (std::fabs(static_cast<double>(k) - mean) >= distance - 1e-9) tail += counts[k];
    }
    return std::min(1.0, tail / total);
  }
  const double N = static_cast<double>(m + n);
  const double variance = static_cast<double>(m * n) / 12.0 * ((N + 1) - ties / (N * (N - 1)));
  if (variance <= 0) return 1.0;
  const double z = (std::fabs(u - mean) - 0.5) / std::sqrt(variance);
  return std::erfc(std::max(0.0, z) / std::sqrt(2.0));
}

}  // namespace ddpbench
