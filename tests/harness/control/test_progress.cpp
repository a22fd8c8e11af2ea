#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "harness/control/progress.hpp"

namespace ddpbench {
namespace {

std::string contents(std::FILE* f) {
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  return out;
}

TEST(Progress, PlainLinesEveryIntervalAndAtTheEndWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  Progress p("single", 7, 3, true, f);
  for (int step = 1; step <= 7; ++step) p.update(step, 2.5, 1000);
  p.finish();
  const std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;  // steps 3, 6 and 7
  EXPECT_NE(out.find("[single] step 3/7  loss 2.5000  1000 images/s"), std::string::npos) << out;
  EXPECT_NE(out.find("step 7/7"), std::string::npos);
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

TEST(Progress, DisabledPrintsNothing) {
  std::FILE* f = std::tmpfile();
  Progress p("single", 2, 1, false, f);
  p.update(1, 1, 1);
  p.update(2, 1, 1);
  p.finish();
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(Progress, TheSweepLineCountsRowsAndEstimatesFromMeasuredRows) {
  EXPECT_EQ(sweep_progress(0, 10, {}), "0 done, 10 left, ETA after the first measured row");
  // Two rows measured at 60 s and 120 s: 90 s each for the 8 left (this one included).
  EXPECT_EQ(sweep_progress(2, 10, {60.0, 120.0}), "2 done, 8 left, ETA 0:12:00");
  EXPECT_EQ(sweep_progress(9, 10, {4000.0}), "9 done, 1 left, ETA 1:06:40");
}

}  // namespace
}  // namespace ddpbench
