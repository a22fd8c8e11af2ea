// --trace-steps on one process: the steps it checks before any work, the file it names after
// the row's JSON, and a traced row whose traced steps stay out of its steady figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "data/synthetic.hpp"
#include "harness/base/gzip.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/statistics.hpp"
#include "harness/runner/runner.hpp"
#include "harness/runner/step_trace.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

RunConfig traced_config(const std::filesystem::path& out) {
  RunConfig c;
  c.model = "tiny";
  c.num_classes = 10;
  c.dataset = DatasetKind::synthetic;
  c.batch_size = 50;
  c.warmup_steps = 2;
  c.device = "cpu";
  c.trace_steps = "3:5";
  c.out = out.string();
  return c;
}

// The CRC-32 the record holds is the saved file's, and the traced steps are out of the steady figures.
TEST(StepTrace, ATracedRowRecordsItsFileAndLeavesItsTracedStepsOutOfTheSteadyFigures) {
  testing::TempDir dir;
  const RunConfig config = traced_config(dir.path() / "row.json");
  const DatasetSplits data = make_synthetic({0, 500, 50});
  // A user's file at the name the profiler's scratch once had beside the row: never touched.
  testing::write_text(dir.path() / ".row.rank0.trace.json.partial", "a user's file");
  const RunResult r = run_row(config, DistContext{}, data, std::chrono::steady_clock::now());
  ASSERT_EQ(r.status, RunStatus::ok) << r.reason;
  EXPECT_EQ(testing::read_text(dir.path() / ".row.rank0.trace.json.partial"), "a user's file");
  std::filesystem::remove(dir.path() / ".row.rank0.trace.json.partial");
  ASSERT_TRUE(r.trace.traced());
  EXPECT_EQ(r.trace.first_step, 3);
  EXPECT_EQ(r.trace.last_step, 5);
  ASSERT_EQ(r.trace.files, std::vector<std::string>{"row.rank0.trace.json"});
  const std::string bytes = testing::read_text(dir.path() / "row.rank0.trace.json");
  ASSERT_EQ(r.trace.crc32.size(), 1u);
  EXPECT_EQ(r.trace.crc32[0], crc32_of(bytes));
  const auto trace = nlohmann::json::parse(bytes);
  EXPECT_EQ(trace.at("distributedInfo").at("rank"), 0);
  EXPECT_EQ(trace.at("ddpbench").at("first_step"), 3);
  std::vector<std::string> steps;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("name", "").starts_with("ProfilerStep#")) steps.push_back(e.at("name"));
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"}));

  std::vector<double> steady, traced;
  for (std::size_t i = 0; i < r.step_records.size(); ++i) {
    if (i >= 3 && i <= 5) traced.push_back(r.step_records[i].time_s);
    if (i >= 2 && (i < 3 || i > 5)) steady.push_back(r.step_records[i].time_s);
  }
  EXPECT_DOUBLE_EQ(r.step_time_s.p50, quantiles(steady).p50);
  EXPECT_DOUBLE_EQ(r.trace.untraced_step_time_s, quantiles(steady).p50);
  EXPECT_DOUBLE_EQ(r.trace.traced_step_time_s, quantiles(traced).p50);
  EXPECT_GT(r.trace.profiler_switch_s, 0);
  EXPECT_GT(r.trace.save_s, 0);
  // No scratch file is left beside the trace.
  int64_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(StepTrace, WithoutAFolderForItsFilesATraceIsBadInput) {
  RunConfig c = traced_config("");
  c.out.clear();
  EXPECT_THROW(StepTrace(c, DistContext{}), InputError);
}

}  // namespace
}  // namespace ddpbench
