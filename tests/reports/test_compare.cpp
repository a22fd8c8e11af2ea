#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "harness/base/input_error.hpp"
#include "reports/compare.hpp"
#include "reports/environment_fingerprint.hpp"
#include "support/proven_documents.hpp"
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

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line.find(text) != std::string::npos; });
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

// "No regression" means the data exclude one: slower past the threshold but within the noise
// is cannot judge, too noisy (exit 2), never a pass; faster within the noise is no regression.
TEST(Compare, SlowerPastTheThresholdWithinTheNoiseCannotBeJudged) {
  // Medians 11.5 and 12.75 (+11 %), but the repetitions overlap.
  const auto c = compare_results(document_with(repetitions("single", {10.0, 12.0, 11.0, 13.0})),
                                 document_with(repetitions("single", {13.0, 11.0, 14.5, 12.5})), {});
  EXPECT_FALSE(c.regression());
  EXPECT_EQ(metric(c, "train_time_s").verdict, Verdict::cannot_judge);
  EXPECT_GT(metric(c, "train_time_s").p_value, 0.05);
  EXPECT_EQ(c.exit_code(), 2);
  ASSERT_FALSE(c.cannot_judge.empty());
  EXPECT_NE(c.cannot_judge.front().find("single (faithful): train_time_s: too noisy: the median is 10.9 % worse, past "
                                        "the 10.0 % threshold"),
            std::string::npos)
      << c.cannot_judge.front();
  EXPECT_NE(markdown_comparison(c, {}).find("Cannot judge"), std::string::npos);
  const auto faster = compare_results(document_with(repetitions("single", {13.0, 11.0, 14.5, 12.5})),
                                      document_with(repetitions("single", {10.0, 12.0, 10.5, 13.0})), {});
  EXPECT_EQ(metric(faster, "train_time_s").verdict, Verdict::within_noise) << metric(faster, "train_time_s").detail;
  EXPECT_EQ(faster.exit_code(), 0);
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

// Another environment is cannot judge, naming each difference, unless --allow-env-mismatch names
// its aspect; nothing is judged meanwhile, not even a 3x slower row.
TEST(Compare, DifferentEnvironmentsAreCannotJudgeUnlessTheirAspectIsAllowed) {
  auto base = document_with(repetitions("single", {10.0}));
  auto cur = document_with(repetitions("single", {30.0}));
  cur.environment.gpus = {{"NVIDIA A100-SXM4-40GB", 40LL << 30, "8.0"}};
  cur.runs[0].dataset = "synthetic";
  for (auto* doc : {&base, &cur}) doc->runs[0].config["synthetic-train-images"] = 50000;
  const Comparison refused = compare_results(base, cur, {});
  EXPECT_FALSE(refused.regression()) << "nothing is judged across environments";
  EXPECT_EQ(refused.exit_code(), 2);
  EXPECT_TRUE(refused.metrics.empty());
  EXPECT_TRUE(mentions(refused.cannot_judge, "measured in another environment: GPU 0: NVIDIA H200 vs NVIDIA "
                                             "A100-SXM4-40GB (--allow-env-mismatch gpu compares them anyway)"));
  EXPECT_TRUE(mentions(refused.cannot_judge, "dataset of single (faithful): cifar10 vs synthetic (--allow-env-mismatch "
                                             "dataset"));
  CompareOptions gpu_only;
  gpu_only.allow_env_mismatch = {"gpu"};
  EXPECT_EQ(compare_results(base, cur, gpu_only).cannot_judge.size(), 1u) << "the dataset is still another";
  CompareOptions allow;
  allow.allow_env_mismatch = {"gpu", "dataset"};
  const auto c = compare_results(base, cur, allow);
  EXPECT_EQ(c.environment_differences.size(), 2u);
  EXPECT_TRUE(c.regression()) << "judged once allowed";
  allow.allow_env_mismatch = {"all"};
  EXPECT_TRUE(compare_results(base, cur, allow).regression());
  allow.allow_env_mismatch = {"weather"};
  EXPECT_THROW(compare_results(base, cur, allow), InputError);
}

// Three answers everywhere: every row allowed missing and nothing timed read "No regression",
// exit 0; it is cannot judge. Repetitions the sweep planned and the file lacks (1-2 of 5 judged
// without a word) are named and counted, as --update-baseline does.
TEST(Compare, NothingTimedIsCannotJudgeAndAbsentPlannedRepetitionsAreCounted) {
  auto base = document_with(repetitions("single", {10.0, 10.1, 9.9, 10.2, 9.8}));
  base.sweep = SweepInfo{};
  base.sweep->repeat = 5;
  auto gone = base;
  for (auto& r : gone.runs) {
    r.status = RunStatus::skipped;
    r.reason = "no GPU here";
  }
  CompareOptions allowed;
  allowed.allow_missing = {"single"};
  const Comparison nothing = compare_results(base, gone, allowed);
  EXPECT_FALSE(nothing.regression());
  EXPECT_EQ(nothing.exit_code(), 2);
  EXPECT_TRUE(mentions(nothing.cannot_judge, "nothing was timed"));
  EXPECT_NE(markdown_comparison(nothing, allowed).find("\nCannot judge (threshold"), std::string::npos);
  auto cut = base;
  cut.runs.resize(2);  // the sweep was cut short after two of its five repetitions
  const Comparison partial = compare_results(base, cut, {});
  EXPECT_TRUE(mentions(partial.partial_rows, "single (faithful): 3 of 5 planned repetitions (2-4) are absent from the "
                                             "current file"));
  EXPECT_TRUE(mentions(compare_results(cut, base, {}).partial_rows, "(2-4) are absent from the baseline"));
  EXPECT_TRUE(compare_results(base, base, {}).partial_rows.empty());
  // An edited file's repeat of 2^62 is counted from the gaps: one by one, it never finished (the
  // test's time limit is the bound).
  auto huge = cut;
  huge.sweep->repeat = int64_t{1} << 62;
  const Comparison vast = compare_results(base, huge, {});
  EXPECT_TRUE(mentions(vast.partial_rows, "single (faithful): 4611686018427387902 of 4611686018427387904 planned "
                                          "repetitions (2-4611686018427387903) are absent from the current file"));
}

// The rule's aspects beyond the machine: the build type, OMP_NUM_THREADS and each rank's threads,
// the CPUs the process could use.
TEST(EnvironmentFingerprint, BuildTypeThreadsAndAffinityAreAspectsOfTheEnvironment) {
  Environment a;
  a.build_type = "Release";
  a.omp_num_threads = "unset";
  a.cpu_affinity = "0-1";
  Environment b = a;
  EXPECT_TRUE(environment_differences(a, b).empty());
  b.build_type = "Debug";
  b.omp_num_threads = "1";
  b.cpu_affinity = "0";
  const auto d = environment_differences(a, b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].aspect, "build-type");
  EXPECT_EQ(d[0].text, "build type: Release vs Debug");
  EXPECT_EQ(d[1].aspect, "threads");
  EXPECT_EQ(d[1].text, "OMP_NUM_THREADS: unset vs 1");
  EXPECT_EQ(d[2].aspect, "cpu-affinity");
  EXPECT_EQ(d[2].text, "CPUs the process could use: 0-1 vs 0");
  // A file that says nothing of them (an older writer's, or one edited to escape the check) is not
  // read as agreeing: each is a difference, which --allow-env-mismatch may allow.
  Environment old = a;
  old.cpu_affinity.clear();
  old.omp_num_threads.clear();
  const auto unsaid = environment_differences(old, a);
  ASSERT_EQ(unsaid.size(), 2u);
  EXPECT_EQ(unsaid[0].text, "OMP_NUM_THREADS: not recorded vs unset");
  EXPECT_EQ(unsaid[1].text, "CPUs the process could use: not recorded vs 0-1");
  EXPECT_TRUE(unallowed_differences(unsaid, {"threads", "cpu-affinity"}).empty());
  RunResult two, one, unrecorded;
  two.threads_per_rank = 2;
  one.threads_per_rank = 1;
  const auto rows = row_environment_differences("single", {&two}, {&one});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].aspect, "threads");
  EXPECT_EQ(rows[0].text, "threads per rank of single: 2 vs 1");
  // An ok row that records no threads (deleted from its file) is not read as agreeing; a failed
  // one, which counts none, is not compared.
  const auto unsaid_threads = row_environment_differences("single", {&unrecorded}, {&two});
  ASSERT_EQ(unsaid_threads.size(), 1u);
  EXPECT_EQ(unsaid_threads[0].text, "threads per rank of single: not recorded vs 2");
  EXPECT_TRUE(row_environment_differences("single", {&unrecorded}, {&unrecorded}).empty());
  RunResult failed;
  failed.status = RunStatus::failed;
  EXPECT_TRUE(row_environment_differences("single", {&failed}, {&two}).empty());
  // Under --dataset auto the data found decides, repetition by repetition: a row of which some
  // repetitions trained on CIFAR-10 passed against one all synthetic (its first said synthetic).
  RunResult synthetic = two, cifar = two;
  synthetic.dataset = "synthetic";
  cifar.dataset = "cifar10";
  const auto mixed = row_environment_differences("single", {&synthetic, &synthetic}, {&synthetic, &cifar});
  ASSERT_EQ(mixed.size(), 1u);
  EXPECT_EQ(mixed[0].text, "dataset of single: synthetic vs cifar10, synthetic");
  EXPECT_TRUE(row_environment_differences("single", {&two}, {&two}).empty());
  EXPECT_EQ(unallowed_differences(d, {"build-type", "cpu-affinity"}).size(), 1u);
  EXPECT_TRUE(unallowed_differences(d, {"all"}).empty());
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
  options.allow_missing = {"single"};  // the yardstick cannot judge itself
  const auto c = compare_results(base, cur, options);
  EXPECT_FALSE(c.regression());
  EXPECT_FALSE(c.cannot_judge_any());
  for (const auto& m : c.metrics) EXPECT_NEAR(m.ratio, 1.0, 1e-12) << m.row;
}

// The fifth attack on the outputs: a normalising row (or a twin) that ran other settings now
// (twice the steps, so twice the time) hid a 1.9x slower ddp-2 under --allow-missing: "ok".
TEST(Compare, ADivisorRunningOtherSettingsOnTheTwoSidesDividesNothing) {
  auto base = document_with(repetitions("single", {10.0}));
  base.runs.push_back(repetitions("ddp-2gpu", {6.0})[0]);
  auto cur = document_with(repetitions("single", {20.0}));
  cur.runs.push_back(repetitions("ddp-2gpu", {11.4})[0]);
  cur.runs[0].config["max-steps"] = 392;  // the yardstick trained twice its steps
  CompareOptions options;
  options.metrics = {"train_time_s"};
  options.normalize_by = "single";
  options.allow_missing = {"single"};
  try {
    (void)compare_results(base, cur, options);
    FAIL() << "a yardstick of other settings divided the rows";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--normalize-by single: single (faithful) runs other settings in the two "
                                         "files (max-steps"),
              std::string::npos)
        << e.what();
  }
  const ResultDocument twins = testing::twin_document({100, 100, 100}, {100, 100, 100});
  ResultDocument other = testing::twin_document({50, 50, 50}, {50, 50, 50});  // both 2x slower: ratios held
  for (auto& r : other.runs) {
    if (r.name == "ddp.torch") r.config["max-steps"] = 20;  // the twin ran twice the steps
  }
  CompareOptions by_twin;
  by_twin.normalize_by = "twin";
  by_twin.allow_missing = {"ddp.torch"};
  const Comparison c = compare_results(twins, other, by_twin);
  EXPECT_TRUE(c.cannot_judge_any());
  EXPECT_TRUE(std::any_of(c.cannot_judge.begin(), c.cannot_judge.end(), [](const std::string& s) {
    return s.find("the PyTorch twin ddp.torch runs other settings now (max-steps") != std::string::npos;
  })) << ::testing::PrintToString(c.cannot_judge);
}

// A row the sweep planned that neither file holds a run of was dropped without a word.
TEST(Compare, APlannedRowAbsentFromBothFilesIsNamed) {
  ResultDocument base = testing::sample_sweep_document();
  std::erase_if(base.runs, [](const RunResult& r) { return r.name == "single" && r.mode == "faithful"; });
  const Comparison c = compare_results(base, base, {});
  EXPECT_TRUE(std::any_of(c.not_compared.begin(), c.not_compared.end(), [](const std::string& s) {
    return s == "single (faithful): planned (2 repetitions) and absent from both files (a sweep cut short, or an "
                "edited file): nothing of it is compared";
  })) << ::testing::PrintToString(c.not_compared);
}

// --normalize-by twin: each repetition over its PyTorch twin's, run back to back with it. A
// machine 30 % slower in the current sweep slows both alike and is no regression; ddpbench 15 %
// slower than its twin on the same machine is one, whatever the machine did.
TEST(Compare, NormalisingByTheTwinCancelsTheMachinesDrift) {
  const ResultDocument base = testing::twin_document({100, 102, 98, 101, 99}, {100, 100, 100, 100, 100});
  const ResultDocument drifted = testing::twin_document({70, 71.4, 68.6, 70.7, 69.3}, {70, 70, 70, 70, 70});
  const ResultDocument slowed = testing::twin_document({85, 86.7, 83.3, 85.9, 84.2}, {100, 100, 100, 100, 100});
  CompareOptions options;
  EXPECT_TRUE(compare_results(base, drifted, options).regression()) << "raw times see the machine";
  options.normalize_by = "twin";
  const Comparison held = compare_results(base, drifted, options);
  EXPECT_FALSE(held.regression()) << markdown_comparison(held, options);
  ASSERT_EQ(held.metrics.size(), 2u) << "the twin rows are not timed";
  for (const auto& m : held.metrics) {
    EXPECT_EQ(m.row, "ddp");
    EXPECT_NEAR(m.ratio, 1.0, 1e-9) << m.metric;
  }
  const Comparison caught = compare_results(base, slowed, options);
  EXPECT_TRUE(caught.regression());
  EXPECT_NEAR(metric(caught, "steady_images_per_s").ratio, 0.85, 0.005);
  EXPECT_NE(markdown_comparison(caught, options).find("| ddp (faithful) | train_time_s / twin | 1.000 | 1.176 |"),
            std::string::npos)
      << markdown_comparison(caught, options);
}

// Pairs are the same repetition: twins that swing from 60 to 140 images/s, tracked exactly by
// ddpbench in each repetition, are ratios of exactly 1 (a median of the twin would scatter them).
TEST(Compare, TheTwinDividesItsOwnRepetition) {
  const ResultDocument base = testing::twin_document({60, 140, 80, 120, 100}, {60, 140, 80, 120, 100});
  const ResultDocument cur = testing::twin_document({130, 70, 110, 90, 65}, {130, 70, 110, 90, 65});
  CompareOptions options;
  options.normalize_by = "twin";
  const Comparison c = compare_results(base, cur, options);
  for (const auto& m : c.metrics) {
    for (const double v : m.baseline) EXPECT_NEAR(v, 1.0, 1e-12) << m.metric;
    for (const double v : m.current) EXPECT_NEAR(v, 1.0, 1e-12) << m.metric;
    EXPECT_EQ(m.verdict, Verdict::unchanged);
  }
  // A repetition whose twin failed now has no ratio; the others still gate.
  ResultDocument one_lost = cur;
  for (auto& r : one_lost.runs) {
    if (r.name == "ddp.torch" && r.repetition == 1) r.status = RunStatus::failed;
  }
  const Comparison fewer = compare_results(base, one_lost, options);
  EXPECT_EQ(metric(fewer, "train_time_s").current.size(), 4u);
  EXPECT_EQ(metric(fewer, "train_time_s").baseline.size(), 5u);
}

// Every row the gate runs is timed. A row whose own twin did not run (dp-2 on CPUs: PyTorch's
// DataParallel needs CUDA) is divided by the twin that ran nearest it in the same repetition,
// on both sides, and the output says so: the machine's drift still cancels, a slowdown of the
// row alone does not. A baseline without any twin is bad input.
TEST(AdversarialGate, ARowWhoseTwinCannotRunIsTimedAgainstTheNearestTwin) {
  // ddp, ddp.torch, dp, dp.torch (skipped: it cannot run here), repetition by repetition.
  auto sweep_with_dp = [](const std::vector<double>& ddp_images, const std::vector<double>& twin_images,
                          const std::vector<double>& dp_images) {
    const ResultDocument pairs = testing::twin_document(ddp_images, twin_images);
    ResultDocument doc = pairs;
    doc.runs.clear();
    doc.sweep->rows.push_back({"dp", "faithful", kNotMeasured, 2, ""});
    doc.sweep->rows.push_back({"dp.torch", "faithful", kNotMeasured, 2, "dp"});
    for (std::size_t i = 0; i < dp_images.size(); ++i) {
      doc.runs.push_back(pairs.runs[2 * i]);
      doc.runs.push_back(pairs.runs[2 * i + 1]);
      RunResult dp = pairs.runs[2 * i];
      dp.name = "dp";
      dp.steady_images_per_s = dp.images_per_s = dp_images[i];
      dp.train_time_s = 1000 / dp_images[i];
      doc.runs.push_back(dp);
      RunResult dp_twin = dp;
      dp_twin.name = "dp.torch";
      dp_twin.status = RunStatus::skipped;
      dp_twin.reason = "torch.nn.DataParallel scatters over CUDA devices only";
      doc.runs.push_back(dp_twin);
    }
    return doc;
  };
  const auto base = sweep_with_dp({100, 101, 99, 100, 100}, {100, 100, 100, 100, 100}, {50, 51, 49, 50, 50});
  const auto drifted = sweep_with_dp({70, 70.7, 69.3, 70, 70}, {70, 70, 70, 70, 70}, {35, 35.7, 34.3, 35, 35});
  const auto dp_slowed = sweep_with_dp({100, 101, 99, 100, 100}, {100, 100, 100, 100, 100}, {17, 17, 16.5, 16.7, 17});
  CompareOptions options;
  options.normalize_by = "twin";
  options.alpha = 0.10;
  options.threshold = 0.05;
  const Comparison held = compare_results(base, drifted, options);
  EXPECT_FALSE(held.regression()) << markdown_comparison(held, options);
  const Comparison caught = compare_results(base, dp_slowed, options);
  EXPECT_TRUE(caught.regression()) << markdown_comparison(caught, options);
  bool dp_timed = false;
  for (const auto& m : caught.metrics) {
    if (m.row != "dp") continue;
    dp_timed = true;
    EXPECT_EQ(m.verdict, Verdict::regression) << m.metric;
  }
  EXPECT_TRUE(dp_timed) << "dp was not timed";
  const std::string md = markdown_comparison(caught, options);
  EXPECT_NE(md.find("- dp (faithful): normalised by ddp.torch, the PyTorch twin that ran nearest it in each "
                    "repetition (its own, dp.torch, did not run in the baseline)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("dp (faithful): no PyTorch twin"), std::string::npos) << md;
  const auto plain = document_with(repetitions("single", {10.0, 10.1}));
  try {
    compare_results(plain, plain, options);
    FAIL() << "normalised by twins that are not there";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--normalize-by twin: the baseline has no PyTorch twin rows"), std::string::npos);
  }
}

// A file the gate cannot judge is bad input naming the row: a repetition listed twice (a
// faster copy would inflate n and outvote the slow one), a row's repetitions run in two
// configurations (only the first was checked), a time or rate of zero or less (read as an
// improvement).
TEST(AdversarialGate, DuplicatedMixedOrZeroRowsAreBadInput) {
  const auto base = document_with(repetitions("ddp", {10.0, 10.1, 9.9}));
  auto slower = document_with(repetitions("ddp", {12.5, 12.6, 12.4}));
  ASSERT_TRUE(compare_results(base, slower, {}).regression());
  auto expect_refused = [&](const ResultDocument& cur, const std::string& words) {
    try {
      compare_results(base, cur, {});
      ADD_FAILURE() << "not refused: " << words;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  auto copies = slower;
  for (auto r : repetitions("ddp", {10.0, 10.0, 10.0})) {
    r.config["batch-size"] = 64;
    copies.runs.push_back(r);
  }
  expect_refused(copies, "the current file: row 'ddp (faithful)' holds repetition 0 more than once");
  auto renumbered = copies;
  for (std::size_t i = 3; i < renumbered.runs.size(); ++i) {
    renumbered.runs[i].repetition = static_cast<int64_t>(i);
    testing::record_steps(renumbered.runs[i]);
  }
  expect_refused(renumbered, "the current file: the repetitions of row 'ddp (faithful)' were run with different "
                             "configurations (batch-size 256 vs 64)");
  for (const double zero : {0.0, -1.0}) {
    auto zeroed = base;
    zeroed.runs[1].train_time_s = zero;
    expect_refused(zeroed, "row 'ddp (faithful)' repetition 1 has train_time_s");
  }
  auto no_rate = base;
  no_rate.runs[2].steady_images_per_s = 0;
  expect_refused(no_rate, "repetition 2 has steady_images_per_s 0.000000: not a time or a rate");
  // The baseline is held to the same.
  try {
    compare_results(copies, base, {});
    ADD_FAILURE() << "a duplicated baseline was not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the baseline: row 'ddp (faithful)'"), std::string::npos) << e.what();
  }
}

// sweep --resume keeps a row only where it would run the same: a row run under an injected
// slowdown (which compare matches to the row, as a slower build of it) is not the row.
TEST(AdversarialGate, ARowRunSlowedIsNotResumedAsTheRow) {
  const nlohmann::json plain = {{"strategy", "ddp"}, {"batch-size", 32}, {"out", "a.json"}};
  nlohmann::json slowed = plain;
  slowed["inject-slowdown"] = 0.5;
  slowed["out"] = "b.json";
  EXPECT_EQ(comparable_config(plain), comparable_config(slowed)) << "compare matches them";
  EXPECT_FALSE(runs_the_same(plain, slowed));
  EXPECT_FALSE(runs_the_same(slowed, plain));
  nlohmann::json one_rank = slowed;
  one_rank["inject-slowdown-rank"] = 1;
  EXPECT_FALSE(runs_the_same(slowed, one_rank));
  nlohmann::json elsewhere = plain;
  elsewhere["out"] = "c.json";
  EXPECT_TRUE(runs_the_same(plain, elsewhere));
  EXPECT_TRUE(runs_the_same(slowed, slowed));
  // --resume reads settings as compare does: an option a row's file sets at its own writer's
  // default, which this binary's plan does not have, is the same setting; at another value, not.
  nlohmann::json newer = plain;
  newer["a-newer-option"] = 0;
  const nlohmann::json newer_defaults = {{"a-newer-option", 0}};
  EXPECT_TRUE(runs_the_same(newer, plain, newer_defaults, nlohmann::json::object()));
  newer["a-newer-option"] = 1;
  EXPECT_FALSE(runs_the_same(newer, plain, newer_defaults, nlohmann::json::object()));
}

// Which rows are twins is the baseline's to say: a current file that names a row under test a
// twin (one sweep.rows entry) would exempt it from timing; nor may a twin be anything but a
// PyTorch row.
TEST(AdversarialGate, ACurrentFileCannotNameARowUnderTestATwin) {
  const ResultDocument base = testing::twin_document({100, 101, 99, 100, 100}, {100, 100, 100, 100, 100});
  ResultDocument slower = testing::twin_document({85, 86, 84, 85, 85}, {100, 100, 100, 100, 100});
  CompareOptions options;
  options.normalize_by = "twin";
  ASSERT_TRUE(compare_results(base, slower, options).regression());
  ResultDocument disguised = slower;
  disguised.sweep->rows.push_back({"ddp", "faithful", kNotMeasured, 2, "ddp.nothing"});
  try {
    compare_results(base, disguised, options);
    FAIL() << "a row under test named a twin was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the current file names ddp (faithful) a PyTorch twin (of ddp.nothing)"),
              std::string::npos)
        << e.what();
  }
  ResultDocument not_pytorch = base;
  for (auto& r : not_pytorch.runs) r.strategy = "ddp";
  try {
    compare_results(not_pytorch, not_pytorch, options);
    FAIL() << "a twin that ran --strategy ddp was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ddp.torch (faithful) is named a PyTorch twin but ran --strategy ddp"),
              std::string::npos)
        << e.what();
  }
}

// A twin whose repetitions were interrupted is named as its row is; and a single value left
// on one side is a change only beyond the other side's whole spread (one repetition inside the
// baseline's own range is no regression).
TEST(AdversarialGate, ATwinsLostRepetitionsAreNamedAndOneValueMustClearTheSpread) {
  const ResultDocument base = testing::twin_document({100, 80, 120, 90, 110}, {100, 100, 100, 100, 100});
  ResultDocument cur = base;
  for (auto& r : cur.runs) {
    if (r.name == "ddp.torch" && r.repetition < 4) {
      r.status = RunStatus::interrupted;
      r.reason = "interrupted by Terminated after 2 steps";
    }
  }
  // The one repetition left is 15 % slower than the baseline's median, beyond the threshold.
  for (auto& r : cur.runs) {
    if (r.name == "ddp" && r.repetition == 4) {
      r.steady_images_per_s = r.images_per_s = 85;
      r.train_time_s = 1000.0 / 85;
    }
  }
  CompareOptions options;
  options.normalize_by = "twin";
  options.threshold = 0.05;
  const Comparison c = compare_results(base, cur, options);
  ASSERT_EQ(c.partial_rows.size(), 1u) << markdown_comparison(c, options);
  EXPECT_EQ(c.partial_rows[0].rfind("ddp.torch (faithful): 4 of 5 repetitions did not run in the current file", 0), 0u);
  EXPECT_EQ(metric(c, "train_time_s").current.size(), 1u);
  EXPECT_FALSE(c.regression()) << "repetition 4 (85 images/s) lies inside the baseline's 80-120: "
                               << markdown_comparison(c, options);
}

// The median far beyond every baseline repetition is a change, though 3 slow repetitions of 5
// cannot carry a U test; and a time no run takes is bad input, not a 1e300-fold slowdown.
TEST(AdversarialGate, AFarSlowerMedianIsARegressionAndAbsurdTimesAreBadInput) {
  const auto base = document_with(repetitions("ddp", {10.0, 10.2, 9.9, 10.1, 10.0}));
  const auto three_slow = document_with(repetitions("ddp", {30.0, 30.5, 29.8, 10.1, 10.0}));
  CompareOptions options;
  options.metrics = {"train_time_s"};
  options.threshold = 0.05;
  options.alpha = 0.10;
  const Comparison c = compare_results(base, three_slow, options);
  EXPECT_TRUE(c.regression()) << markdown_comparison(c, options);
  EXPECT_NE(metric(c, "train_time_s").detail.find("the median beyond every baseline repetition"), std::string::npos);
  // Noise of the same kind both ways is no change: one slow repetition of five.
  EXPECT_FALSE(compare_results(base, document_with(repetitions("ddp", {30.0, 10.2, 9.9, 10.1, 10.0})), options)
                   .regression());
  // Thirty years: beyond any bound a run could reach, far inside what a double holds.
  auto huge = three_slow;
  huge.runs[0].train_time_s = 1e9;
  try {
    compare_results(base, huge, options);
    FAIL() << "a train time of 1e9 s was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("repetition 0 has train_time_s"), std::string::npos) << e.what();
  }
}

// Repetitions skipped or interrupted inside a row that otherwise ran are named, with how many
// the comparison was left with.
TEST(AdversarialGate, APartlyRunRowIsNamed) {
  const auto base = document_with(repetitions("single", {10.0, 10.1, 9.9, 10.0}));
  auto cur = base;
  cur.runs[1].status = RunStatus::interrupted;
  cur.runs[1].reason = "interrupted by Terminated after 3 steps";
  cur.runs[3].status = RunStatus::interrupted;
  const Comparison c = compare_results(base, cur, {});
  ASSERT_EQ(c.partial_rows.size(), 1u);
  EXPECT_EQ(c.partial_rows[0], "single (faithful): 2 of 4 repetitions did not run in the current file (interrupted: "
                               "interrupted by Terminated after 3 steps); compared over the others");
  EXPECT_EQ(metric(c, "train_time_s").current.size(), 2u);
  EXPECT_NE(markdown_comparison(c, {}).find("- compared over part of its repetitions: single (faithful): 2 of 4"),
            std::string::npos);
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

// The same row placed otherwise (2 nodes x 1 rank against 1 node x 2 ranks) is another
// measurement, said with the option that differs, a file from before --nodes read as one node;
// when no row is left in common, the error says why.
TEST(Compare, RowsPlacedOnOtherNodesAreConfiguredDifferently) {
  auto one_node = repetitions("ddp", {10.0, 10.2});
  auto two_nodes = repetitions("ddp", {14.0, 14.1});
  // one_node: a file from before --nodes, no "nodes"
  for (auto& r : two_nodes) r.config["nodes"] = 2;
  try {
    compare_results(document_with(one_node), document_with(two_nodes), {});
    FAIL() << "compared 1 node against 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no row in common (by name, mode and configuration): ddp (faithful): configured "
                                         "differently now, so not the same measurement (nodes 1 vs 2)"),
              std::string::npos)
        << e.what();
  }
  // One node recorded, or not recorded at all: the same configuration.
  auto recorded = one_node;
  for (auto& r : recorded) r.config["nodes"] = 1;
  const Comparison same = compare_results(document_with(one_node), document_with(recorded), {});
  EXPECT_TRUE(same.missing_rows.empty());
  EXPECT_FALSE(same.metrics.empty());
}

// A row replayed as a CUDA graph is another measurement than the eager one; a file from
// before --cuda-graphs ran eagerly.
TEST(Compare, AGraphedRowIsNotTheEagerOne) {
  auto eager = repetitions("single", {10.0, 10.2});  // from before --cuda-graphs
  auto graphed = repetitions("single", {6.0, 6.1});
  for (auto& r : graphed) r.config["cuda-graphs"] = true;
  try {
    compare_results(document_with(eager), document_with(graphed), {});
    FAIL() << "compared a graphed row against an eager one";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(cuda-graphs false vs true)"), std::string::npos) << e.what();
  }
  auto recorded = eager;
  for (auto& r : recorded) r.config["cuda-graphs"] = false;
  EXPECT_FALSE(compare_results(document_with(eager), document_with(recorded), {}).metrics.empty());
}

// --min-vs-pytorch: a row whose every pair is under the floor is a regression.
TEST(Compare, ARowBelowItsPyTorchTwinFailsTheFloor) {
  const ResultDocument slower = testing::twin_document({95, 96, 94}, {100, 100, 100});
  CompareOptions options;
  options.min_vs_pytorch = 1.0;
  const Comparison below = compare_results(slower, slower, options);
  EXPECT_TRUE(below.regression());
  ASSERT_EQ(below.pytorch.size(), 2u);  // epoch speed and steady images/s
  for (const auto& t : below.pytorch) {
    EXPECT_EQ(t.verdict, Verdict::regression) << t.metric;
    EXPECT_EQ(t.detail, "every pair below the floor");
    EXPECT_NEAR(t.median_ratio, 0.95, 1e-12);
  }
  EXPECT_NE(markdown_comparison(below, options).find("| ddp (faithful) | steady images/s | 0.95x | 0.94x–0.96x | 3 | "
                                                     "REGRESSION (every pair below the floor"),
            std::string::npos)
      << markdown_comparison(below, options);
  options.min_vs_pytorch = 0.9;
  EXPECT_FALSE(compare_results(slower, slower, options).regression());
  options.min_vs_pytorch = 1.0;
  options.metrics = {"steady_images_per_s"};
  const Comparison steady_only = compare_results(slower, slower, options);
  ASSERT_EQ(steady_only.pytorch.size(), 1u) << "the floor checks the metrics that gate";
  EXPECT_EQ(steady_only.pytorch[0].metric, "steady_images_per_s");
  options.metrics = {"test_accuracy"};
  EXPECT_EQ(compare_results(slower, slower, options).pytorch.size(), 2u) << "neither speed asked: both";
  options.min_vs_pytorch.reset();
  EXPECT_FALSE(compare_results(slower, slower, options).regression()) << "no floor unless asked";
}

// At parity the pairs fall on both sides of 1.0: a median below the floor is not a verdict.
// With enough pairs for the U test, the test decides.
TEST(Compare, ThePyTorchFloorFailsOnlyBeyondTheNoise) {
  CompareOptions options;
  options.min_vs_pytorch = 1.0;
  const ResultDocument parity = testing::twin_document({97, 104, 98}, {100, 100, 100});
  const Comparison c = compare_results(parity, parity, options);
  EXPECT_FALSE(c.regression());
  EXPECT_EQ(c.pytorch[1].verdict, Verdict::within_noise);
  EXPECT_EQ(c.pytorch[1].detail, "pairs on both sides of the floor");
  // Six pairs each about 5 % below: the U test (p = 0.002) finds them below the floor.
  const ResultDocument six_below = testing::twin_document({95, 94, 96, 95.5, 94.5, 95}, {100, 101, 99, 100, 100.5, 99.5});
  const Comparison u = compare_results(six_below, six_below, options);
  EXPECT_TRUE(u.regression());
  EXPECT_EQ(u.pytorch[1].detail, "below the floor, U test p < alpha");
  EXPECT_LT(u.pytorch[1].p_value, 0.01);
  // Six pairs below in the median but overlapping: within the noise.
  const ResultDocument six_mixed = testing::twin_document({95, 104, 96, 101, 94, 99}, {100, 100, 100, 100, 100, 100});
  const Comparison mixed = compare_results(six_mixed, six_mixed, options);
  EXPECT_FALSE(mixed.regression());
  EXPECT_EQ(mixed.pytorch[1].verdict, Verdict::within_noise);
  EXPECT_GE(mixed.pytorch[1].p_value, 0.05);
}

// PyTorch's twins are the reference, not the code under test: a twin that got slower is no
// regression of ddpbench's (its speed gates only through --min-vs-pytorch), while ddpbench's
// own rows still gate.
TEST(Compare, TwinRowsAreCheckedToRunButNotTimedAgainstTheBaseline) {
  const Comparison c =
      compare_results(testing::twin_document({100, 101}, {100, 101}), testing::twin_document({100, 101}, {50, 51}), {});
  EXPECT_FALSE(c.regression());
  for (const auto& m : c.metrics) EXPECT_EQ(m.row, "ddp") << "a twin was timed";
  EXPECT_NE(std::find(c.not_compared.begin(), c.not_compared.end(),
                      "ddp.torch (faithful): PyTorch's twin: checked to have run; its speed is judged against its row's "
                      "(--min-vs-pytorch)"),
            c.not_compared.end());
  EXPECT_TRUE(compare_results(testing::twin_document({100, 101}, {100, 101}), testing::twin_document({50, 51}, {100, 101}), {})
                  .regression());
}

// On CPUs the twin of a SyncBatchNorm row runs without it, beside ddpbench's row without it
// (ddp.no-sync-bn): the floor against PyTorch is checked on that pair, not on the table's row,
// and --normalize-by twin divides the run without SyncBatchNorm by the twin that ran beside it.
ResultDocument compared_without_sync_bn(const std::vector<double>& with, const std::vector<double>& without,
                                        const std::vector<double>& theirs) {
  ResultDocument doc = testing::twin_document(with, theirs);
  doc.sweep->rows = {{"ddp", "faithful", kNotMeasured, 2, ""},
                     {"ddp.no-sync-bn", "faithful", kNotMeasured, 2, ""},
                     {"ddp.torch", "faithful", kNotMeasured, 2, "ddp", "ddp.no-sync-bn", "SyncBatchNorm"}};
  for (std::size_t i = 0; i < without.size(); ++i) {
    RunResult r;
    r.name = "ddp.no-sync-bn";
    r.mode = "faithful";
    r.strategy = "ddp";
    r.repetition = static_cast<int64_t>(i);
    r.steady_images_per_s = without[i];
    r.images_per_s = without[i];
    r.train_time_s = 1000 / without[i];
    doc.runs.push_back(testing::with_ten_steps(r));
  }
  return doc;
}

TEST(Compare, ATwinWithoutSyncBnIsJudgedAgainstTheRowsRunWithoutIt) {
  CompareOptions options;
  options.min_vs_pytorch = 0.9;
  // The table's row (with SyncBatchNorm) is half PyTorch's speed; without it, on a par.
  const auto on_a_par = compared_without_sync_bn({50, 51, 52}, {100, 101, 99}, {100, 100, 100});
  const Comparison fair = compare_results(on_a_par, on_a_par, options);
  ASSERT_EQ(fair.pytorch.size(), 2u);
  for (const auto& t : fair.pytorch) {
    EXPECT_EQ(t.row, "ddp.no-sync-bn") << "the pair that ran alike";
    EXPECT_EQ(t.verdict, Verdict::unchanged) << t.metric << ": " << t.detail;
    EXPECT_NEAR(t.median_ratio, 1.0, 0.011);
  }
  const auto slow = compared_without_sync_bn({100, 101, 99}, {50, 51, 52}, {100, 100, 100});
  const Comparison caught = compare_results(slow, slow, options);
  EXPECT_TRUE(std::any_of(caught.pytorch.begin(), caught.pytorch.end(),
                          [](const TwinComparison& t) { return t.verdict == Verdict::regression; }))
      << "ddpbench without SyncBatchNorm at half PyTorch's speed passed";

  CompareOptions by_twin;
  by_twin.normalize_by = "twin";
  const Comparison normalised = compare_results(on_a_par, on_a_par, by_twin);
  for (const auto& note : normalised.notes) {
    EXPECT_EQ(note.find("ddp.no-sync-bn"), std::string::npos) << "normalised by its own twin, not another: " << note;
  }
  // The run without SyncBatchNorm slowed by 30 % against the twin beside it is a regression.
  const auto slowed = compared_without_sync_bn({50, 51, 52}, {70, 71, 69}, {100, 100, 100});
  EXPECT_TRUE(compare_results(on_a_par, slowed, by_twin).regression());
}

// A twin that did not run is reported by name and reason, never passed over in silence; a
// floor with no twin at all to check against is bad input.
TEST(Compare, AMissingTwinIsReportedAndNoTwinsAtAllIsBadInput) {
  ResultDocument doc = testing::twin_document({100, 100}, {100, 100});
  for (auto& r : doc.runs) {
    if (r.name == "ddp.torch") {
      r.status = RunStatus::skipped;
      r.reason = "PyTorch's SyncBatchNorm is CUDA-only";
    }
  }
  CompareOptions options;
  options.min_vs_pytorch = 0.9;
  const Comparison c = compare_results(doc, doc, options);
  EXPECT_FALSE(c.regression()) << "skipped in the baseline too: reported, not failed";
  ASSERT_EQ(c.without_twin.size(), 1u);
  EXPECT_EQ(c.without_twin[0], "ddp (faithful): its PyTorch twin ddp.torch is skipped (PyTorch's SyncBatchNorm is CUDA-only)");
  EXPECT_NE(markdown_comparison(c, options).find("- not checked against PyTorch: ddp (faithful)"), std::string::npos);
  // The twin ran in the baseline and not now: a regression, naming it.
  const Comparison lost = compare_results(testing::twin_document({100, 100}, {100, 100}), doc, options);
  EXPECT_TRUE(lost.regression());
  ASSERT_EQ(lost.missing_rows.size(), 1u);
  EXPECT_EQ(lost.missing_rows[0], "ddp.torch (faithful): skipped now: PyTorch's SyncBatchNorm is CUDA-only");
  // No twin rows at all.
  const auto plain = document_with(repetitions("single", {10.0, 10.1}));
  try {
    compare_results(plain, plain, options);
    FAIL() << "a floor against PyTorch with no twin passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--min-vs-pytorch: the current file has no PyTorch twin rows"), std::string::npos);
  }
}

// Fail closed: a row that ran in the baseline and is absent, skipped, interrupted or
// reconfigured now is a regression that names it, unless --allow-missing names it.
TEST(Compare, ARowThatRanInTheBaselineAndNotNowIsARegression) {
  auto base = document_with(repetitions("single", {10.0}));
  base.runs.push_back(repetitions("ddp-2gpu", {6.0})[0]);
  base.runs.push_back(repetitions("dp-2gpu", {8.0})[0]);
  auto cur = document_with(repetitions("single", {10.0}));
  const Comparison absent = compare_results(base, cur, {});
  EXPECT_TRUE(absent.regression());
  EXPECT_EQ(absent.missing_rows, (std::vector<std::string>{"ddp-2gpu (faithful): ran in the baseline, absent now",
                                                            "dp-2gpu (faithful): ran in the baseline, absent now"}));
  EXPECT_NE(markdown_comparison(absent, {}).find("REGRESSION (missing now; --allow-missing ROW allows it): ddp-2gpu"),
            std::string::npos);
  EXPECT_NE(markdown_comparison(absent, {}).find("\nRegression (threshold"), std::string::npos);

  CompareOptions allow;
  allow.allow_missing = {"ddp-2gpu", "dp-2gpu"};
  const Comparison allowed = compare_results(base, cur, allow);
  EXPECT_FALSE(allowed.regression());
  EXPECT_EQ(allowed.allowed_missing.size(), 2u);
  allow.allow_missing = {"ddp-2gpu"};
  EXPECT_TRUE(compare_results(base, cur, allow).regression()) << "dp-2gpu is still missing";
  allow.allow_missing = {"ddp-2gpux"};
  EXPECT_THROW(compare_results(base, cur, allow), InputError) << "a typo in --allow-missing is bad input";

  for (const RunStatus status : {RunStatus::skipped, RunStatus::interrupted}) {
    auto now = base;
    now.runs[1].status = status;
    now.runs[1].reason = "needs 2 GPUs, 0 visible";
    const Comparison c = compare_results(base, now, {});
    EXPECT_TRUE(c.regression()) << status_name(status);
    ASSERT_EQ(c.missing_rows.size(), 1u);
    EXPECT_EQ(c.missing_rows[0], "ddp-2gpu (faithful): " + std::string(status_name(status)) + " now: needs 2 GPUs, 0 visible");
  }
  auto reconfigured = base;
  reconfigured.runs[1].config["bucket-mb"] = 50;
  const Comparison r = compare_results(base, reconfigured, {});
  ASSERT_EQ(r.missing_rows.size(), 1u);
  EXPECT_NE(r.missing_rows[0].find("configured differently now"), std::string::npos) << r.missing_rows[0];
  // A row that never ran in the baseline is news, not a regression.
  auto skipped_before = base;
  skipped_before.runs[1].status = RunStatus::skipped;
  EXPECT_FALSE(compare_results(skipped_before, skipped_before, {}).regression());
}

// A metric that was measured in the baseline and is NaN or infinite now is missing, not
// "not compared"; non-finite values never reach a ratio or a verdict.
// A figure that is not a number, in a row that says ok, fails that repetition: never a
// repetition quietly left out, never a pass.
TEST(Compare, NonFiniteValuesNeverReachAVerdict) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto base = document_with(repetitions("single", {10.0, 10.1, 9.9}));
  CompareOptions options;
  options.metrics = {"train_time_s"};
  for (const double bad : {nan, inf}) {
    auto cur = base;
    cur.runs[1].train_time_s = bad;
    const Comparison c = compare_results(base, cur, options);
    EXPECT_TRUE(c.regression());
    ASSERT_EQ(c.failed_rows.size(), 1u);
    EXPECT_NE(c.failed_rows[0].find("1 of 3 repetitions failed (none in the baseline): says ok, but it measured no "
                                    "train_time_s"),
              std::string::npos)
        << c.failed_rows[0];
  }
}

// --normalize-by a row that is absent, or did not run, on either side is bad input naming the
// row and the side: the gate has nothing to divide by. (It once looped forever.)
TEST(Compare, AMissingOrFailedNormalisingRowIsBadInput) {
  auto with_ddp = [](std::vector<RunResult> runs) {
    auto doc = document_with(std::move(runs));
    doc.runs.push_back(repetitions("ddp-2gpu", {6.0, 6.1})[0]);
    doc.runs.push_back(repetitions("ddp-2gpu", {6.0, 6.1})[1]);
    return doc;
  };
  const auto base = with_ddp(repetitions("single", {10.0, 10.2}));
  CompareOptions options;
  options.normalize_by = "single";
  const auto expect_bad = [&](const ResultDocument& b, const ResultDocument& c, const std::string& message) {
    try {
      compare_results(b, c, options);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_bad(base, with_ddp({}), "--normalize-by single: the current file has no row single (faithful)");
  expect_bad(with_ddp({}), base, "--normalize-by single: the baseline has no row single (faithful)");
  auto failed = base;
  failed.runs[0].status = failed.runs[1].status = RunStatus::failed;
  failed.runs[0].reason = failed.runs[1].reason = "out of memory";
  expect_bad(base, failed, "--normalize-by single: single (faithful) did not run in the current file (failed: out of memory)");
  expect_bad(failed, base, "did not run in the baseline");
  auto unmeasured = base;
  unmeasured.runs[0].steady_images_per_s = unmeasured.runs[1].steady_images_per_s = kNotMeasured;
  expect_bad(base, unmeasured, "single (faithful) did not run in the current file (failed: says ok, but it measured no "
                               "steady_images_per_s");
  EXPECT_FALSE(compare_results(base, base, options).regression());
}

// Every part of the fingerprint that differs is named; a match on the first GPU alone is not a match.
TEST(Compare, EveryDifferenceOfTheEnvironmentIsNamed) {
  auto base = document_with(repetitions("single", {10.0}));
  base.environment = testing::sample_sweep_document().environment;
  auto cur = base;
  cur.environment.gpus.push_back({"NVIDIA A100-SXM4-40GB", 40LL << 30, "8.0"});
  cur.environment.cpu_model = "Intel Xeon";
  cur.environment.cpu_cores = 32;
  cur.environment.cuda_runtime_version = "12.8";
  cur.environment.cudnn_version = "9.8.0";
  cur.environment.nccl_version = "2.26.2";
  cur.environment.driver_version = "560.35.03";
  cur.environment.libtorch_version = "2.10.0";
  cur.environment.host = "another-host";  // not part of the fingerprint
  cur.environment.git_revision = "fedcba";
  const Comparison another_machine = compare_results(base, cur, {});
  EXPECT_EQ(another_machine.exit_code(), 2) << "another machine was compared";
  std::string what;
  for (const auto& line : another_machine.cannot_judge) what += line + "\n";
  for (const char* part : {"GPU count: 1 vs 2", "CPU model: AMD EPYC vs Intel Xeon", "CPU cores: 64 vs 32",
                           "LibTorch: 2.11.0 vs 2.10.0", "CUDA: 13.0 vs 12.8", "cuDNN: 9.19.0 vs 9.8.0",
                           "NCCL: 2.28.9 vs 2.26.2", "driver: 570.86.10 vs 560.35.03"}) {
    EXPECT_NE(what.find(part), std::string::npos) << part << " in " << what;
  }
  EXPECT_EQ(what.find("host"), std::string::npos) << what;
  CompareOptions allow;
  allow.allow_env_mismatch = {"all"};
  EXPECT_EQ(compare_results(base, cur, allow).environment_differences.size(), 8u);
  auto renamed = base;
  renamed.environment.gpus = {{"NVIDIA A100-SXM4-80GB", 80LL << 30, "8.0"}};
  EXPECT_EQ(compare_results(base, renamed, {}).exit_code(), 2);
}

// A virtual machine names every CPU "Intel(R) Xeon(R) Processor": two hosts, one of them with
// AVX-512 and twice the cores, had one fingerprint. What the CPU says of itself is compared, and
// what only one file says is a difference; a kernel's other flags (a mitigation, "hypervisor") are not its speed.
TEST(Compare, ACpuIsKnownByMoreThanItsBrandString) {
  auto base = document_with(repetitions("single", {10.0}));
  base.environment = testing::sample_sweep_document().environment;
  base.environment.cpu_model = "Intel(R) Xeon(R) Processor";
  base.environment.cpu.vendor = "GenuineIntel";
  base.environment.cpu.family = 6;
  base.environment.cpu.model = 106;
  base.environment.cpu.logical_processors = 8;
  base.environment.cpu.physical_cores = 4;
  base.environment.cpu.flags = {"fpu", "sse4_2", "avx2", "fma", "hypervisor"};
  const auto differences = [&](const std::function<void(CpuFacts&)>& edit) {
    auto cur = base;
    edit(cur.environment.cpu);
    std::string said;
    for (const auto& d : environment_differences(base.environment, cur.environment)) {
      said += d.aspect + ": " + d.text + "\n";
    }
    return said;
  };
  EXPECT_EQ(differences([](CpuFacts& c) { c.model = 143; }), "cpu: CPU model number: 106 vs 143\n");
  EXPECT_EQ(differences([](CpuFacts& c) { c.vendor = "AuthenticAMD"; }), "cpu: CPU vendor: GenuineIntel vs AuthenticAMD\n");
  EXPECT_EQ(differences([](CpuFacts& c) { c.physical_cores = 8; }), "cpu: physical cores: 4 vs 8\n");
  EXPECT_EQ(differences([](CpuFacts& c) { c.flags.push_back("avx512f"); }),
            "cpu: CPU instruction sets: only the baseline's has [], only the current's [avx512f]\n");
  EXPECT_EQ(differences([](CpuFacts& c) { c.flags = {"fpu", "sse4_2", "avx2", "fma", "md_clear"}; }), "");
  EXPECT_EQ(differences([](CpuFacts& c) { c = CpuFacts{}; }),
            "cpu: CPU identity (vendor, family, model, instruction sets, cores): recorded only in the baseline's file\n")
      << "a file whose CPU identity was deleted passed for one from before it was recorded";
  EXPECT_EQ(differences([](CpuFacts& c) { c.vendor.clear(); }), "cpu: CPU vendor: GenuineIntel vs not recorded\n");
  EXPECT_EQ(differences([](CpuFacts& c) { c.family = -1; }), "cpu: CPU family: 6 vs not recorded\n");
  EXPECT_EQ(differences([](CpuFacts& c) { c.flags.clear(); }),
            "cpu: CPU instruction sets: only the baseline's has [avx2 fma sse4_2], only the current's []\n");
  auto cur = base;
  cur.environment.cpu.model = 143;
  EXPECT_EQ(compare_results(base, cur, {}).exit_code(), 2);
  CompareOptions allow;
  allow.allow_env_mismatch = {"cpu"};
  EXPECT_EQ(compare_results(base, cur, allow).exit_code(), 0);
}

}  // namespace
}  // namespace ddpbench
