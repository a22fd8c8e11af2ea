#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "reports/bucket_assignment.hpp"
#include "reports/reporter.hpp"
#include "reports/tuning_advice.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

struct Gradient {
  int64_t bytes;
  double ready_s;
};

// A DDP row at 2 ranks, measured with `measured` (25 MB, no hook, overlap unless said), whose
// gradients backward made ready as `gradients` says (in that order) and whose compute ended at
// `backward_s`; its buckets laid out from them, each on a 1 GB/s link for the time its bytes
// take there. Its steady step is set to what the advisor's own model says at its own point,
// unless `model_error` says how far off the model should be.
RunResult row_of(const std::vector<Gradient>& gradients, double backward_s, const TuningSetting& measured = {},
                 json compression = nullptr, double model_error = 0) {
  RunResult r;
  r.name = "ddp";
  r.mode = "faithful";
  r.strategy = "ddp";
  r.status = RunStatus::ok;
  r.world_size = 2;
  r.global_batch = 64;
  r.mean_phase_s = PhaseSeconds{0.01, 0.09, backward_s, 0, 0.05, 0, 0, 0};
  r.config = {{"comm-hook", measured.comm_hook}, {"bucket-mb", measured.bucket_mb}, {"overlap", measured.overlap}};
  json timeline = json::array();
  std::vector<GradientSize> sizes;
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    timeline.push_back({{"parameter", gradients.size() - 1 - i}, {"name", "p" + std::to_string(i)},
                        {"bytes", gradients[i].bytes}, {"dtype", "Float"}, {"ready_s", gradients[i].ready_s}});
    sizes.push_back({gradients[i].bytes, "Float"});
  }
  json buckets = json::array();
  const double wire = measured.comm_hook == "allreduce" ? 1.0 : 0.5;
  for (const auto& bucket : assign_buckets(sizes, ddp_bucket_limits(measured.bucket_mb))) {
    double bytes = 0, ready = 0;
    for (std::size_t i : bucket) {
      bytes += static_cast<double>(gradients[i].bytes);
      ready = std::max(ready, gradients[i].ready_s);
    }
    // 2 ranks: 2(n-1)/n = 1, so the time on the wire at 1 GB/s is the bytes / 1e9.
    buckets.push_back({{"bucket", buckets.size()}, {"bytes", bytes}, {"ready_s", ready},
                       {"allreduce_s", bytes * wire / 1e9}, {"wire_s", bytes * wire / 1e9}});
  }
  r.strategy_details = {{"backward_compute_s", backward_s}, {"bucket_timeline", buckets}, {"gradient_timeline", timeline}};
  if (!compression.is_null()) r.strategy_details["compression_s_per_byte"] = compression;
  r.steady_images_per_s = 64;  // a first guess, replaced by the model's own step
  ProjectionOptions own;
  own.ranks = {2};
  const RowAdvice first = advise_row({&r}, own, {measured});
  r.steady_images_per_s = 64 / (first.model_step_s / (1 + model_error));
  return r;
}

ProjectionOptions on_link(double gbps, double latency_us, std::vector<int64_t> ranks = {8}) {
  ProjectionOptions o;
  o.ranks = std::move(ranks);
  o.ranks_per_node = 1;
  o.inter_node_gbps = gbps;
  o.intra_node_gbps = gbps;
  o.latency_us = latency_us;
  return o;
}

std::vector<TuningSetting> grid_of(const std::vector<std::string>& hooks, std::vector<bool> overlaps = {true, false}) {
  std::vector<TuningSetting> grid;
  for (bool overlap : overlaps) {
    for (const auto& hook : hooks) {
      for (double mb : {1.0, 5.0, 10.0, 25.0, 50.0, 100.0}) grid.push_back({mb, hook, overlap});
    }
  }
  return grid;
}

const SettingProjection& find(const RankAdvice& k, const TuningSetting& s) {
  const auto it = std::find_if(k.settings.begin(), k.settings.end(), [&](const auto& p) { return p.setting == s; });
  EXPECT_NE(it, k.settings.end()) << setting_label(s);
  return *it;
}

// advise reads a row by project's rules: a SyncBatchNorm row whose file does not record its
// collectives' waits apart (its 85 % at 8 ranks was 36 %) is not advised, saying why; one that
// does is advised with them costed as communication at each world size, on top of its compute.
TEST(TuningAdvice, ASyncBatchNormRowIsAdvisedOnlyWithItsCollectivesApart) {
  RunResult r = row_of(std::vector<Gradient>(4, Gradient{4'000'000, 0.3}), 0.3);
  r.strategy_details["sync_bn_layers"] = 53;
  const RowAdvice a = advise_row({&r}, on_link(8, 3000), grid_of({"allreduce"}));
  EXPECT_NE(a.not_advised.find("SyncBatchNorm across 2 ranks (53 layers): the file does not record the waits"),
            std::string::npos)
      << a.not_advised;
  // The same row recorded apart: 10 ms of its forward and 20 ms of its backward were waits.
  const RunResult plain = row_of(std::vector<Gradient>(4, Gradient{4'000'000, 0.28}), 0.28);
  RunResult synced = row_of(std::vector<Gradient>(4, Gradient{4'000'000, 0.3}), 0.3);
  synced.strategy_details["sync_bn_layers"] = 2;
  synced.strategy_details["sync_bn_features"] = json::array({64, 128});
  synced.strategy_details["broadcast_buffer_bytes"] = 0;
  synced.mean_phase_s.forward_s += 0.01;
  synced.mean_phase_s.collective_wait_s = 0.03;
  synced.mean_phase_s.forward_collective_wait_s = 0.01;
  const ProjectionOptions options = on_link(8, 3000);
  const RowAdvice with = advise_row({&synced}, options, grid_of({"allreduce"}));
  const RowAdvice without = advise_row({&plain}, options, grid_of({"allreduce"}));
  ASSERT_EQ(with.not_advised, "");
  ASSERT_EQ(without.not_advised, "");
  ASSERT_FALSE(with.ranks.empty());
  const TuningSetting defaults = kPyTorchDefaults;
  const double extra = find(with.ranks.back(), defaults).step_s - find(without.ranks.back(), defaults).step_s;
  // Eight ranks, a node each, 3000 us a ring step: forward's two gathers of 14 ring steps at the
  // least (backward's sums may hide under the buckets' allreduces).
  EXPECT_GT(extra, 2 * 14 * 3000e-6) << "the collectives at 8 ranks, on top of the same compute";
}

// Twenty 4 MB gradients, all made ready at backward's end: no bucket can start earlier, so
// nothing overlaps and every bucket only adds its latency. The fewer the buckets, the faster:
// the largest cap, one bucket, is the advice; overlap on and off lay the same buckets out and tie.
TEST(TuningAdvice, ABackwardThatMakesEveryGradientReadyAtItsEndWantsFewerLargerBuckets) {
  const std::vector<Gradient> at_the_end(20, Gradient{4'000'000, 0.3});
  const RunResult r = row_of(at_the_end, 0.3);
  const RowAdvice a = advise_row({&r}, on_link(8, 3000), grid_of({"allreduce"}));
  ASSERT_EQ(a.not_advised, "");
  EXPECT_NEAR(a.model_error, 0, 1e-12);
  EXPECT_DOUBLE_EQ(a.tie_band, kMinimumTieBand);
  ASSERT_EQ(a.ranks.size(), 1u);
  const RankAdvice& k = a.ranks[0];
  EXPECT_EQ(k.settings[k.best].setting.bucket_mb, 100);
  EXPECT_EQ(k.settings[k.best].buckets, 1);
  // Steps fall as the cap grows (1 MB: 20 buckets; 100 MB: 1), each bucket 2(n-1) latencies.
  double previous = std::numeric_limits<double>::infinity();
  for (double mb : {1.0, 5.0, 10.0, 25.0, 50.0, 100.0}) {
    const double step = find(k, {mb, "allreduce", true}).step_s;
    EXPECT_LT(step, previous) << mb << " MB";
    previous = step;
    EXPECT_DOUBLE_EQ(step, find(k, {mb, "allreduce", false}).step_s) << mb << " MB: held or not, the same start";
  }
  EXPECT_EQ(find(k, {1, "allreduce", true}).buckets, 20);
  const double latency_per_bucket = 2 * 7 * 3000e-6;
  EXPECT_NEAR(find(k, {1, "allreduce", true}).step_s - find(k, {100, "allreduce", true}).step_s, 19 * latency_per_bucket,
              1e-9);
  // The tie: the same layout without overlap, and nothing with more buckets.
  ASSERT_EQ(k.ties.size(), 2u);
  EXPECT_EQ(k.settings[k.ties[1]].setting, (TuningSetting{100, "allreduce", false}));
  EXPECT_FALSE(k.defaults_tie());
  EXPECT_GT(k.gain_over_defaults, 0.05);
  EXPECT_NE(markdown_advice({a}, true).find("`--bucket-mb 100`"), std::string::npos) << markdown_advice({a}, true);
}

// The readiness rule, on a slow link (4 MB take 0.08 s at 2 ranks): a bucket starts when its
// last gradient is ready (0.25 s, not its first at 0.05 s), or without overlap when backward's
// compute ends (0.30 s); two 1 MB-capped buckets start one at each gradient.
TEST(TuningAdvice, ABucketIsReadyWhenItsLastGradientIsAndHeldToBackwardsEndWithoutOverlap) {
  const RunResult r = row_of({{2'000'000, 0.05}, {2'000'000, 0.25}}, 0.30);
  const RowAdvice a = advise_row({&r}, on_link(0.4, 0, {2}), default_tuning_grid());
  const RankAdvice& k = a.ranks[0];
  const double outside = 0.01 + 0.09 + 0.05;  // data, forward, optimizer
  EXPECT_NEAR(find(k, {100, "allreduce", true}).step_s, outside + 0.25 + 0.08, 1e-9);
  EXPECT_NEAR(find(k, {100, "allreduce", false}).step_s, outside + 0.30 + 0.08, 1e-9);
  EXPECT_NEAR(find(k, {1, "allreduce", true}).step_s, outside + 0.30, 1e-9) << "the last bucket ends at 0.29 s";
  EXPECT_NEAR(find(k, {1, "allreduce", true}).exposed_comm_s, 0, 1e-12);
  EXPECT_NEAR(find(k, {1, "allreduce", false}).step_s, outside + 0.30 + 0.08, 1e-9);
  EXPECT_EQ(find(k, {1, "allreduce", true}).buckets, 2);
}

// Backward beside the allreduces against backward alone: a difference inside backward's own
// spread (its runs alone apart, or its steps' p90 over p50) is its wobble, not contention. A 1 %
// difference once read as backward losing speed to the allreduces in every setting.
TEST(TuningAdvice, ContentionIsMeasuredAgainstBackwardsOwnSpread) {
  std::vector<Gradient> gradients;
  for (int i = 0; i < 10; ++i) gradients.push_back({4'000'000, 0.0303 * (i + 1)});
  RunResult r = row_of(gradients, 0.303);
  r.strategy_details["bucket_timeline"] = json::array(
      {{{"bucket", 0}, {"bytes", 20e6}, {"ready_s", 0.15}, {"start_s", 0.15}, {"allreduce_s", 0.15}, {"wire_s", 0.15}},
       {{"bucket", 1}, {"bytes", 20e6}, {"ready_s", 0.303}, {"start_s", 0.303}, {"allreduce_s", 0.02}, {"wire_s", 0.02}}});
  r.strategy_details["backward_alone_s"] = 0.3;  // 1 % faster alone than beside its allreduces
  r.strategy_details["backward_alone_runs_s"] = {0.297, 0.3, 0.306};
  ProjectionOptions options;
  options.ranks = {2};
  options.ranks_per_node = 1;
  const RowAdvice wobble = advise_row({&r}, options, default_tuning_grid());
  ASSERT_EQ(wobble.not_advised, "");
  EXPECT_TRUE(wobble.contention_measured);
  EXPECT_EQ(wobble.compute_slowdown, 0.0) << "0.003 s inside its runs' 0.009 s: no contention";
  EXPECT_NE(markdown_advice({wobble}, false).find("backward lost 0.0 % of its speed"), std::string::npos)
      << markdown_advice({wobble}, false);
  // Its steps' spread serves where its runs alone were not recorded: p90 2 % over p50.
  RunResult steps = r;
  steps.strategy_details.erase("backward_alone_runs_s");
  steps.step_time_s = {1.0, 1.02, 1.05};
  EXPECT_EQ(advise_row({&steps}, options, default_tuning_grid()).compute_slowdown, 0.0);
  // Neither recorded: nothing says it wobbles, and the difference is taken as measured.
  steps.step_time_s = {};
  EXPECT_GT(advise_row({&steps}, options, default_tuning_grid()).compute_slowdown, 0.0);
  // A clear difference beyond the spread: backward alone 0.25 s against 0.303 s beside.
  RunResult clear = r;
  clear.strategy_details["backward_alone_s"] = 0.25;
  clear.strategy_details["backward_alone_runs_s"] = {0.247, 0.25, 0.256};
  const RowAdvice contended = advise_row({&clear}, options, default_tuning_grid());
  ASSERT_EQ(contended.not_advised, "");
  // It lost 0.053 s over the 0.15 s an allreduce was in flight beside it.
  EXPECT_NEAR(contended.compute_slowdown, 0.053 / 0.15, 1e-9);
}

// On CPU ranks backward and the allreduces share the cores. The row says by how much: backward
// alone took 0.3 s against 0.4 s beside allreduces that were in flight 0.28 s of it, so it lost
// 0.1 / 0.28 of its speed then. Settings that start every allreduce after backward do not meet
// it: backward alone, then the buckets on the link.
TEST(TuningAdvice, BackwardAndTheAllreducesSlowEachOtherAsTheRowMeasured) {
  std::vector<Gradient> gradients;
  for (int i = 0; i < 10; ++i) gradients.push_back({4'000'000, 0.04 * (i + 1)});
  RunResult r = row_of(gradients, 0.4);
  r.strategy_details["backward_alone_s"] = 0.3;
  r.strategy_details["bucket_timeline"] = json::array(
      {{{"bucket", 0}, {"bytes", 4e6}, {"ready_s", 0.04}, {"start_s", 0.04}, {"allreduce_s", 0.2}, {"wire_s", 0.2}},
       {{"bucket", 1}, {"bytes", 28e6}, {"ready_s", 0.32}, {"start_s", 0.32}, {"allreduce_s", 0.3}, {"wire_s", 0.3}},
       {{"bucket", 2}, {"bytes", 8e6}, {"ready_s", 0.4}, {"start_s", 0.62}, {"allreduce_s", 0.08}, {"wire_s", 0.08}}});
  ProjectionOptions options;
  options.ranks = {2};
  options.ranks_per_node = 1;
  const RowAdvice a = advise_row({&r}, options, default_tuning_grid());
  ASSERT_EQ(a.not_advised, "");
  EXPECT_NEAR(a.compute_slowdown, 0.1 / 0.28, 1e-9);
  const double link = 40e6 / (0.2 + 0.3 + 0.08);  // all the bytes over their time on the wire
  EXPECT_NEAR(a.fabric.inter.bytes_per_s, link, 1e-3);
  const double outside = 0.01 + 0.09 + 0.05;
  EXPECT_NEAR(find(a.ranks[0], {100, "allreduce", true}).step_s, outside + 0.3 + 40e6 / link, 1e-9);
  EXPECT_NEAR(find(a.ranks[0], {5, "allreduce", false}).step_s, outside + 0.3 + 40e6 / link, 1e-9);
  // The first bucket (at 0.03 s of backward alone) runs 4e6 / link beside backward, which does
  // (1 - slowdown) of its work then: backward ends that much later than 0.3 s.
  const double beside = 4e6 / link;
  const SettingProjection& overlapped = find(a.ranks[0], {25, "allreduce", true});
  EXPECT_GT(overlapped.step_s - overlapped.exposed_comm_s, outside + 0.3 + beside * a.compute_slowdown - 1e-9);
  EXPECT_NE(markdown_advice({a}, false).find("backward lost 35.7 % of its speed"), std::string::npos)
      << markdown_advice({a}, false);
  // The largest bucket allreduced alone: 8 MB in 0.08 s, so 40 MB would have taken 0.4 s where
  // the allreduces were busy 0.58 s, 0.28 s of it beside backward: they lost 0.18 / 0.28 of
  // their speed there. The link is the one alone; fp16 and bf16 took 3/8 and 1/4 of fp32's time.
  r.strategy_details["allreduce_alone"] = {{"bytes", 8e6}, {"fp32_s", 0.08}, {"fp16_s", 0.03}, {"bf16_s", 0.02}};
  const RowAdvice with_alone = advise_row({&r}, options, default_tuning_grid());
  EXPECT_NEAR(with_alone.comm_slowdown, 0.18 / 0.28, 1e-9);
  EXPECT_NEAR(with_alone.fabric.inter.bytes_per_s, 100e6, 1e-3);
  EXPECT_NEAR(with_alone.fp16_wire_fraction, 0.375, 1e-12);
  EXPECT_NEAR(with_alone.bf16_wire_fraction, 0.25, 1e-12);
  EXPECT_NEAR(find(with_alone.ranks[0], {100, "allreduce", false}).step_s, outside + 0.3 + 0.4, 1e-9);
  EXPECT_NEAR(find(with_alone.ranks[0], {100, "fp16", false}).step_s, outside + 0.3 + 0.4 * 0.375, 1e-9);
  EXPECT_NEAR(find(with_alone.ranks[0], {100, "bf16", false}).step_s, outside + 0.3 + 0.4 * 0.25, 1e-9);
  EXPECT_NE(markdown_advice({with_alone}, false).find("Latency taken as 0"), std::string::npos)
      << "the measured link shows no latency, and the advice says so";
  EXPECT_EQ(with_alone.unchecked, "") << "0.64 and 0.36 are within what the model takes";
  // Backward alone in 1 ms against 0.4 s beside: a slowdown past the model's 90 %. The two took
  // turns rather than shared the host; what overlap costs is not known, and the advice says so.
  RunResult turns = r;
  turns.strategy_details["backward_alone_s"] = 0.001;
  const RowAdvice past = advise_row({&turns}, options, default_tuning_grid());
  EXPECT_DOUBLE_EQ(past.compute_slowdown, 0.9);
  EXPECT_NE(past.unchecked.find("past what the model takes"), std::string::npos) << past.unchecked;
  EXPECT_TRUE(advice_off(past));
  EXPECT_NE(markdown_advice({past}, false).find("Not to be trusted"), std::string::npos);
  // Without backward alone, nothing says how much backward lost: no slowdown, and it says so.
  r.strategy_details.erase("backward_alone_s");
  const RowAdvice unmeasured = advise_row({&r}, options, default_tuning_grid());
  EXPECT_EQ(unmeasured.compute_slowdown, 0.0);
  EXPECT_FALSE(unmeasured.contention_measured);
  EXPECT_NE(markdown_advice({unmeasured}, false).find("slow each other was not measured"), std::string::npos);
}

// A slow link, every gradient at backward's end: all communication is exposed, and fp16 puts
// half the bytes on the wire, so it halves the exposed time, less nothing but its measured cast
// and copy back; bf16's casts cost more here, and it comes second, a tie.
TEST(TuningAdvice, OnASlowLinkCompressionHalvesTheExposedTime) {
  const std::vector<Gradient> at_the_end(20, Gradient{4'000'000, 0.3});
  const json costs = {{"fp16", 1e-10}, {"bf16", 2e-10}};
  const RunResult r = row_of(at_the_end, 0.3, {}, costs);
  const std::vector<TuningSetting> grid = grid_of({"allreduce", "fp16", "bf16"}, {true});
  const RowAdvice a = advise_row({&r}, on_link(0.8, 0), grid);
  const RankAdvice& k = a.ranks[0];
  const SettingProjection& none = find(k, {25, "allreduce", true});
  const SettingProjection& fp16 = find(k, {25, "fp16", true});
  const double cast_s = 80e6 * 1e-10;  // cast and copy back of every byte
  EXPECT_NEAR(none.exposed_comm_s, 2.0 * 7 / 8 * 80e6 / 0.1e9, 1e-9);
  // On the stream: half the bytes, and every copy back; the casts but the first ran beside it.
  EXPECT_NEAR(fp16.comm_s, none.comm_s / 2 + cast_s / 2, 1e-9);
  EXPECT_GT(fp16.exposed_comm_s, none.exposed_comm_s / 2);
  EXPECT_LT(fp16.exposed_comm_s, none.exposed_comm_s / 2 + cast_s);
  EXPECT_NEAR(fp16.exposed_comm_s / none.exposed_comm_s, 0.5, 0.01);
  EXPECT_EQ(k.settings[k.best].setting.comm_hook, "fp16");
  EXPECT_EQ(k.settings[k.best].setting.bucket_mb, 1) << "no latency: every layout equal, the first listed";
  EXPECT_TRUE(std::any_of(k.ties.begin(), k.ties.end(), [&](std::size_t i) { return k.settings[i].setting.comm_hook == "bf16"; }));
  EXPECT_TRUE(std::none_of(k.ties.begin(), k.ties.end(), [&](std::size_t i) {
    return k.settings[i].setting.comm_hook == "allreduce";
  }));
  EXPECT_GT(k.gain_over_defaults, 0.5);
  EXPECT_EQ(setting_flags(k.settings[k.best].setting), "--bucket-mb 1 --comm-hook fp16");
}

// Gradients spread over backward and a link fast enough to hide them all: every overlapped
// setting is within the band, so the advice is a tie with PyTorch's defaults, and says to keep them.
TEST(TuningAdvice, WhereCommunicationHidesUnderBackwardTheDefaultsTie) {
  std::vector<Gradient> spread;
  for (int i = 0; i < 40; ++i) spread.push_back({2'000'000, 0.3 * (i + 1) / 40});
  const RunResult r = row_of(spread, 0.3);
  const RowAdvice a = advise_row({&r}, on_link(400, 5), grid_of({"allreduce"}, {true}));
  const RankAdvice& k = a.ranks[0];
  EXPECT_TRUE(k.defaults_tie());
  EXPECT_LT(k.gain_over_defaults, kMinimumTieBand);
  EXPECT_NE(markdown_advice({a}, false).find("keep them"), std::string::npos) << markdown_advice({a}, false);
  ASSERT_EQ(k.ties.size(), 6u);
  EXPECT_NE(markdown_advice({a}, false).find("; and 2 more |"), std::string::npos) << "three named, the rest counted";
}

// The band is the model's own error at the measured point: a model 10 % off there cannot tell
// settings 5 % apart, and says so.
TEST(TuningAdvice, TheTieBandIsTheModelsOwnErrorAtItsMeasuredPoint) {
  const std::vector<Gradient> at_the_end(20, Gradient{4'000'000, 0.3});
  const RunResult r = row_of(at_the_end, 0.3, {}, nullptr, 0.10);
  const RowAdvice a = advise_row({&r}, on_link(8, 3000), grid_of({"allreduce"}));
  EXPECT_NEAR(a.model_error, 0.10, 1e-9);
  EXPECT_NEAR(a.tie_band, 0.10, 1e-9);
  const RankAdvice& k = a.ranks[0];
  EXPECT_GT(k.ties.size(), 2u) << "50 MB's extra bucket is inside 10 %";
  EXPECT_EQ(k.ties.size(), 4u) << "100 and 50 MB, each with and without overlap; 25 MB's four buckets are not";
  EXPECT_NE(markdown_advice({a}, false).find("within 10.0 %"), std::string::npos) << markdown_advice({a}, false);
}

// A row measured with fp16 compression and overlap: each of its gradients came later by the
// casts of the buckets launched before it, on backward's thread. The advisor takes them out,
// so the row gives the same advice as the same model measured without compression.
TEST(TuningAdvice, ARowMeasuredWithCompressionHasItsCastsTakenOutOfBackward) {
  const double cast = 1e-9;  // s per byte, cast and copy back
  std::vector<Gradient> base;
  for (int i = 0; i < 30; ++i) base.push_back({3'000'000, 0.01 * (i + 1)});
  std::vector<GradientSize> sizes(base.size(), GradientSize{3'000'000, "Float"});
  const auto buckets = assign_buckets(sizes, ddp_bucket_limits(25));
  ASSERT_GT(buckets.size(), 2u);
  // As measured: each gradient after a bucket's last one later by that bucket's cast (half the cost).
  std::vector<Gradient> measured = base;
  double shift = 0, backward = base.back().ready_s;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    for (std::size_t i : buckets[b]) measured[i].ready_s += shift;
    const double bucket_bytes = 3e6 * static_cast<double>(buckets[b].size());
    if (b + 1 < buckets.size()) {
      shift += bucket_bytes * cast / 2;
      backward += bucket_bytes * cast / 2;
    }
  }
  const json costs = {{"fp16", cast}, {"bf16", cast}};
  const RunResult compressed = row_of(measured, backward, {25, "fp16", true}, costs);
  const RunResult plain = row_of(base, base.back().ready_s, {}, costs);
  const ProjectionOptions options = on_link(1, 50);
  const RowAdvice from_compressed = advise_row({&compressed}, options, default_tuning_grid());
  const RowAdvice from_plain = advise_row({&plain}, options, default_tuning_grid());
  for (std::size_t s = 0; s < default_tuning_grid().size(); ++s) {
    EXPECT_NEAR(from_compressed.ranks[0].settings[s].step_s, from_plain.ranks[0].settings[s].step_s, 1e-9)
        << setting_label(default_tuning_grid()[s]);
  }
}

// A row whose own steps spread 30 % (p90 against p50) cannot tell settings 5 % apart: the band
// is that spread, PyTorch's defaults tie with the fastest, and the advice is to keep them (the
// fastest named beside it), in the table and in the JSON's `advised`.
TEST(TuningAdvice, ARowsOwnSpreadWidensTheTieAndATieWithTheDefaultsKeepsThem) {
  const std::vector<Gradient> at_the_end(20, Gradient{4'000'000, 0.3});
  RunResult r = row_of(at_the_end, 0.3);
  r.step_time_s = Quantiles{0.6, 0.78, 0.9};
  const RowAdvice a = advise_row({&r}, on_link(8, 3000), grid_of({"allreduce"}));
  EXPECT_NEAR(a.step_spread, 0.3, 1e-12);
  EXPECT_NEAR(a.tie_band, 0.3, 1e-12);
  const RankAdvice& k = a.ranks[0];
  ASSERT_TRUE(k.defaults_tie());
  EXPECT_EQ(k.advised, k.defaults);
  EXPECT_NE(k.best, k.defaults);
  const json j = advice_json({a});
  EXPECT_EQ(j[0]["ranks"][0]["advised"]["flags"], "(the defaults)");
  EXPECT_EQ(j[0]["ranks"][0]["fastest"]["bucket_mb"], 100);
  EXPECT_EQ(j[0]["ranks"][0]["gain_over_defaults"], 0.0) << "keeping the defaults gains nothing";
  EXPECT_GT(j[0]["ranks"][0]["fastest_gain_over_defaults"].get<double>(), 0.0);
  for (const auto& tie : j[0]["ranks"][0]["ties"]) EXPECT_NE(tie["flags"], "(the defaults)") << "the advised is no tie of its own";
  const std::string md = markdown_advice({a}, false);
  EXPECT_NE(md.find("| 8 | 25 MB, no hook, overlap | `(the defaults)` |"), std::string::npos) << md;
  EXPECT_NE(md.find("is a tie with them: keep them"), std::string::npos) << md;
  // Two repetitions 20 % apart: as wide.
  RunResult fast = row_of(at_the_end, 0.3), slow = fast;
  slow.repetition = 1;
  slow.steady_images_per_s = fast.steady_images_per_s / 1.2;
  EXPECT_NEAR(advise_row({&fast, &slow}, on_link(8, 3000), grid_of({"allreduce"})).step_spread, 0.2, 1e-9);
}

// Rows that share a name but not their settings are not pooled as repetitions (the attack's
// 2-rank row and 4-rank fp16 row, both `ddp`, read as one: ranks from one, timeline from the other).
TEST(TuningAdvice, RepetitionsOfOtherSettingsAreNotPooled) {
  const RunResult two = row_of(std::vector<Gradient>(8, Gradient{1'000'000, 0.1}), 0.1);
  RunResult four = two;
  four.world_size = 4;
  four.repetition = 1;
  EXPECT_NE(advise_row({&two, &four}, on_link(10, 5), default_tuning_grid()).not_advised.find("ranks 2 and 4"),
            std::string::npos);
  RunResult fp16 = two;
  fp16.repetition = 1;
  fp16.config["comm-hook"] = "fp16";
  EXPECT_NE(advise_row({&two, &fp16}, on_link(10, 5), default_tuning_grid()).not_advised.find("--comm-hook"),
            std::string::npos);
  // Two runs numbered alike are not repetitions of one row; a failed one is left out, and said.
  EXPECT_NE(advise_row({&two, &two}, on_link(10, 5), default_tuning_grid()).not_advised.find("two runs are its repetition 0"),
            std::string::npos);
  RunResult failed = two;
  failed.repetition = 1;
  failed.status = RunStatus::failed;
  const RowAdvice without = advise_row({&two, &failed}, on_link(10, 5), default_tuning_grid());
  EXPECT_EQ(without.repetitions_left_out, 1);
  EXPECT_NE(markdown_advice({without}, false).find("1 of its repetitions did not run to a steady state"),
            std::string::npos);
}

// What a real row never writes is named, never advised from.
TEST(AdversarialTuningAdvice, FiguresNoRowWritesAreNamedNotAdvisedFrom) {
  const RunResult good = row_of(std::vector<Gradient>(4, Gradient{1'000'000, 0.1}), 0.1);
  const auto why = [](RunResult r) { return advise_row({&r}, on_link(10, 5), default_tuning_grid()).not_advised; };
  const std::vector<std::pair<std::function<void(RunResult&)>, std::string>> cases = {
      {[](RunResult& r) { r.global_batch = 0; }, "global_batch 0"},
      {[](RunResult& r) { r.strategy_details["backward_compute_s"] = 0; }, "backward_compute_s 0"},
      {[](RunResult& r) { r.strategy_details["backward_compute_s"] = -1; }, "backward_compute_s -1"},
      {[](RunResult& r) { r.strategy_details["gradient_timeline"][1]["ready_s"] = -0.5; }, "ready at -0.5 s"},
      {[](RunResult& r) { r.strategy_details["gradient_timeline"][1]["ready_s"] = 10; }, "outside backward"},
      {[](RunResult& r) { r.strategy_details["gradient_timeline"][1]["parameter"] = 3; }, "parameter 3 listed twice"},
      {[](RunResult& r) { r.strategy_details["gradient_bytes_per_step"] = 5e6; }, "the buckets 5000000"},
      {[](RunResult& r) { r.strategy_details["compression_s_per_byte"] = {{"fp16", -1e-6}}; }, "compression_s_per_byte.fp16"},
      {[](RunResult& r) { r.strategy_details["backward_alone_s"] = "abc"; }, "backward_alone_s \"abc\""},
      {[](RunResult& r) { r.strategy_details["allreduce_alone"] = {{"fp32_s", -2}}; }, "allreduce_alone.fp32_s"},
      {[](RunResult& r) { r.config["comm-hook"] = "builtin-fp16"; }, "only ddpbench's own hooks"},
      {[](RunResult& r) { r.step_time_s = Quantiles{0.2, 0.1, 0.3}; }, "not the quantiles of a row's steps"},
      {[](RunResult& r) { r.step_time_s = Quantiles{0.2, 1e6, 0.3}; }, "not the quantiles of a row's steps"},
      {[](RunResult& r) { r.step_time_s = Quantiles{-0.1, 0.2, 0.3}; }, "step_time_s p50 -0.1"},
      {[](RunResult& r) { r.strategy_details["bucket_cap_bytes"] = 26214400; r.config["bucket-mb"] = 5; }, "which it ran is not known"},
      {[](RunResult& r) { r.strategy_details["overlap"] = false; }, "overlap true in its configuration, false"},
      {[](RunResult& r) {
         r.config["find-unused-parameters"] = true;
         r.strategy_details["gradient_bytes_per_step"] = 5e6;
       }, "produced no gradient in its steps (--find-unused-parameters)"},
  };
  EXPECT_EQ(why(good), "");
  for (const auto& [spoil, says] : cases) {
    RunResult r = good;
    spoil(r);
    const std::string reason = why(r);
    EXPECT_NE(reason.find(says), std::string::npos) << says << ": " << reason;
  }
}

TEST(TuningAdvice, RowsWithoutAGradientTimelineSayWhy) {
  RunResult r = row_of(std::vector<Gradient>(4, Gradient{1'000'000, 0.1}), 0.1);
  r.strategy_details.erase("gradient_timeline");
  const RowAdvice a = advise_row({&r}, on_link(10, 5), default_tuning_grid());
  EXPECT_NE(a.not_advised.find("no gradient timeline"), std::string::npos) << a.not_advised;
  EXPECT_NE(markdown_advice({a}, true).find("no advice: no gradient timeline"), std::string::npos);
  RunResult zero = row_of(std::vector<Gradient>(4, Gradient{1'000'000, 0.1}), 0.1);
  zero.strategy_details["gradient_timeline"][2]["bytes"] = 0;
  EXPECT_NE(advise_row({&zero}, on_link(10, 5), default_tuning_grid()).not_advised, "");
}

TEST(TuningAdvice, TheGridIsTheIssuesAndItsLabelsAndFlagsAreTheRunFlags) {
  const auto grid = default_tuning_grid();
  EXPECT_EQ(grid.size(), 36u);
  EXPECT_EQ(std::count(grid.begin(), grid.end(), kPyTorchDefaults), 1);
  EXPECT_EQ(setting_flags(kPyTorchDefaults), "(the defaults)");
  EXPECT_EQ(setting_flags({5, "bf16", false}), "--bucket-mb 5 --comm-hook bf16 --no-overlap");
  EXPECT_EQ(setting_label({0.5, "allreduce", true}), "0.5 MB, no hook, overlap");
  EXPECT_EQ(setting_flags({1e6, "allreduce", true}), "--bucket-mb 1000000") << "no 1e+06";
  EXPECT_EQ(setting_flags({0.001, "allreduce", true}), "--bucket-mb 0.001");
  const RunResult r = row_of(std::vector<Gradient>(8, Gradient{1'000'000, 0.1}), 0.1);
  const json j = advice_json({advise_row({&r}, on_link(10, 5, {8, 64}), grid)});
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["ranks"].size(), 2u);
  EXPECT_EQ(j[0]["ranks"][1]["settings"].size(), 36u);
  EXPECT_EQ(j[0]["measured_setting"]["flags"], "(the defaults)");
  EXPECT_NE(j[0]["not_modelled"].get<std::string>().find("accuracy"), std::string::npos);
}

// sweep --project F: the reports advise each DDP row at 8, 64 and 512 ranks on F; a fabric
// that cannot be used is one entry saying why, never a failed report.
TEST(TuningAdvice, ASweepCarriesItsAdviceIntoTheReports) {
  ResultDocument doc;
  doc.runs = {row_of(std::vector<Gradient>(8, Gradient{1'000'000, 0.1}), 0.1)};
  SweepInfo sweep;
  ProjectionOptions options;
  options.fabric = "ndr-ib";
  sweep.projection = projection_options_json(options);
  doc.sweep = sweep;
  const auto advice = sweep_advice(doc);
  ASSERT_TRUE(advice.has_value());
  ASSERT_EQ(advice->size(), 1u);
  ASSERT_EQ(advice->front().ranks.size(), 3u);
  EXPECT_EQ(advice->front().ranks[2].ranks, 512);
  EXPECT_EQ(advice->front().ranks[0].settings.size(), default_tuning_grid().size());
  const std::string md = markdown_advice(*advice, false);
  EXPECT_NE(md.find("### ddp (faithful) on ndr-ib"), std::string::npos) << md;
  EXPECT_EQ(md.find("Every setting"), std::string::npos) << "the reports give the advice, advise every setting";
  doc.sweep->projection["fabric"] = "nowhere";
  const auto bad = sweep_advice(doc);
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->front().not_advised.find("--fabric nowhere"), std::string::npos);
  doc.sweep.reset();
  EXPECT_FALSE(sweep_advice(doc).has_value());
}

// Every report of a sweep says when its advice is not to be trusted: the Markdown, the JSON and
// the HTML table alike (the HTML once showed the advice without the warning).
TEST(TuningAdvice, EveryReportSaysWhenTheAdviceIsNotToBeTrusted) {
  ResultDocument doc;
  doc.runs = {row_of(std::vector<Gradient>(8, Gradient{1'000'000, 0.1}), 0.1, {}, nullptr, 0.40)};  // 40 % off
  SweepInfo sweep;
  sweep.rows = {{"ddp", "faithful", 0, 2, ""}};
  sweep.projection = projection_options_json(ProjectionOptions{});
  doc.sweep = sweep;
  ASSERT_TRUE(advice_off(sweep_advice(doc)->front()));
  const std::string md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("## tuning advice"), std::string::npos);
  EXPECT_NE(md.find("**Not to be trusted", md.find("## tuning advice")), std::string::npos) << md;
  const std::string html = make_html_reporter()->render(doc);
  EXPECT_NE(html.find("<h2>Tuning advice</h2>"), std::string::npos);
  EXPECT_NE(html.find("(not to be trusted [1])"), std::string::npos) << "the mark in the row";
  EXPECT_NE(html.find("<li>[1] not to be trusted: the model is"), std::string::npos) << "its reason under the table";
  EXPECT_TRUE(json::parse(make_json_reporter()->render(doc))["advice"][0]["advice_off"].get<bool>());
}

// The Reducer's rule, by hand: a bucket closes once it reaches its limit, the crossing gradient
// in it; the first limit holds the first bucket only; dtypes fill buckets of their own.
TEST(BucketAssignment, ABucketClosesOnceItReachesItsLimit) {
  const std::vector<GradientSize> g = {{600, "Float"}, {600, "Float"}, {100, "Float"}, {2000, "Float"},
                                       {50, "Float"},  {1000, "Float"}, {1, "Float"}};
  using Buckets = std::vector<std::vector<std::size_t>>;
  EXPECT_EQ(assign_buckets(g, {1000, 1500}), (Buckets{{0, 1}, {2, 3}, {4, 5, 6}}));
  EXPECT_EQ(assign_buckets(g, {600}), (Buckets{{0}, {1}, {2, 3}, {4, 5}, {6}}));
  EXPECT_EQ(assign_buckets(g, {100000}), (Buckets{{0, 1, 2, 3, 4, 5, 6}}));
  const std::vector<GradientSize> mixed = {{600, "Float"}, {600, "Half"}, {600, "Float"}, {10, "Half"}};
  EXPECT_EQ(assign_buckets(mixed, {1000}), (Buckets{{0, 2}, {1, 3}}));
  EXPECT_EQ(ddp_bucket_limits(25), (std::vector<int64_t>{1 << 20, 25 << 20}));
  EXPECT_EQ(ddp_bucket_limits(5), (std::vector<int64_t>{5 << 20, 5 << 20}));
  EXPECT_THROW(assign_buckets(g, {}), std::invalid_argument);
  EXPECT_THROW(assign_buckets(g, {0}), std::invalid_argument);
}

}  // namespace
}  // namespace ddpbench
