#include <gtest/gtest.h>

#include "harness/launch/process_supervisor.hpp"

namespace ddpbench {
namespace {

ProcessExit exit_with(int code, int signal, std::vector<std::string> tail) {
  ProcessExit exit;
  exit.label = "rank 1";
  exit.exit_code = code;
  exit.signal = signal;
  exit.stderr_tail = std::move(tail);
  return exit;
}

// A rank's bad input is said once, by its launcher: exit 2 and its own "ddpbench: error:" line,
// never a failure that only printed one on its way (an exit 1, a signal).
TEST(ProcessExit, BadInputIsAnExitTwoWithTheBinarysOwnErrorLine) {
  const std::vector<std::string> said = {"[rank 1] loading", "[rank 1] ddpbench: error: --init-from 'w.pt': junk"};
  EXPECT_EQ(exit_with(2, 0, said).bad_input().value_or(""), "--init-from 'w.pt': junk");
  EXPECT_FALSE(exit_with(1, 0, said).bad_input()) << "a failed row is not bad input";
  EXPECT_FALSE(exit_with(0, 9, said).bad_input()) << "a killed rank is not bad input";
  EXPECT_FALSE(exit_with(2, 0, {"usage: ..."}).bad_input()) << "an exit 2 that said nothing of ours";
}

}  // namespace
}  // namespace ddpbench
