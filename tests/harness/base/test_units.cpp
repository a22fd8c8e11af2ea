#include <gtest/gtest.h>

#include "harness/base/units.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {
namespace {

TEST(Units, FormatsEachScale) {
  EXPECT_EQ(format_seconds(13.084), "13.08 s");
  EXPECT_EQ(format_seconds(0.4123), "412.3 ms");
  EXPECT_EQ(format_seconds(8.53e-5), "85.3 us");
  EXPECT_EQ(format_seconds(kNotMeasured), "-");
  EXPECT_EQ(format_bytes(3LL << 30), "3.00 GiB");
  EXPECT_EQ(format_bytes(312LL << 20), "312 MiB");
  EXPECT_EQ(format_bytes(0), "-");
  EXPECT_EQ(format_rate(1234567.4), "1,234,567");
  EXPECT_EQ(format_rate(999.6), "1,000");
  EXPECT_EQ(format_rate(12), "12");
  EXPECT_EQ(format_percent(0.274), "27.4 %");
  EXPECT_EQ(format_percent(kNotMeasured), "-");
  EXPECT_EQ(format_si(8.18e9, "FLOP"), "8.18 GFLOP");
  EXPECT_EQ(format_si(1.234e14, "FLOP/s"), "123 TFLOP/s");
  EXPECT_EQ(format_si(45.67e12, "FLOP/s"), "45.7 TFLOP/s");
  EXPECT_EQ(format_si(512, "FLOP"), "512 FLOP");
  EXPECT_EQ(format_si(999.999e6, "FLOP"), "1.00 GFLOP");
  EXPECT_EQ(format_si(kNotMeasured, "FLOP"), "-");
}

}  // namespace
}  // namespace ddpbench
