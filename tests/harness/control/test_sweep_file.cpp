#include <gtest/gtest.h>

#include <string>

#include "harness/base/input_error.hpp"
#include "harness/control/sweep_file.hpp"

namespace ddpbench {
namespace {

std::string refusal(const std::string& text) {
  try {
    (void)parse_sweep_file(text, "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A sweep file's options are JSON: a value of another type than a result file holds it as is bad
// input (the command line's text "16" is a count; the file's "16" is a string), in every layer.
TEST(SweepFile, AnOptionValueOfAnotherJsonTypeIsBadInput) {
  EXPECT_NE(refusal(R"({"rows": [{"name": "x", "options": {"batch-size": "16"}}]})")
                .find("s.json', row 'x': --batch-size: \"16\" is not a value of its type (N)"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"defaults": {"sync-bn": "true"}, "rows": [{"name": "x"}]})").find("--sync-bn: \"true\""),
            std::string::npos);
  EXPECT_NE(refusal(R"({"rows": [{"name": "x", "controlled": {"max-steps": "none"}}]})").find("--max-steps"),
            std::string::npos);
  EXPECT_EQ(refusal(R"({"rows": [{"name": "x", "options": {"batch-size": 16, "lr": 1, "max-steps": null,
                                                           "amp": "bf16", "sync-bn": false}}]})"),
            "")
      << "each option of its own type is taken";
}

// A row named 'ddp-2.rank0.trace' wrote its result over ddp-2's rank-0 trace (the sweep removes a
// row's file before it runs), and 'ddp-2.merged.trace' would be ddp-2's merged trace.
TEST(SweepFile, ARowNamedAsAnotherRowsTraceIsBadInput) {
  for (const char* name : {"ddp-2.rank0.trace", "ddp-2.merged.trace"}) {
    EXPECT_NE(refusal(std::string(R"({"rows": [{"name": "ddp-2"}, {"name": ")") + name + R"("}]})")
                  .find("name '" + std::string(name) + "' ends in '.trace'"),
              std::string::npos)
        << name;
  }
  EXPECT_EQ(refusal(R"({"rows": [{"name": "ddp-2.trace-steps"}, {"name": "traced"}]})"), "");
}

// The sweep names each row and places its result file: a sweep file can no more set them than
// the command line can (`sweep --out`), in any layer.
TEST(SweepFile, TheOptionsTheSweepSetsItselfAreBadInput) {
  EXPECT_NE(refusal(R"({"defaults": {"out": "a.json"}, "rows": [{"name": "x"}]})").find("'out': not for sweep"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"rows": [{"name": "x", "options": {"name": "y"}}]})").find("row 'x': 'name': not for sweep"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"rows": [{"name": "x", "faithful": {"out": "b.json"}}]})").find("(faithful): 'out'"),
            std::string::npos);
  EXPECT_TRUE(sweep_sets_itself("out") && sweep_sets_itself("name") && !sweep_sets_itself("out-dir"));
}

}  // namespace
}  // namespace ddpbench
