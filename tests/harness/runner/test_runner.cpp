#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "data/synthetic.hpp"
#include "harness/runner/fault_injection.hpp"
#include "harness/runner/runner.hpp"
#include "models/flop_count.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

RunConfig tiny_config() {
  RunConfig c;
  c.model = "tiny";
  c.num_classes = 10;
  c.dataset = DatasetKind::synthetic;
  c.batch_size = 100;
  c.workers = 2;
  c.warmup_steps = 3;
  c.lr = 0.05;
  c.device = "cpu";
  return c;
}

const DatasetSplits& tiny_data() {
  static const DatasetSplits data = make_synthetic({0, 1050, 230});
  return data;
}

TEST(Runner, FullEpochCountsEveryImageAndEvaluatesTheWholeTestSet) {
  const RunConfig config = tiny_config();
  const RunResult r = run_row(config, DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  EXPECT_EQ(r.status, RunStatus::ok);
  EXPECT_EQ(r.steps, 11);  // 1050 / 100, the last batch of 50
  EXPECT_EQ(r.steps_per_epoch, 11);
  EXPECT_FALSE(r.epoch_cut);
  EXPECT_EQ(r.images_trained, 1050);
  EXPECT_EQ(r.step_records.back().images, 50);
  EXPECT_EQ(r.eval_images, 230);
  EXPECT_FALSE(r.eval_cut);
  EXPECT_GE(r.test_accuracy, 0.0);
  EXPECT_LE(r.test_accuracy, 1.0);
  EXPECT_TRUE(std::isfinite(r.final_loss));
  EXPECT_EQ(r.dataset, "synthetic");
  EXPECT_EQ(r.device, "cpu");
  EXPECT_GT(r.peak_memory_bytes, 0);
  EXPECT_EQ(r.peak_memory_source, "host-rss");
  EXPECT_NEAR(r.images_per_s, 1050 / r.train_time_s, 1e-6 * r.images_per_s);
  EXPECT_GE(r.total_time_s, r.train_time_s);
}

// The main rank counts the model's FLOPs once and reports them at its steady throughput.
TEST(Runner, TheMainRankReportsTheModelsFlopsAtItsSteadyThroughput) {
  const RunConfig config = tiny_config();
  const RunResult r = run_row(config, DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  const double per_image = train_flops_per_image(ModelOptions{"tiny", 10, "", false}, kImageSide);
  EXPECT_DOUBLE_EQ(r.train_flops_per_image, per_image);
  EXPECT_DOUBLE_EQ(r.achieved_flops_per_s, per_image * r.steady_images_per_s);
}

TEST(Runner, SteadyStateLeavesTheWarmupOut) {
  const RunResult r = run_row(tiny_config(), DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  std::vector<double> steady;
  int64_t images = 0;
  double seconds = 0;
  for (std::size_t i = 3; i < r.step_records.size(); ++i) {
    steady.push_back(r.step_records[i].time_s);
    images += r.step_records[i].images;
    seconds += r.step_records[i].time_s;
  }
  EXPECT_DOUBLE_EQ(r.steady_images_per_s, static_cast<double>(images) / seconds);
  const Quantiles q = quantiles(steady);
  EXPECT_DOUBLE_EQ(r.step_time_s.p50, q.p50);
  EXPECT_DOUBLE_EQ(r.step_time_s.max, *std::max_element(steady.begin(), steady.end()));
  double epoch_seconds = 0;
  for (const auto& s : r.step_records) epoch_seconds += s.time_s;
  EXPECT_LE(epoch_seconds, r.train_time_s * 1.0001);
}

TEST(Runner, CutEpochAndCutEvaluationAreReported) {
  RunConfig config = tiny_config();
  config.max_steps = 4;
  config.max_eval_batches = 1;
  config.epochs = 2;
  const RunResult r = run_row(config, DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  EXPECT_EQ(r.steps, 8);
  EXPECT_TRUE(r.epoch_cut);
  EXPECT_EQ(r.step_records[4].epoch, 1);
  EXPECT_EQ(r.step_records[4].step, 0);
  EXPECT_EQ(r.eval_images, 100);
  EXPECT_TRUE(r.eval_cut);
}

TEST(Runner, TrainingLearnsTheSyntheticClasses) {
  RunConfig config = tiny_config();
  config.epochs = 3;
  const RunResult r = run_row(config, DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  EXPECT_GT(r.test_accuracy, 0.3);
  EXPECT_LT(r.step_records.back().loss, r.step_records.front().loss);
}

TEST(Runner, WarmupLongerThanTheRunLeavesSteadyFiguresUnmeasured) {
  RunConfig config = tiny_config();
  config.max_steps = 2;
  const RunResult r = run_row(config, DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  EXPECT_TRUE(std::isnan(r.steady_images_per_s));
  EXPECT_TRUE(std::isnan(r.step_time_s.p50));
  EXPECT_TRUE(std::isfinite(r.images_per_s));
}

// A row is as slow as its slowest rank (the epoch ends when the last rank's does), and the
// rank that held the others back is the one with the most compute of its own, not the one
// with the longest steps (every rank's step lasts as long under a barrier).
TEST(Runner, TheRowIsAsSlowAsItsSlowestRankAndNamesTheStraggler) {
  RowMeasurements m;
  m.train_time_s = 1.0;  // rank 0's own
  m.local_images = 100;
  m.steps = {StepRecord{0, 0, 50, 0.5, 1.0, {}}, StepRecord{0, 1, 50, 0.5, 1.0, {}}};
  m.ranks = {RankSteps{1.0, {0.50}, 10, StepShares{0.030, 0.010, 0.460}},
             RankSteps{3.0, {0.50}, 30, StepShares{0.090, 0.010, 0.400}},
             RankSteps{2.0, {0.50}, 20, StepShares{0.045, 0.010, 0.445}}};
  RunConfig config = tiny_config();
  config.warmup_steps = 0;
  const RunResult r = assemble_result(config, 3, m);
  EXPECT_DOUBLE_EQ(r.train_time_s, 3.0);
  EXPECT_DOUBLE_EQ(r.images_per_s, 300 / 3.0);
  EXPECT_EQ(r.slowest_rank, 1);
  EXPECT_DOUBLE_EQ(r.rank_compute_spread, 3.0);
  EXPECT_DOUBLE_EQ(r.rank_spread, (0.090 + 0.010) / (0.030 + 0.010));
  EXPECT_EQ(r.straggler_cause, "compute");
  EXPECT_EQ(r.peak_memory_bytes, 30);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_DOUBLE_EQ(r.ranks[2].wait_s, 0.445);
  // Where a step went, by the step's own record.
  const StepShares shares = mean_shares(std::vector<StepRecord>{
      StepRecord{0, 0, 1, 1.0, 0, PhaseSeconds{0.1, 0.3, 0.4, 0.05, 0.15, 0.2, 0.25, 0}}});
  EXPECT_DOUBLE_EQ(shares.data_s, 0.1);
  EXPECT_DOUBLE_EQ(shares.wait_s, 0.05 + 0.25);
  EXPECT_DOUBLE_EQ(shares.compute_s, 1.0 - 0.1 - 0.3);
  // No rank with a measured compute time: no rank is named, in the result or its JSON.
  for (auto& rank : m.ranks) rank.steady_shares.compute_s = kNotMeasured;
  const RunResult unmeasured = assemble_result(config, 3, m);
  EXPECT_EQ(unmeasured.slowest_rank, -1);
  EXPECT_TRUE(std::isnan(unmeasured.rank_compute_spread));
  EXPECT_TRUE(std::isnan(unmeasured.rank_spread));
  const nlohmann::json written = unmeasured;
  EXPECT_TRUE(written["slowest_rank"].is_null());
  EXPECT_EQ(written.get<RunResult>().slowest_rank, -1);
}

// Two steps of rank 0's, 100 images in 1 s: what the straggler tests give the ranks around.
RowMeasurements two_steps() {
  RowMeasurements m;
  m.train_time_s = 1.0;
  m.local_images = 100;
  m.steps = {StepRecord{0, 0, 50, 0.5, 1.0, {}}, StepRecord{0, 1, 50, 0.5, 1.0, {}}};
  return m;
}

// A rank held by its loader holds the others as surely as one that computes more: it is named,
// by its own time (compute and data), with its loader as the cause, though another rank
// computes more than it does.
TEST(AdversarialStraggler, ARankHeldByItsLoaderIsNamed) {
  RowMeasurements m = two_steps();
  RunConfig config = tiny_config();
  config.warmup_steps = 0;
  RowMeasurements loader_bound = m;
  loader_bound.ranks = {RankSteps{1.0, {0.50}, 10, StepShares{0.040, 0.010, 0.450}},
                        RankSteps{1.0, {0.50}, 10, StepShares{0.035, 0.300, 0.165}}};
  const RunResult held = assemble_result(config, 2, loader_bound);
  EXPECT_EQ(held.slowest_rank, 1);
  EXPECT_EQ(held.straggler_cause, "data");
  EXPECT_DOUBLE_EQ(held.rank_spread, 0.335 / 0.050);
  const nlohmann::json held_json = held;
  EXPECT_EQ(held_json["straggler_cause"], "data");
}

// Noise spreads the ranks too (3 ranks sharing 2 cores: 8 even rows of 9 were flagged), but
// names another rank the slowest each step; a straggler is the slowest step after step. The
// flag asks for both: the spread, and the same rank beyond chance for a rank picked as the
// slowest (binomial at 1 / ranks, times the ranks: slowest_of_ranks_p).
TEST(AdversarialStraggler, NoiseThatNamesAnotherRankEachStepIsNoStraggler) {
  RowMeasurements m = two_steps();
  RunConfig config = tiny_config();
  config.warmup_steps = 0;
  // Rank 2's mean is the highest (1.25x) only because of its one slow step; each rank is the
  // slowest in 3 of the 9 steps.
  const std::vector<double> a = {0.30, 0.10, 0.10, 0.30, 0.10, 0.10, 0.30, 0.10, 0.10};
  const std::vector<double> b = {0.10, 0.30, 0.10, 0.10, 0.30, 0.10, 0.10, 0.30, 0.10};
  const std::vector<double> c = {0.10, 0.10, 0.50, 0.10, 0.10, 0.31, 0.10, 0.10, 0.31};
  const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / 9; };
  m.ranks = {RankSteps{1.0, {0.5}, 10, StepShares{mean(a), 0, 0.5 - mean(a)}, a},
             RankSteps{1.0, {0.5}, 10, StepShares{mean(b), 0, 0.5 - mean(b)}, b},
             RankSteps{1.0, {0.5}, 10, StepShares{mean(c), 0, 0.5 - mean(c)}, c}};
  const RunResult noise = assemble_result(config, 3, m);
  EXPECT_EQ(noise.slowest_rank, 2);
  EXPECT_GT(noise.rank_spread, 1.1);
  EXPECT_EQ(noise.straggler_steps, 3);
  EXPECT_EQ(noise.straggler_of_steps, 9);
  EXPECT_FALSE(noise.straggler) << "p = " << noise.straggler_p;
  // The same spread from one rank slower step after step is a straggler.
  const std::vector<double> slow(9, 0.25), fast(9, 0.17);
  m.ranks = {RankSteps{1.0, {0.5}, 10, StepShares{0.17, 0, 0.33}, fast},
             RankSteps{1.0, {0.5}, 10, StepShares{0.17, 0, 0.33}, fast},
             RankSteps{1.0, {0.5}, 10, StepShares{0.25, 0, 0.25}, slow}};
  const RunResult held = assemble_result(config, 3, m);
  EXPECT_EQ(held.slowest_rank, 2);
  EXPECT_EQ(held.straggler_steps, 9);
  EXPECT_TRUE(held.straggler) << "p = " << held.straggler_p;
  // The rank is picked as the slowest after the run: at 4 ranks, slowest in all 3 steady steps is
  // what chance gives one rank or another in 4 of 64 rows (p = 0.0625), no straggler; the
  // binomial alone (1/64) flagged it.
  const std::vector<double> slow3(3, 0.25), fast3(3, 0.17);
  m.ranks.assign(3, RankSteps{1.0, {0.5}, 10, StepShares{0.17, 0, 0.33}, fast3});
  m.ranks.push_back(RankSteps{1.0, {0.5}, 10, StepShares{0.25, 0, 0.25}, slow3});
  const RunResult picked = assemble_result(config, 4, m);
  EXPECT_EQ(picked.slowest_rank, 3);
  EXPECT_EQ(picked.straggler_steps, 3);
  EXPECT_NEAR(picked.straggler_p, 4.0 / 64, 1e-12);
  EXPECT_FALSE(picked.straggler);
}

// --inject-slowdown X: after each step's training, busy work for X times the time the host
// spent training it, inside the step (the optimizer phase), so the step is really longer.
// Lower bounds only: the busy wait cannot end before its deadline, however busy the machine.
TEST(Runner, AnInjectedSlowdownStretchesEveryStepByItsFraction) {
  RunConfig config = tiny_config();
  config.max_steps = 5;
  config.inject_slowdown = 0.5;
  const RunResult r = run_row(config, DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  ASSERT_EQ(r.step_records.size(), 5u);
  for (const auto& step : r.step_records) {
    const PhaseSeconds& p = step.phases;
    EXPECT_GE(p.optimizer_s, 0.5 * (p.forward_s + p.backward_s + p.comm_s)) << "step " << step.step;
    EXPECT_GE(step.time_s, 1.5 * (p.forward_s + p.backward_s + p.comm_s)) << "step " << step.step;
  }
  // The slowdown is another rank's business: exactly none of it on rank 0 ...
  config.inject_slowdown = 5.0;
  config.inject_slowdown_rank = 1;
  const FaultInjection rank0(config, 0, nullptr), rank1(config, 1, nullptr);
  EXPECT_FALSE(rank0.slows_steps());
  EXPECT_EQ(rank0.stretch(0.01), 0.0);
  EXPECT_TRUE(rank1.slows_steps());
  EXPECT_GE(rank1.stretch(0.001), 0.005);
  // ... and the runner's rank 0 is that rank 0: slowed 5x, its optimizer phase would hold at
  // least 5 times its training; it holds a small part of it (a margin no noise crosses).
  const RunResult other = run_row(config, DistContext{}, tiny_data(), std::chrono::steady_clock::now());
  double training = 0, optimizer = 0;
  for (const auto& step : other.step_records) {
    training += step.phases.forward_s + step.phases.backward_s;
    optimizer += step.phases.optimizer_s;
  }
  EXPECT_LT(optimizer, 2.5 * training) << "rank 0 was slowed for rank 1";
}

}  // namespace
}  // namespace ddpbench
