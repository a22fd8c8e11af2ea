#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "reports/sweep_summary.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

const RowSummary& find(const std::vector<RowSummary>& rows, const std::string& name, const std::string& mode) {
  for (const auto& r : rows) {
    if (r.name == name && r.mode == mode) return r;
  }
  throw std::runtime_error("no row " + name);
}

TEST(SweepSummary, MediansSpeedupAndEfficiencyAgainstTheBaselineOfTheSameMode) {
  const auto rows = summarize_sweep(testing::sample_sweep_document());
  ASSERT_EQ(rows.size(), 5u);
  const auto& single = find(rows, "single", "faithful");
  EXPECT_EQ(single.repetitions, 2);
  EXPECT_DOUBLE_EQ(single.train_time_s, 13.2);
  EXPECT_DOUBLE_EQ(single.images_per_s, (3846.0 + 3731.0) / 2);
  EXPECT_DOUBLE_EQ(single.speedup, 1.0);
  const auto& ddp = find(rows, "ddp-2gpu", "faithful");
  EXPECT_NEAR(ddp.speedup, ((5154.0 + 5050.0) / 2) / ((3846.0 + 3731.0) / 2), 1e-12);
  EXPECT_NEAR(ddp.scaling_efficiency, ddp.speedup / 2, 1e-12);
  // Controlled rows compare steady-state throughput, against the controlled baseline.
  const auto& controlled = find(rows, "ddp-2gpu", "controlled");
  EXPECT_NEAR(controlled.speedup, 8333.0 / 4545.0, 1e-12);
  EXPECT_DOUBLE_EQ(controlled.tutorial_seconds, 9.8);
}

// A row's PyTorch twin is not a row of its own but the row's `pytorch`; the ratios are the
// medians of the back-to-back pairs' ratios, not the ratios of the medians.
// Against a baseline on 2 devices, the baseline is 100 % of itself and a 4-device row that runs
// 1.8 times as fast is 90 % (it read 50 % and 45 %: divided by its own devices alone).
TEST(SweepSummary, ScalingEfficiencyIsOverTheDevicesBeyondTheBaselines) {
  auto doc = testing::sample_sweep_document();
  for (auto& info : doc.sweep->rows) {
    if (info.name == "ddp-2gpu") doc.sweep->baseline_row = info.name;
  }
  const auto rows = summarize_sweep(doc);
  const auto& base = find(rows, "ddp-2gpu", "faithful");
  ASSERT_EQ(base.devices, 2);
  EXPECT_DOUBLE_EQ(base.scaling_efficiency, 1.0);
  const auto& single = find(rows, "single", "faithful");
  EXPECT_NEAR(single.scaling_efficiency, single.speedup * 2, 1e-12);
}

TEST(SweepSummary, PyTorchTwinsAreComparedPairByPair) {
  // Pairs (ours, theirs) in steady images/s: (100, 90), (300, 280), (200, 210). Ratio of
  // medians 200 / 210; median of pair ratios 300 / 280.
  const ResultDocument doc = testing::twin_document({100, 300, 200}, {90, 280, 210});
  const auto rows = summarize_sweep(doc);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(rows[0].pytorch.has_value());
  EXPECT_EQ(rows[0].pytorch->name, "ddp.torch");
  EXPECT_DOUBLE_EQ(rows[0].pytorch->steady_images_per_s, 210);
  EXPECT_DOUBLE_EQ(rows[0].vs_pytorch_steady, 300.0 / 280.0);
  EXPECT_DOUBLE_EQ(rows[0].vs_pytorch_train_time, (1000 / 280.0) / (1000 / 300.0));
}

TEST(SweepSummary, SkippedRowsKeepTheirReason) {
  const auto rows = summarize_sweep(testing::sample_sweep_document());
  const auto& r = find(rows, "ddp-4gpu", "faithful");
  EXPECT_EQ(r.status, RunStatus::skipped);
  EXPECT_EQ(r.reason, "needs 4 CUDA devices, 2 visible");
  EXPECT_TRUE(std::isnan(r.speedup));
}

TEST(SweepSummary, WideSpreadIsFlaggedUnstable) {
  auto doc = testing::sample_sweep_document();
  const auto steady = summarize_sweep(doc);
  EXPECT_FALSE(find(steady, "single", "faithful").unstable);  // 13.0 to 13.4: 3 %
  doc.runs[1].train_time_s = 16.0;                             // 13.0 to 16.0: 21 %
  const auto wide = summarize_sweep(doc);
  const auto& single = find(wide, "single", "faithful");
  EXPECT_TRUE(single.unstable);
  EXPECT_DOUBLE_EQ(single.train_time_min_s, 13.0);
  EXPECT_DOUBLE_EQ(single.train_time_max_s, 16.0);
}

TEST(SweepSummary, DifferencesFromTheBaselineAreListed) {
  auto doc = testing::sample_sweep_document();
  doc.runs[2].config["amp"] = "fp16";
  doc.runs[0].config["amp"] = "off";
  const auto rows = summarize_sweep(doc);
  const auto& ddp = find(rows, "ddp-2gpu", "faithful");
  const std::vector<std::string> expected = {"strategy ddp", "2 processes", "global batch 512 (baseline 256)",
                                             "98 steps per epoch (baseline 196)", "SyncBatchNorm",
                                             "precision fp16 (baseline off)"};
  EXPECT_EQ(ddp.differences, expected);
  EXPECT_TRUE(find(rows, "single", "faithful").differences.empty());
  // Every option that changes the work or the clock, where the row and the baseline differ (an
  // option one does not set at the file's default); never where the output or the data lies.
  doc.option_defaults = {{"epochs", 1}, {"max-steps", nullptr}, {"threads", 0}, {"sync-every-step", true},
                         {"max-eval-batches", nullptr}, {"log-interval-steps", 50}, {"out", ""}, {"data-dir", "data"}};
  for (const int index : {2, 3}) {
    doc.runs[static_cast<std::size_t>(index)].config.update(
        {{"epochs", 2}, {"max-steps", 4}, {"threads", 1}, {"sync-every-step", false}, {"max-eval-batches", 2},
         {"log-interval-steps", 1}, {"out", "x.json"}, {"data-dir", "elsewhere"}});
  }
  const auto more_rows = summarize_sweep(doc);
  const auto& more = find(more_rows, "ddp-2gpu", "faithful");
  for (const char* said : {"epochs 2 (baseline 1)", "max-steps 4 (baseline unset)", "threads 1 (baseline 0)",
                           "sync-every-step off (baseline on)", "max-eval-batches 2 (baseline unset)",
                           "log-interval-steps 1 (baseline 50)"}) {
    EXPECT_NE(std::find(more.differences.begin(), more.differences.end(), said), more.differences.end()) << said;
  }
  for (const auto& phrase : more.differences) {
    EXPECT_EQ(phrase.find("out "), std::string::npos) << phrase;
    EXPECT_EQ(phrase.find("data-dir"), std::string::npos) << phrase;
  }
}

// Utilisation is the achieved FLOP/s against the peak of the row's devices at the row's
// precision; TF32 only counts on CUDA, and a CPU row has no peak to be held against.
TEST(SweepSummary, UtilisationIsAgainstThePeakOfTheRowsDevicesAndPrecision) {
  ResultDocument doc = testing::sample_sweep_document();
  doc.environment.gpus = {{"NVIDIA H200", 141LL << 30, "9.0"}};
  for (auto& run : doc.runs) run.config["tf32"] = true;
  auto rows = summarize_sweep(doc);
  const auto& ddp = find(rows, "ddp-2gpu", "faithful");  // fp16 on 2 devices
  EXPECT_EQ(ddp.precision, "fp16");
  EXPECT_DOUBLE_EQ(ddp.peak_flops_per_s, 989.4e12);
  EXPECT_NEAR(ddp.flops_utilisation, ddp.achieved_flops_per_s / (2 * 989.4e12), 1e-15);
  const auto& single = find(rows, "single", "faithful");  // amp off, --tf32 on a GPU
  EXPECT_EQ(single.precision, "tf32");
  EXPECT_DOUBLE_EQ(single.peak_flops_per_s, 494.7e12);
  EXPECT_NEAR(single.achieved_flops_per_s, 1e9 * (3846.0 + 3731.0) / 2 * 1.1, 1e-3);

  // A CPU row from a file without the CPU's facts or its threads: no peak guessed, and why.
  for (auto& run : doc.runs) run.device = "cpu";
  rows = summarize_sweep(doc);
  const auto& on_cpu = find(rows, "single", "faithful");
  EXPECT_EQ(on_cpu.precision, "fp32");
  EXPECT_TRUE(std::isnan(on_cpu.peak_flops_per_s));
  EXPECT_TRUE(std::isnan(on_cpu.flops_utilisation));
  EXPECT_TRUE(std::isfinite(on_cpu.achieved_flops_per_s));
  EXPECT_FALSE(on_cpu.peak_source.empty());
}

// This machine's CPU as cpuinfo gives it: an Emerald Rapids guest, 2 cores at 2.1 GHz, AVX-512
// with two FMA units (64 fp32 FLOP a cycle) and AMX-BF16 (1024 bf16 FLOP a cycle).
CpuFacts emerald_rapids(int64_t cores) {
  std::string cpuinfo;
  for (int64_t i = 0; i < cores; ++i) {
    cpuinfo += "processor\t: " + std::to_string(i) +
               "\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) "
               "Processor\ncpu MHz\t\t: 2100.000\nphysical id\t: 0\ncore id\t\t: " +
               std::to_string(i) + "\nflags\t\t: fpu sse2 avx fma avx2 avx512f avx512_bf16 amx_bf16 avx512_fp16\n\n";
  }
  return parse_cpu_facts(cpuinfo, "", "");
}

// A CPU row is held to the cores its ranks' threads could use, at most the physical cores:
// 4 ranks of 1 thread on 2 cores use 2; 1 rank of 1 thread uses 1; bf16 on AMX.
TEST(SweepSummary, ACpuRowIsHeldToThePeakOfTheCoresItsThreadsCouldUse) {
  ResultDocument doc = testing::sample_sweep_document();
  doc.environment.gpus.clear();
  doc.environment.cpu = emerald_rapids(2);
  for (auto& run : doc.runs) {
    run.device = "cpu";
    run.threads_per_rank = 1;
    run.world_size = run.name == "single" ? 1 : 4;
  }
  const auto rows = summarize_sweep(doc);
  const auto& single = find(rows, "single", "faithful");
  EXPECT_EQ(single.peak_cores, 1);
  EXPECT_DOUBLE_EQ(single.peak_flops_per_s, 64 * 2.1e9);
  EXPECT_DOUBLE_EQ(single.row_peak_flops_per_s, 64 * 2.1e9);
  EXPECT_NEAR(single.flops_utilisation, single.achieved_flops_per_s / (64 * 2.1e9), 1e-15);
  EXPECT_NE(single.peak_source.find("16 fp32 lanes x 2 FMA units"), std::string::npos) << single.peak_source;
  EXPECT_NE(single.peak_source.find("cpu MHz 2.10 GHz"), std::string::npos) << single.peak_source;
  EXPECT_FALSE(single.peak_upper_bound) << "a nominal clock is no turbo clock";
  const auto& ddp = find(rows, "ddp-2gpu", "faithful");  // fp16 in the sample: AVX512-FP16
  EXPECT_EQ(ddp.peak_cores, 2) << "4 ranks of one thread on 2 cores";
  EXPECT_DOUBLE_EQ(ddp.row_peak_flops_per_s, 2 * 128 * 2.1e9);
  for (auto& run : doc.runs) run.config["amp"] = "bf16";
  const auto bf16_rows = summarize_sweep(doc);
  const auto& bf16 = find(bf16_rows, "ddp-2gpu", "faithful");
  EXPECT_DOUBLE_EQ(bf16.row_peak_flops_per_s, 2 * 1024 * 2.1e9);
  EXPECT_EQ(bf16.peak_unit, "AMX-BF16");

  // More threads than cores count the cores; a turbo clock from cpufreq is an upper bound.
  for (auto& run : doc.runs) run.threads_per_rank = 8;
  doc.environment.cpu.max_mhz = 3800;
  const auto turbo_rows = summarize_sweep(doc);
  const auto& turbo = find(turbo_rows, "single", "faithful");
  EXPECT_EQ(turbo.peak_cores, 2);
  EXPECT_TRUE(turbo.peak_upper_bound);
  EXPECT_DOUBLE_EQ(turbo.row_peak_flops_per_s, 2 * 1024 * 3.8e9);
}

// A row faster than its peak proves a figure behind the peak wrong: no bound is claimed. A
// DataParallel row's replicas each compute on a thread of their own.
TEST(SweepSummary, ARowAboveItsPeakSaysThePeakIsWrongAndDataParallelCountsItsReplicas) {
  ResultDocument doc = testing::sample_sweep_document();
  doc.environment.gpus.clear();
  doc.environment.cpu = emerald_rapids(4);
  doc.environment.cpu.max_mhz = 100;  // plausible, and far too low for what the rows achieved
  for (auto& run : doc.runs) {
    run.device = "cpu";
    run.threads_per_rank = 1;
    run.world_size = 1;
    run.ranks_per_node = {1};
  }
  const auto rows = summarize_sweep(doc);
  const auto& single = find(rows, "single", "faithful");
  ASSERT_GT(single.flops_utilisation, 1);
  EXPECT_FALSE(single.peak_upper_bound) << "no bound holds for a wrong peak";
  EXPECT_NE(single.peak_source.find("the row ran faster than this peak"), std::string::npos) << single.peak_source;

  for (auto& run : doc.runs) {
    run.strategy = "dp";
    run.config["devices"] = "cpu,cpu,cpu";
  }
  const auto dp_rows = summarize_sweep(doc);
  EXPECT_EQ(find(dp_rows, "single", "faithful").peak_cores, 3) << "3 replicas of 1 thread";
}

// On CPUs PyTorch's twin of a SyncBatchNorm row runs without it, beside ddpbench's row run once
// more without it: the comparison is between those two, the table's row is the tutorial's.
TEST(SweepSummary, ATwinComparedWithoutSyncBnIsPairedWithTheRowsRunWithoutIt) {
  ResultDocument doc = testing::twin_document({100, 300, 200}, {90, 280, 210});
  doc.sweep->rows = {{"ddp", "faithful", kNotMeasured, 2, ""},
                     {"ddp.no-sync-bn", "faithful", kNotMeasured, 2, ""},
                     {"ddp.torch", "faithful", kNotMeasured, 2, "ddp", "ddp.no-sync-bn", "SyncBatchNorm: CUDA only"}};
  for (int64_t i = 0; i < 3; ++i) {
    RunResult r;
    r.name = "ddp.no-sync-bn";
    r.mode = "faithful";
    r.repetition = i;
    r.strategy = "ddp";
    r.steady_images_per_s = 140.0 + 100.0 * static_cast<double>(i);  // 140, 240, 340
    r.train_time_s = 1000 / r.steady_images_per_s;
    doc.runs.push_back(r);
  }
  const auto rows = summarize_sweep(doc);
  ASSERT_EQ(rows.size(), 1u) << "the run without SyncBatchNorm is not a row of the table";
  EXPECT_EQ(rows[0].name, "ddp");
  EXPECT_DOUBLE_EQ(rows[0].steady_images_per_s, 200) << "the table's row is the row itself";
  ASSERT_TRUE(rows[0].pytorch.has_value());
  EXPECT_EQ(rows[0].pytorch->ddpbench_name, "ddp.no-sync-bn");
  EXPECT_EQ(rows[0].pytorch->compared_without, "SyncBatchNorm: CUDA only");
  EXPECT_DOUBLE_EQ(rows[0].pytorch->ddpbench_steady_images_per_s, 240);
  // Pairs (140, 90), (240, 280), (340, 210): the median ratio is 140 / 90.
  EXPECT_DOUBLE_EQ(rows[0].vs_pytorch_steady, 140.0 / 90.0);
  EXPECT_TRUE(is_comparison_run(doc, "ddp.no-sync-bn", "faithful"));
  EXPECT_FALSE(is_comparison_run(doc, "ddp", "faithful"));
  EXPECT_FALSE(is_comparison_run(doc, "ddp.no-sync-bn", "controlled"));
}

}  // namespace
}  // namespace ddpbench
