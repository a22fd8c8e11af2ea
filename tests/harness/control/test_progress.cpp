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

}  // namespace
}  // namespace ddpbench
