#include <gtest/gtest.h>

#include <cmath>

#include "harness/base/input_error.hpp"
#include "reports/compare.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

using testing::sample_run;

ResultDocument document_with(std::vector<RunResult> runs) {
  ResultDocument doc;
  doc.environment.gpus = {{"NVIDIA H200", 141LL << 30, "9.0"}};
  doc.environment.libtorch_version = "2.11.0";
  doc.runs = std::move(runs);
  return doc;
}

// Repetitions of one row with the given train times (images/s follow).
std::vector<RunResult> repetitions(const std::string& name, const std::vector<double>& times) {
  std::vector<RunResult> runs;
  for (std::size_t i = 0; i < times.size(); ++i) {
    runs.push_back(sample_run(name, "faithful", 1, times[i], 50000.0 / times[i], static_cast<int64_t>(i)));
  }
  return runs;
}

const MetricComparison& metric(const Comparison& c, const std::string& name) {
  for (const auto& m : c.metrics) {
    if (m.metric == name) return m;
  }
  throw std::runtime_error("no metric " + name);
}

TEST(Compare, IdenticalFilesShowNoRegression) {
  const auto doc = document_with(repetitions("single", {13.0}));
  const auto c = compare_results(doc, doc, {});
  EXPECT_FALSE(c.regression());
  ASSERT_EQ(c.metrics.size(), 2u);
  EXPECT_EQ(metric(c, "train_time_s").verdict, Verdict::unchanged);
  EXPECT_DOUBLE_EQ(metric(c, "train_time_s").ratio, 1.0);
  EXPECT_NE(markdown_comparison(c, {}).find("No regression"), std::string::npos);
}

TEST(Compare, TwentyPercentSlowerIsARegression) {
  const auto c = compare_results(document_with(repetitions("single", {10.0})), document_with(repetitions("single", {12.0})), {});
  EXPECT_TRUE(c.regression());
  EXPECT_EQ(metric(c, "train_time_s").verdict, Verdict::regression);
  EXPECT_DOUBLE_EQ(metric(c, "train_time_s").ratio, 1.2);
  EXPECT_EQ(metric(c, "steady_images_per_s").verdict, Verdict::regression);  // higher is better: fell by 1/6
  const std::string md = markdown_comparison(c, {});
  EXPECT_NE(md.find("| single (faithful) | train_time_s | 10.000 | 12.000 | 1.200 | REGRESSION"), std::string::npos) << md;
  // Faster is not a regression.
  const auto faster = compare_results(document_with(repetitions("single", {12.0})), document_with(repetitions("single", {10.0})), {});
  EXPECT_FALSE(faster.regression());
  EXPECT_EQ(metric(faster, "train_time_s").verdict, Verdict::improved);
}

TEST(Compare, AChangeWithinTheNoiseIsNotARegression) {
  // Medians 11.5 and 12.75 (+11 %), but the repetitions overlap.
  const auto c = compare_results(document_with(repetitions("single", {10.0, 12.0, 11.0, 13.0})),
                                 document_with(repetitions("single", {13.0, 11.0, 14.5, 12.5})), {});
  EXPECT_FALSE(c.regression());
  EXPECT_EQ(metric(c, "train_time_s").verdict, Verdict::within_noise);
  EXPECT_GT(metric(c, "train_time_s").p_value, 0.05);
}

TEST(Compare, SeparatedRepetitionsBeyondTheThresholdAreARegression) {
  const auto c = compare_results(document_with(repetitions("single", {10.0, 10.2, 9.9})),
                                 document_with(repetitions("single", {12.1, 12.0, 12.3})), {});
  EXPECT_TRUE(c.regression());
  EXPECT_EQ(metric(c, "train_time_s").verdict, Verdict::regression);
  // With enough repetitions, the rank test decides.
  const auto many = compare_results(document_with(repetitions("single", {10, 10.1, 9.9, 10.2, 9.8, 10.05})),
                                    document_with(repetitions("single", {12, 12.1, 11.9, 12.2, 11.8, 12.05})), {});
  EXPECT_EQ(metric(many, "train_time_s").verdict, Verdict::regression);
  EXPECT_LT(metric(many, "train_time_s").p_value, 0.01);
}

TEST(Compare, DifferentEnvironmentsAreRefusedUnlessAllowed) {
  auto base = document_with(repetitions("single", {10.0}));
  auto cur = document_with(repetitions("single", {10.0}));
  cur.environment.gpus = {{"NVIDIA A100-SXM4-40GB", 40LL << 30, "8.0"}};
  cur.runs[0].dataset = "synthetic";
  try {
    compare_results(base, cur, {});
    FAIL();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("GPU: NVIDIA H200 vs NVIDIA A100-SXM4-40GB"), std::string::npos) << what;
    EXPECT_NE(what.find("dataset of single (faithful): cifar10 vs synthetic"), std::string::npos) << what;
  }
  CompareOptions allow;
  allow.allow_env_mismatch = true;
  const auto c = compare_results(base, cur, allow);
  EXPECT_EQ(c.environment_differences.size(), 2u);
  EXPECT_FALSE(c.regression());
}

TEST(Compare, RowsMatchByNameModeAndConfiguration) {
  auto base = document_with(repetitions("single", {10.0}));
  auto cur = document_with(repetitions("single", {10.0}));
  cur.runs[0].config["batch-size"] = 128;
  EXPECT_THROW(compare_results(base, cur, {}), InputError);  // nothing left in common
  auto extra = document_with(repetitions("single", {10.0}));
  auto more = repetitions("ddp-2gpu", {6.0});
  extra.runs.push_back(more[0]);
  const auto c = compare_results(base, extra, {});
  ASSERT_EQ(c.not_compared.size(), 1u);
  EXPECT_EQ(c.not_compared[0], "ddp-2gpu (faithful): only in the current file");
}

TEST(Compare, ANewlyFailedRowIsARegression) {
  auto cur = document_with(repetitions("single", {10.0}));
  cur.runs[0].status = RunStatus::failed;
  cur.runs[0].reason = "rank 1 was killed by signal 9";
  const auto c = compare_results(document_with(repetitions("single", {10.0})), cur, {});
  EXPECT_TRUE(c.regression());
  ASSERT_EQ(c.failed_rows.size(), 1u);
  EXPECT_NE(c.failed_rows[0].find("killed by signal 9"), std::string::npos);
}

TEST(Compare, OneFailedRepetitionOutOfThreeIsARegression) {
  auto cur = document_with(repetitions("single", {10.0, 10.1, 9.9}));
  cur.runs[1].status = RunStatus::failed;
  cur.runs[1].reason = "rank 0 exited with status 1";
  const auto c = compare_results(document_with(repetitions("single", {10.0, 10.1, 9.9})), cur, {});
  EXPECT_TRUE(c.regression());
  ASSERT_EQ(c.failed_rows.size(), 1u);
  EXPECT_NE(c.failed_rows[0].find("1 of 3 repetitions failed (none in the baseline): rank 0 exited with status 1"),
            std::string::npos)
      << c.failed_rows[0];
  // Failing as often as the baseline did is not news.
  auto base = cur;
  EXPECT_TRUE(compare_results(base, cur, {}).failed_rows.empty());
}

// The threshold is symmetric, for lower- and higher-is-better metrics alike: a ratio beyond
// 1 - t or 1 + t, in the bad direction a regression, in the good one an improvement.
TEST(Compare, TheThresholdIsTheSameInBothDirections) {
  const auto verdict = [](double base_images, double cur_images) {
    auto base = document_with({sample_run("single", "faithful", 1, 10.0, base_images)});
    auto cur = document_with({sample_run("single", "faithful", 1, 10.0, cur_images)});
    CompareOptions options;
    options.metrics = {"images_per_s"};
    return metric(compare_results(base, cur, options), "images_per_s").verdict;
  };
  EXPECT_EQ(verdict(1000, 905), Verdict::unchanged);   // -9.5 %
  EXPECT_EQ(verdict(1000, 895), Verdict::regression);  // -10.5 %
  EXPECT_EQ(verdict(1000, 1095), Verdict::unchanged);  // +9.5 %
  EXPECT_EQ(verdict(1000, 1105), Verdict::improved);   // +10.5 %
  const auto time_verdict = [](double base_s, double cur_s) {
    return metric(compare_results(document_with(repetitions("single", {base_s})),
                                  document_with(repetitions("single", {cur_s})), {}),
                  "train_time_s")
        .verdict;
  };
  EXPECT_EQ(time_verdict(10.0, 10.95), Verdict::unchanged);
  EXPECT_EQ(time_verdict(10.0, 11.05), Verdict::regression);
  EXPECT_EQ(time_verdict(10.0, 9.05), Verdict::unchanged);
  EXPECT_EQ(time_verdict(10.0, 8.95), Verdict::improved);
}

TEST(Compare, NormalisingByARowGatesOnRatios) {
  // Everything got 30 % slower (a slower machine), but ddp's ratio to single held.
  auto base = document_with(repetitions("single", {10.0}));
  base.runs.push_back(repetitions("ddp-2gpu", {6.0})[0]);
  auto cur = document_with(repetitions("single", {13.0}));
  cur.runs.push_back(repetitions("ddp-2gpu", {7.8})[0]);
  CompareOptions options;
  options.metrics = {"train_time_s"};
  EXPECT_TRUE(compare_results(base, cur, options).regression());
  options.normalize_by = "single";
  const auto c = compare_results(base, cur, options);
  EXPECT_FALSE(c.regression());
  for (const auto& m : c.metrics) EXPECT_NEAR(m.ratio, 1.0, 1e-12) << m.row;
}

TEST(Compare, UnknownMetricIsBadInput) {
  const auto doc = document_with(repetitions("single", {10.0}));
  CompareOptions options;
  options.metrics = {"speed"};
  EXPECT_THROW(compare_results(doc, doc, options), InputError);
}

TEST(Compare, NoRowInCommonIsBadInput) {
  try {
    compare_results(document_with(repetitions("single", {10.0})), document_with(repetitions("other", {10.0})), {});
    FAIL() << "compared nothing";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no row in common"), std::string::npos) << e.what();
  }
}

// --min-vs-pytorch: a row under the floor against its PyTorch twin is a regression.
TEST(Compare, ARowBelowItsPyTorchTwinFailsTheFloor) {
  const ResultDocument slower = testing::twin_document({95, 96, 94}, {100, 100, 100});
  CompareOptions options;
  options.min_vs_pytorch = 1.0;
  const Comparison below = compare_results(slower, slower, options);
  EXPECT_TRUE(below.regression());
  ASSERT_EQ(below.below_pytorch.size(), 1u);
  EXPECT_NE(below.below_pytorch[0].find("below 1.00x"), std::string::npos) << below.below_pytorch[0];
  options.min_vs_pytorch = 0.9;
  EXPECT_FALSE(compare_results(slower, slower, options).regression());
  options.min_vs_pytorch.reset();
  EXPECT_FALSE(compare_results(slower, slower, options).regression()) << "no floor unless asked";
}

}  // namespace
}  // namespace ddpbench
