#include "harness/base/units.hpp"

#include <cmath>
#include <iterator>
#include <cstdio>

namespace ddpbench {

std::string format_fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const double magnitude = std::fabs(seconds);
  if (magnitude >= 1.0) return format_fixed(seconds, 2) + " s";
  if (magnitude >= 1e-3) return format_fixed(seconds * 1e3, 1) + " ms";
  return format_fixed(seconds * 1e6, 1) + " us";
}

std::string format_bytes(int64_t bytes) {
  if (bytes <= 0) return "-";
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return format_fixed(b / (1024.0 * 1024 * 1024), 2) + " GiB";
  if (b >= 1024.0 * 1024) return format_fixed(b / (1024.0 * 1024), 0) + " MiB";
  return format_fixed(b / 1024.0, 0) + " KiB";
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second)) return "-";
  const auto whole = static_cast<long long>(std::llround(per_second));
  std::string digits = std::to_string(whole < 0 ? -whole : whole);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return whole < 0 ? "-" + out : out;
}

std::string format_si(double value, const std::string& unit) {
  if (!std::isfinite(value)) return "-";
  static const char* const kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  std::size_t prefix = 0;
  double scaled = value;
  while (std::abs(scaled) >= 999.995 && prefix + 1 < std::size(kPrefixes)) {
    scaled /= 1000;
    ++prefix;
  }
  const int decimals = std::abs(scaled) >= 99.995 ? 0 : std::abs(scaled) >= 9.995 ? 1 : 2;
  return format_fixed(scaled, prefix == 0 && scaled == std::floor(scaled) ? 0 : decimals) + " " + kPrefixes[prefix] + unit;
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return format_fixed(fraction * 100.0, 1) + " %";
}

}  // namespace ddpbench
