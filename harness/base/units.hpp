#pragma once
// Formatting SI quantities for people; only reporters call these.
#include <cstdint>
#include <string>

namespace ddpbench {

std::string format_fixed(double value, int decimals);  // "-" for NaN
std::string format_seconds(double seconds);            // 13.08 s, 412 ms, 85.3 us
std::string format_bytes(int64_t bytes);               // 1.50 GiB, 312 MiB
std::string format_rate(double per_second);            // 3,823
std::string format_percent(double fraction);           // 27.4 %
std::string format_si(double value, const std::string& unit);  // 8.18 GFLOP, 1.23 TFLOP/s, 512 FLOP

}  // namespace ddpbench
