// `ddpbench compare` through the binary: its table and its exit codes.
#include <gtest/gtest.h>

#include "reports/result_file.hpp"
#include "support/process.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

testing::ProcessResult compare(std::vector<std::string> args) {
  args.insert(args.begin(), {testing::ddpbench_binary(), "compare"});
  return testing::run_process(args);
}

TEST(CompareCommand, ExitCodesForEachOutcome) {
  TempDir dir;
  const auto base = testing::sample_sweep_document();
  auto slower = base;
  for (auto& r : slower.runs) {
    r.train_time_s *= 1.2;
    r.images_per_s /= 1.2;
    r.steady_images_per_s /= 1.2;
  }
  auto other_gpu = base;
  other_gpu.environment.gpus = {{"NVIDIA H200", 141LL << 30, "9.0"}};
  write_result_file(dir / "base.json", base);
  write_result_file(dir / "slower.json", slower);
  write_result_file(dir / "h200.json", other_gpu);
  testing::write_text(dir / "broken.json", "{\"schema\": ");

  const auto same = compare({(dir / "base.json").string(), (dir / "base.json").string()});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("No regression"), std::string::npos) << same.out;

  const auto regression = compare({(dir / "base.json").string(), (dir / "slower.json").string(), "--out",
                                   (dir / "table.md").string()});
  EXPECT_EQ(regression.exit_code, 1) << regression.err;
  EXPECT_NE(regression.out.find("REGRESSION"), std::string::npos) << regression.out;
  EXPECT_EQ(testing::read_text(dir / "table.md"), regression.out);

  const auto loose = compare({(dir / "base.json").string(), (dir / "slower.json").string(), "--threshold", "0.25"});
  EXPECT_EQ(loose.exit_code, 0) << loose.out;

  const auto accuracy_only = compare({(dir / "base.json").string(), (dir / "slower.json").string(), "--metric",
                                      "test_accuracy"});
  EXPECT_EQ(accuracy_only.exit_code, 0) << accuracy_only.out;

  const auto mismatch = compare({(dir / "base.json").string(), (dir / "h200.json").string()});
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.err.find("different environments (GPU: NVIDIA A100-SXM4-40GB vs NVIDIA H200)"), std::string::npos)
      << mismatch.err;
  EXPECT_EQ(compare({(dir / "base.json").string(), (dir / "h200.json").string(), "--allow-env-mismatch"}).exit_code, 0);

  const auto broken = compare({(dir / "base.json").string(), (dir / "broken.json").string()});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.err.find("broken.json' is not valid JSON"), std::string::npos) << broken.err;
  EXPECT_EQ(compare({(dir / "base.json").string(), (dir / "absent.json").string()}).exit_code, 2);
  EXPECT_EQ(compare({(dir / "base.json").string()}).exit_code, 2);
  EXPECT_EQ(compare({(dir / "base.json").string(), (dir / "base.json").string(), "--metric", "speed"}).exit_code, 2);
}

}  // namespace
}  // namespace ddpbench
