#include <gtest/gtest.h>

#include <functional>

#include <cmath>

#include "harness/base/input_error.hpp"
#include "reports/projection.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

Fabric fabric(double intra_latency, double intra_bw, double inter_latency, double inter_bw, int64_t nics = 8) {
  return Fabric{"test", {intra_latency, intra_bw}, {inter_latency, inter_bw}, "by hand", nics};
}

// nccl-tests' ring: t = 2(n-1) a + 2(n-1)/n S/B; hierarchical: the node's ring on the whole
// buffer (reduce-scatter and all-gather), the nodes' ring on each rank's 1/k share.
TEST(Projection, AllreduceCostsFollowTheRingModelAtEachLevel) {
  const Fabric f = fabric(1e-6, 100e9, 10e-6, 10e9);
  const double s = 100e6;
  EXPECT_DOUBLE_EQ(allreduce_seconds(s, 1, 8, f), 0.0);
  EXPECT_DOUBLE_EQ(allreduce_seconds(s, 8, 8, f), 2 * 7 * 1e-6 + 2.0 * 7 / 8 * s / 100e9);   // one node
  EXPECT_DOUBLE_EQ(allreduce_seconds(s, 4, 1, f), 2 * 3 * 10e-6 + 2.0 * 3 / 4 * s / 10e9);   // one rank a node
  EXPECT_DOUBLE_EQ(allreduce_seconds(s, 64, 8, f),
                   (2 * 7 * 1e-6 + 2.0 * 7 / 8 * s / 100e9) + (2 * 7 * 10e-6 + 2.0 * 7 / 8 * (s / 8) / 10e9));
  // One NIC for the node: its 8 rings across nodes share it, each at an eighth of it.
  EXPECT_DOUBLE_EQ(allreduce_seconds(s, 64, 8, fabric(1e-6, 100e9, 10e-6, 10e9, 1)),
                   (2 * 7 * 1e-6 + 2.0 * 7 / 8 * s / 100e9) + (2 * 7 * 10e-6 + 2.0 * 7 / 8 * (s / 8) / (10e9 / 8)));
  // Two NICs for four ranks a node: each ring at half a NIC; more NICs than rings gain nothing.
  EXPECT_DOUBLE_EQ(allreduce_seconds(s, 16, 4, fabric(1e-6, 100e9, 10e-6, 10e9, 2)),
                   (2 * 3 * 1e-6 + 2.0 * 3 / 4 * s / 100e9) + (2 * 3 * 10e-6 + 2.0 * 3 / 4 * (s / 4) / (10e9 / 2)));
  EXPECT_DOUBLE_EQ(allreduce_seconds(s, 16, 4, fabric(1e-6, 100e9, 10e-6, 10e9, 16)),
                   allreduce_seconds(s, 16, 4, fabric(1e-6, 100e9, 10e-6, 10e9, 4)));
  // More ranks never make one bucket cheaper on one fabric.
  double previous = 0;
  for (int64_t n : {2, 4, 8, 16, 64, 512}) {
    const double t = allreduce_seconds(s, n, 8, f);
    EXPECT_GE(t, previous) << n;
    previous = t;
  }
}

TEST(Projection, TheLinkIsFittedBackFromItsOwnAllreduceTimes) {
  const int64_t ranks = 4;
  const Link truth{20e-6, 1.25e9};
  std::vector<std::pair<double, double>> samples;
  for (double s : {65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0}) {
    samples.emplace_back(s, 2 * (ranks - 1) * truth.latency_s + 2.0 * (ranks - 1) / ranks * s / truth.bytes_per_s);
  }
  const Link fitted = fit_link(samples, ranks);
  EXPECT_NEAR(fitted.latency_s, truth.latency_s, 1e-9);
  EXPECT_NEAR(fitted.bytes_per_s / truth.bytes_per_s, 1.0, 1e-9);
  EXPECT_THROW(fit_link({}, 2), InputError);
  EXPECT_THROW(fit_link({{1e6, 0.01}}, 1), InputError);
  EXPECT_THROW(fit_link({{1e6, 0.01}, {2e6, 0.005}}, 2), InputError) << "times that fall with the bytes fit nothing";
  // One size: the bandwidth that carries it in its time, latency unseen.
  const Link one_size = fit_link({{1e6, 0.01}}, 2);
  EXPECT_EQ(one_size.latency_s, 0.0);
  EXPECT_NEAR(one_size.bytes_per_s, 1e8, 1e-3);
}

// Each named fabric says how many NICs a node has; --nics-per-node overrides it, and a node of
// 8 ranks on one NIC is 8 times slower across nodes than one with a NIC per GPU.
TEST(AdversarialProjection, OneNicForEightRanksIsNotEightNics) {
  EXPECT_EQ(named_fabric("ndr-ib", "--fabric").nics_per_node, 8);
  EXPECT_EQ(named_fabric("hdr-ib", "--fabric").nics_per_node, 8);
  EXPECT_EQ(named_fabric("ethernet-100g", "--fabric").nics_per_node, 1);
  const double s = 100e6;
  Fabric rails = named_fabric("ndr-ib", "--fabric");
  Fabric one_nic = rails;
  one_nic.nics_per_node = 1;
  const double intra = allreduce_seconds(s, 8, 8, rails);
  const double across_rails = allreduce_seconds(s, 64, 8, rails) - intra;
  const double across_one = allreduce_seconds(s, 64, 8, one_nic) - intra;
  const double latency = 2 * 7 * rails.inter.latency_s;
  EXPECT_NEAR((across_one - latency) / (across_rails - latency), 8.0, 1e-9);
  const RunResult r = [] {
    RunResult row;
    row.name = "ddp";
    row.strategy = "ddp";
    row.world_size = 2;
    row.global_batch = 64;
    row.steady_images_per_s = 128;
    row.mean_phase_s = PhaseSeconds{0.01, 0.09, 0.30, 0.05, 0.05, 0.25, 0, 0};
    row.strategy_details = {{"backward_compute_s", 0.3},
                            {"bucket_timeline", json::array({{{"bucket", 0}, {"bytes", 100e6}, {"ready_s", 0.3},
                                                              {"allreduce_s", 0.1}}})}};
    return row;
  }();
  ProjectionOptions options;
  options.ranks = {64};
  options.fabric = "ndr-ib";
  const RowProjection with_rails = project_row({&r}, options);
  options.nics_per_node = 1;
  const RowProjection with_one = project_row({&r}, options);
  EXPECT_EQ(with_rails.fabric.nics_per_node, 8);
  EXPECT_EQ(with_one.fabric.nics_per_node, 1);
  EXPECT_GT(with_one.points[0].comm_s, 3 * with_rails.points[0].comm_s) << "the NVLink part is the same";
  EXPECT_NE(markdown_projection({with_one}).find("1 NIC a node"), std::string::npos);
  EXPECT_EQ(projection_options_from_json(projection_options_json(options)).nics_per_node, 1);
}

TEST(Projection, TheLinkOfAMicrobenchmarksJsonIsItsLargestWorlds) {
  json doc = {{"benchmarks", json::array()}};
  for (double bytes : {1e6, 4e6}) {
    // 2 ranks: 1 GB/s, no latency; 4 ranks: 0.5 GB/s.
    doc["benchmarks"].push_back({{"name", "BM_GlooAllreduce"}, {"run_type", "iteration"}, {"real_time", bytes / 1e9 * 1e6},
                                 {"time_unit", "us"}, {"bytes", bytes}, {"ranks", 2}});
    doc["benchmarks"].push_back({{"name", "BM_RankAllreduce"}, {"run_type", "iteration"},
                                 {"real_time", 1.5 * bytes / 0.5e9 * 1e3}, {"time_unit", "ms"}, {"bytes", bytes},
                                 {"ranks", 4}});
  }
  doc["benchmarks"].push_back({{"name", "BM_GlooAllreduceOneRank"}, {"real_time", 5.0}, {"bytes", 1e6}, {"ranks", 1}});
  const MeasuredLink m = link_from_microbenchmark(doc, "mb.json");
  EXPECT_EQ(m.ranks, 4);
  EXPECT_NEAR(m.link.bytes_per_s, 0.5e9, 1e3);
  EXPECT_THROW(link_from_microbenchmark(json{{"benchmarks", json::array()}}, "empty.json"), InputError);
  EXPECT_THROW(link_from_microbenchmark(json::array(), "not.json"), InputError);
}

// Only the multi-process allreduce measures a link: BM_GlooAllreduce (two threads of one
// process over loopback) reports 2 ranks too, and mixed in it made a 25 MB/s link 711 MB/s.
TEST(AdversarialProjection, CalibrationTakesTheMultiProcessAllreduceOnly) {
  json doc = {{"benchmarks", json::array()}};
  for (double bytes : {1e6, 4e6, 16e6}) {
    doc["benchmarks"].push_back({{"name", "BM_GlooAllreduce/" + std::to_string(static_cast<int>(bytes))},
                                 {"run_type", "iteration"}, {"real_time", bytes / 2e9 * 1e3}, {"time_unit", "ms"},
                                 {"bytes", bytes}, {"ranks", 2}});
    doc["benchmarks"].push_back({{"name", "BM_RankAllreduce/" + std::to_string(static_cast<int>(bytes))},
                                 {"run_type", "iteration"}, {"real_time", bytes / 25e6 * 1e3}, {"time_unit", "ms"},
                                 {"bytes", bytes}, {"ranks", 2}});
  }
  const MeasuredLink m = link_from_microbenchmark(doc, "mb.json");
  EXPECT_NEAR(m.link.bytes_per_s, 25e6, 1.0);
  json loopback_only = {{"benchmarks", json::array()}};
  for (const auto& b : doc["benchmarks"]) {
    if (b["name"].get<std::string>().rfind("BM_Gloo", 0) == 0) loopback_only["benchmarks"].push_back(b);
  }
  try {
    link_from_microbenchmark(loopback_only, "threads.json");
    FAIL() << "a file without BM_RankAllreduce was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--calibrate threads.json: no BM_RankAllreduce entry"), std::string::npos)
        << e.what();
  }
}

// A DDP row measured at 2 ranks: two buckets made ready 0.1 s and 0.2 s into backward, whose
// compute ends at 0.3 s; each allreduce took (bytes / 1 GB/s) at 2 ranks.
RunResult measured_row(const std::string& hook = "allreduce") {
  RunResult r;
  r.name = "ddp";
  r.mode = "faithful";
  r.strategy = "ddp";
  r.world_size = 2;
  r.global_batch = 64;
  r.steady_images_per_s = 64 / 0.5;
  r.mean_phase_s = PhaseSeconds{0.01, 0.09, 0.30, 0.05, 0.05, 0.25, 0, 0};
  r.config = {{"comm-hook", hook}, {"batch-size", 32}};
  r.strategy_details = {{"backward_compute_s", 0.3},
                        {"bucket_timeline", json::array({{{"bucket", 0}, {"bytes", 150e6}, {"ready_s", 0.1}, {"allreduce_s", 0.15}},
                                                         {{"bucket", 1}, {"bytes", 100e6}, {"ready_s", 0.2}, {"allreduce_s", 0.10}}})}};
  return r;
}

// measured_row with SyncBatchNorm in two layers (64 and 128 channels) and 1000 bytes of buffers,
// its collectives recorded apart: 10 ms waited in forward, 20 ms in backward, a step.
void with_sync_bn(RunResult& r) {
  r.strategy_details["sync_bn_layers"] = 2;
  r.strategy_details["sync_bn_features"] = json::array({64, 128});
  r.strategy_details["broadcast_buffer_bytes"] = 1000;
  r.mean_phase_s.collective_wait_s = 0.03;
  r.mean_phase_s.forward_collective_wait_s = 0.01;
}

// One set of rules for what the step model reads, in project and advise alike (the second
// attack: project projected from a negative backward, a bucket ready before backward began and
// an unmeasured optimizer, which advise refused, and exited 0 over a table of dashes).
TEST(AdversarialProjection, ProjectRefusesTheStepInputsAdviseRefuses) {
  ProjectionOptions options;
  options.ranks = {2, 4};
  const auto not_projected = [&](const std::function<void(RunResult&)>& edit) {
    RunResult r = measured_row();
    edit(r);
    const RowProjection p = project_row({&r}, options);
    EXPECT_EQ(p.not_projected, step_model_problem(r)) << "project and advise read the row by the same rules";
    return p.not_projected;
  };
  EXPECT_EQ(not_projected([](RunResult&) {}), "");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["backward_compute_s"] = -1; }),
            "backward_compute_s -1: not a time");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_timeline"][1]["ready_s"] = -5; }),
            "bucket_timeline: a bucket ready at -5 s, outside backward (0 to 0.3 s)");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_timeline"][0]["bytes"] = 0; }),
            "bucket_timeline: a bucket of 0 bytes");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_timeline"][1]["wire_s"] = -1; }),
            "bucket_timeline: a bucket's wire_s -1: not a time");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_timeline"][1]["start_s"] = -0.1; }),
            "bucket_timeline: a bucket's start_s -0.1: not a time");
  // None on the wire is what a bucket done wholly beside another recorded (Gloo runs two).
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_timeline"][1]["wire_s"] = 0; }), "");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_timeline"][0]["allreduce_s"] = "x"; }),
            "bucket_timeline: a bucket's allreduce_s \"x\": not a time");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_timeline"][0]["wire_s"] = nullptr; }), "");
  EXPECT_EQ(not_projected([](RunResult& r) { r.mean_phase_s.optimizer_s = kNotMeasured; }),
            "mean_phase_s.optimizer_s null: not a time its steps spent");
  EXPECT_EQ(not_projected([](RunResult& r) { r.mean_phase_s.forward_s = -0.5; }),
            "mean_phase_s.forward_s -0.5: not a time its steps spent");
  // SyncBatchNorm's collectives wait inside forward and backward: the default DDP row, slower
  // measured than the one without, projected to 85 % at 8 ranks where it ran at 36 %.
  // A file that does not record those waits apart cannot be projected from.
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["sync_bn_layers"] = 53; }),
            "SyncBatchNorm across 2 ranks (53 layers): the file does not record the waits in its collectives apart "
            "from forward's and backward's compute (mean_phase_s.forward_collective_wait_s, "
            "strategy_details.sync_bn_features), so the model cannot cost them at other world sizes; run the row "
            "again with this build, or with --no-sync-bn");
  // Measured on one rank, where they do not communicate, its projection left out what they cost at
  // 8 and 64 ranks (99.5 % at 8).
  EXPECT_NE(not_projected([](RunResult& r) {
              r.strategy_details["sync_bn_layers"] = 53;
              r.world_size = 1;
            }).find("SyncBatchNorm across 1 rank (53 layers)"),
            std::string::npos);
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["sync_bn_layers"] = 0; }), "");
  // Recorded apart, a wait longer than its phase leaves no compute, and a layer count the
  // features do not hold is no record of them.
  EXPECT_EQ(not_projected([](RunResult& r) {
              with_sync_bn(r);
              r.mean_phase_s.forward_collective_wait_s = 0.2;
              r.mean_phase_s.collective_wait_s = 0.25;
            }),
            "its collectives inside forward waited 200.0 ms a step, forward took 90.0 ms: no compute is left to model");
  EXPECT_EQ(not_projected([](RunResult& r) {
              with_sync_bn(r);
              r.mean_phase_s.collective_wait_s = 0.4;
            }),
            "its collectives inside backward waited 390.0 ms a step, backward's compute took 300.0 ms: no compute is "
            "left to model");
  EXPECT_EQ(not_projected([](RunResult& r) {
              with_sync_bn(r);
              r.strategy_details["sync_bn_layers"] = 3;
            }),
            "strategy_details.sync_bn_features: 2 layers where sync_bn_layers says 3");
  // Figures no row writes are named, never multiplied into nothing (the first attack on the models:
  // 2^62 channels overflowed into a layer that cost nothing), and features with no layer count
  // are no row without SyncBatchNorm (its waits were taken for compute).
  EXPECT_EQ(not_projected([](RunResult& r) {
              with_sync_bn(r);
              r.strategy_details["sync_bn_features"] = json::array({int64_t{1} << 62, 16});
            }),
            "strategy_details.sync_bn_features: a layer of 4611686018427387904 channels");
  EXPECT_EQ(not_projected([](RunResult& r) {
              with_sync_bn(r);
              r.strategy_details.erase("sync_bn_layers");
            }),
            "strategy_details.sync_bn_features lists 2 layers where sync_bn_layers says none");
  EXPECT_EQ(not_projected([](RunResult& r) {
              with_sync_bn(r);
              r.strategy_details["broadcast_buffer_bytes"] = 1e300;
            }),
            "strategy_details.broadcast_buffer_bytes 1e+300: not a size");
  EXPECT_EQ(not_projected([](RunResult& r) {
              with_sync_bn(r);
              r.mean_phase_s.collective_wait_s = kNotMeasured;
            }),
            "mean_phase_s.collective_wait_s not recorded: forward's part of it cannot be told from backward's");
  // A traced row's timeline holds its profiled steps, which its phases leave out.
  EXPECT_NE(not_projected([](RunResult& r) {
              r.trace.first_step = 3;
              r.trace.last_step = 10;
            }).find("a traced row (--trace-steps)"),
            std::string::npos);
  // A bucket's bytes are the Reducer's bucket's (the ninth attack: a timeline's bytes divided by
  // 10 projected the allreduce at 8 ranks to a sixth).
  EXPECT_EQ(not_projected([](RunResult& r) {
              r.strategy_details["bucket_bytes"] = json::array({150e6, 100e6});
              r.strategy_details["bucket_timeline"][1]["bytes"] = 10e6;
            }),
            "bucket_timeline: bucket 1 of 10000000.0 bytes, where bucket_bytes says 100000000.0");
  EXPECT_EQ(not_projected([](RunResult& r) { r.strategy_details["bucket_bytes"] = json::array({150e6, 100e6}); }), "");
  // A row the proof failed says why it cannot be projected, not that it never reached a steady state.
  RunResult failed = measured_row();
  failed.status = RunStatus::failed;
  failed.reason = "did less work than configured: it trained 3 of the 16 steps";
  EXPECT_EQ(project_row({&failed}, options).not_projected,
            "no repetition ran to a steady state (repetition 0: failed: did less work than configured: it trained 3 "
            "of the 16 steps)");
}

// SyncBatchNorm's collectives are communication (issue 55, item 4): their waits at the measured
// ranks come out of forward's and backward's compute, and each world size costs them again on
// the fabric: per layer a [ranks, 2C+1] sum in forward and a 2C sum in backward, ring-allreduced,
// and the buffers' broadcast as a chain. Backward's sums, spread evenly through its compute, run
// on the one stream behind the buckets launched before them, backward waiting for each. One rank
// waits for nobody.
TEST(Projection, SyncBatchNormCollectivesAreCostedAsCommunicationAtEachWorldSize) {
  RunResult r = measured_row();
  with_sync_bn(r);
  ProjectionOptions options;
  options.ranks = {1, 4};
  options.ranks_per_node = 8;
  options.fabric = "hdr-ib";
  options.latency_us = 10;  // both levels: 10 us a ring step
  options.intra_node_gbps = 8;  // 1 GB/s
  const RowProjection p = project_row({&r}, options);
  ASSERT_EQ(p.not_projected, "");
  EXPECT_EQ(p.sync_bn_layers, 2);
  EXPECT_NEAR(p.measured_collective_wait_s, 0.03, 1e-12);
  ASSERT_EQ(p.points.size(), 2u);
  // One rank: data + forward's compute + backward's compute + optimizer, the waits left out.
  EXPECT_NEAR(p.points[0].step_s, 0.01 + (0.09 - 0.01) + (0.30 - 0.02) + 0.05, 1e-12);
  EXPECT_EQ(p.points[0].in_step_collectives_s, 0);
  // Four ranks on one node: 2(n-1) = 6 ring steps an allreduce, 3 hops the broadcast.
  const double latency = 10e-6, bandwidth = 1e9;
  const auto ring = [&](double bytes) { return 6 * latency + 1.5 * bytes / bandwidth; };
  double forward = 3 * latency + 1000 / bandwidth;
  for (const double c : {64.0, 128.0}) forward += ring(4 * (2 * c + 1) * 4);  // the gather as a sum
  const double sum_128 = ring(2 * 128 * 4), sum_64 = ring(2 * 64 * 4);
  EXPECT_NEAR(p.points[1].in_step_collectives_s, forward + sum_128 + sum_64, 1e-12);
  // Backward's 0.28 s of compute: the last layer's sum (128 channels) at 0.07 s, the first's at
  // 0.21 s; the buckets ready at 0.1 and 0.2 of the measured 0.3 s, now 0.28/0.3 of them.
  const double r0 = 0.1 * 0.28 / 0.3, r1 = 0.2 * 0.28 / 0.3;
  double wall = 0.07 + sum_128;                                   // nothing on the stream: at once
  double stream = wall;
  wall += r0 - 0.07;
  stream = std::max(stream, wall) + ring(150e6);                  // bucket 0, launched and left running
  wall += r1 - r0;
  stream = std::max(stream, wall) + ring(100e6);                  // bucket 1 behind it
  wall += 0.21 - r1;
  stream = std::max(stream, wall) + sum_64;                       // the sum behind both buckets,
  wall = stream;                                                  // backward waiting for it
  wall += 0.28 - 0.21;
  EXPECT_NEAR(p.points[1].step_s, 0.01 + (0.09 - 0.01) + forward + std::max(wall, stream) + 0.05, 1e-12);
  EXPECT_NEAR(p.points[1].comm_s, ring(150e6) + ring(100e6), 1e-12);
}

// On the link the row's own buckets measured (no latency seen there), the latency is the one its
// SyncBatchNorm collectives waited in forward (backward's sums wait behind the buckets): their time
// past their bytes', over the ring steps.
TEST(Projection, ALinkWithoutLatencyTakesTheOneSyncBatchNormWaitedInForward) {
  RunResult r = measured_row();
  with_sync_bn(r);
  ProjectionOptions options;
  options.ranks = {2, 8};
  const RowProjection p = project_row({&r}, options);
  ASSERT_EQ(p.not_projected, "");
  const double bandwidth = p.measured_link.intra.bytes_per_s;
  ASSERT_GT(bandwidth, 0);
  // Two ranks: 2 ring steps a gather, 2 layers, 1 hop the broadcast; 2(n-1)/n = 1 of each gather's
  // [2, 2C+1] floats; the broadcast's 1000 bytes once.
  const double bytes_s = (1000 + 2 * (2 * 64 + 1) * 4 + 2 * (2 * 128 + 1) * 4) / bandwidth;
  EXPECT_NEAR(p.measured_link.intra.latency_s, (0.01 - bytes_s) / 5, 1e-12);
  EXPECT_NE(p.measured_link.source.find("the latency from its SyncBatchNorm collectives' waits in forward"),
            std::string::npos);
  EXPECT_EQ(p.measured_link.source.find("latency unseen"), std::string::npos) << p.measured_link.source;
  EXPECT_NEAR(p.fabric.intra.latency_s, p.measured_link.intra.latency_s, 1e-15);
  // Without SyncBatchNorm, nothing to take one from: the link keeps none.
  const RowProjection plain = project_row({&(r = measured_row())}, options);
  EXPECT_EQ(plain.measured_link.intra.latency_s, 0);
}

TEST(Projection, BucketsRunOneAfterAnotherFromWhenBackwardMadeThemReady) {
  const RunResult r = measured_row();
  ProjectionOptions options;
  options.ranks = {1, 2, 4};
  options.ranks_per_node = 1;
  const RowProjection p = project_row({&r}, options);
  ASSERT_TRUE(p.not_projected.empty()) << p.not_projected;
  // The link fitted to the row's own buckets: no latency, 2(n-1)/n S / t = 1 GB/s.
  EXPECT_NEAR(p.measured_link.intra.bytes_per_s, 1e9, 1.0);
  EXPECT_NEAR(p.measured_link.intra.latency_s, 0.0, 1e-12);
  // At 2 ranks: bucket 0 from 0.1 to 0.25, bucket 1 from 0.25 (busy stream) to 0.35;
  // backward's compute ends at 0.3, so 0.05 s is exposed: 0.01 + 0.09 + 0.35 + 0.05.
  ASSERT_EQ(p.points.size(), 3u);
  const ProjectedPoint& two = p.points[1];
  EXPECT_NEAR(two.step_s, 0.50, 1e-12);
  EXPECT_NEAR(two.exposed_comm_s, 0.05, 1e-12);
  EXPECT_NEAR(two.comm_s, 0.25, 1e-12);
  EXPECT_NEAR(p.model_step_s, 0.50, 1e-12) << "the model at the measured ranks and link";
  EXPECT_NEAR(p.points[0].step_s, 0.45, 1e-12) << "one rank: no allreduce";
  EXPECT_NEAR(p.points[0].speedup, 1.0, 1e-12);
  EXPECT_NEAR(two.images_per_s, 2 * 32 / 0.50, 1e-9);
  EXPECT_NEAR(two.speedup, 2 * 0.45 / 0.50, 1e-12);
  EXPECT_NEAR(two.scaling_efficiency, 0.45 / 0.50, 1e-12);
  // At 4 ranks each allreduce costs 1.5x: 0.225 and 0.15, the stream busy until 0.475.
  EXPECT_NEAR(p.points[2].step_s, 0.01 + 0.09 + 0.1 + 0.225 + 0.15 + 0.05, 1e-12);
  // A row without overlap held both buckets until backward ended (0.3): 0.3 to 0.45 to 0.55.
  RunResult held = r;
  held.config["overlap"] = false;
  const RowProjection q = project_row({&held}, options);
  ASSERT_TRUE(q.not_projected.empty()) << q.not_projected;
  EXPECT_NEAR(q.points[1].step_s, 0.01 + 0.09 + 0.55 + 0.05, 1e-12);
  EXPECT_NEAR(q.points[1].exposed_comm_s, 0.25, 1e-12);
}

// A row projected from the median of the repetitions that ran to a steady state said nothing of
// the ones it left out (advise said it).
TEST(Projection, TheRepetitionsLeftOutAreSaid) {
  RunResult r = measured_row();
  RunResult failed = r;
  failed.repetition = 1;
  failed.status = RunStatus::failed;
  ProjectionOptions options;
  options.ranks = {1, 2};
  options.ranks_per_node = 1;
  const RowProjection p = project_row({&r, &failed}, options);
  ASSERT_TRUE(p.not_projected.empty()) << p.not_projected;
  EXPECT_EQ(p.repetitions_left_out, 1);
  EXPECT_NE(markdown_projection({p}).find("1 of its repetitions did not run to a steady state and are left out"),
            std::string::npos)
      << markdown_projection({p});
  EXPECT_EQ(project_row({&r}, options).repetitions_left_out, 0);
}

// The default link is fitted to each bucket's time on the wire. Held to backward's end (overlap
// off), three buckets launch at once and run one after another: launch to completion, the
// third took three buckets' time, and a link fitted to that made the model, which serialises
// them again, about twice the measured step (+80-100 % on real rows). The model, set at its
// own point, is then checked against the measured step: more than 15 % off is said, first.
TEST(AdversarialProjection, TheDefaultLinkIsFittedToTheTimeOnTheWire) {
  RunResult r = measured_row();
  r.config = {{"overlap", false}};
  r.mean_phase_s = PhaseSeconds{0.01, 0.09, 0.60, 0.30, 0.05, 0.30, 0, 0};
  // 1 GB/s at 2 ranks: 100 MB take 0.1 s. Launched together at 0.3 s, done at 0.4, 0.5, 0.6.
  json timeline = json::array();
  for (int b = 0; b < 3; ++b) {
    timeline.push_back({{"bucket", b}, {"bytes", 100e6}, {"ready_s", 0.1 * (b + 1)}, {"start_s", 0.3},
                        {"allreduce_s", 0.1 * (b + 1)}});
  }
  r.strategy_details = {{"backward_compute_s", 0.3}, {"bucket_timeline", timeline}};
  r.steady_images_per_s = 64 / (0.01 + 0.09 + 0.3 + 0.3 + 0.05);  // as measured: 0.75 s
  ProjectionOptions options;
  options.ranks = {2, 4};
  options.ranks_per_node = 1;
  const RowProjection p = project_row({&r}, options);
  ASSERT_TRUE(p.not_projected.empty()) << p.not_projected;
  EXPECT_NEAR(p.measured_link.intra.bytes_per_s, 1e9, 1.0) << p.measured_link.source;
  EXPECT_NEAR(p.model_step_s, 0.75, 1e-9);
  EXPECT_NEAR(p.model_error, 0.0, 1e-9);
  EXPECT_FALSE(model_off(p));
  EXPECT_NE(p.measured_link.source.find("total time on the wire"), std::string::npos);
  // Recorded wire times are taken as they are.
  RunResult recorded = r;
  for (auto& b : recorded.strategy_details["bucket_timeline"]) b["wire_s"] = 0.1;
  EXPECT_NEAR(project_row({&recorded}, options).measured_link.intra.bytes_per_s, 1e9, 1.0);
  // Gloo runs two allreduces at once: a bucket done wholly beside another has no time of its
  // own on the wire, but its bytes crossed it (left out, they made the link 20 % slow on
  // emulated links): 300 MB in 0.3 s is 1 GB/s.
  RunResult beside = recorded;
  beside.strategy_details["bucket_timeline"][1]["wire_s"] = 0.2;
  beside.strategy_details["bucket_timeline"][2]["wire_s"] = 0.0;
  EXPECT_NEAR(project_row({&beside}, options).measured_link.intra.bytes_per_s, 1e9, 1.0);
  // A row whose model misses its own measured step by more than 15 % is said to, first.
  RunResult missed = r;
  missed.steady_images_per_s = 64 / 1.0;  // measured 1.0 s; the model says 0.75 s
  const RowProjection q = project_row({&missed}, options);
  EXPECT_NEAR(q.model_error, -0.25, 1e-9);
  EXPECT_TRUE(model_off(q));
  const std::string md = markdown_projection({q});
  EXPECT_EQ(md.rfind("\n**Not to be trusted: ddp (faithful)'s model, set at its 2 measured ranks on the link measured "
                     "there, is -25.0 % off the step it measured", 0),
            0u)
      << md;
  EXPECT_TRUE(projection_json({q})[0]["model_off"].get<bool>());
  EXPECT_EQ(markdown_projection({p}).find("Not to be trusted"), std::string::npos);
}

// The check is never skipped in silence: a row of one rank is checked with no link at all (its
// model has no allreduce), and a row whose allreduces were never timed on the wire, projected
// to a named fabric, is said to be unchecked.
TEST(AdversarialProjection, NoRowEscapesTheCheck) {
  RunResult one;
  one.name = "ddp";
  one.strategy = "ddp";
  one.world_size = 1;
  one.global_batch = 64;
  one.steady_images_per_s = 64 / 0.0116;  // measured 11.6 ms
  one.mean_phase_s = PhaseSeconds{0.0, 0.0001, 0.0019, 0, 0, 0, 0, 0};
  one.strategy_details = {{"backward_compute_s", 0.0019},
                          {"bucket_timeline", json::array({{{"bucket", 0}, {"bytes", 1e6}, {"ready_s", 0.001},
                                                            {"allreduce_s", 0.0}, {"wire_s", 0.0}}})}};
  ProjectionOptions options;
  options.ranks = {8, 64};
  options.fabric = "hdr-ib";
  const RowProjection p = project_row({&one}, options);
  ASSERT_TRUE(p.not_projected.empty()) << p.not_projected;
  EXPECT_NEAR(p.model_step_s, 0.002, 1e-12);
  EXPECT_TRUE(model_off(p)) << p.model_error;
  RunResult untimed = one;
  untimed.world_size = 2;
  untimed.global_batch = 128;
  untimed.steady_images_per_s = 128 / 0.002;
  const RowProjection q = project_row({&untimed}, options);
  ASSERT_TRUE(q.not_projected.empty()) << q.not_projected;
  EXPECT_FALSE(q.unchecked.empty());
  EXPECT_TRUE(model_off(q));
  EXPECT_NE(markdown_projection({q}).find("**Not to be trusted: ddp's model could not be set at its own measured point"),
            std::string::npos)
      << markdown_projection({q});
}

// A row that measured no link (one rank; or allreduces never timed on the wire) projected to a
// named fabric printed "Link measured: 0 s latency, 0 B/s ()": it says what is known instead.
TEST(AdversarialProjection, ALinkNotMeasuredIsSaidNotPrintedAsZeroBytesPerSecond) {
  RunResult one;
  one.name = "ddp";
  one.strategy = "ddp";
  one.world_size = 1;
  one.global_batch = 64;
  one.steady_images_per_s = 64 / 0.0116;
  one.mean_phase_s = PhaseSeconds{0.0, 0.0001, 0.0019, 0, 0, 0, 0, 0};
  one.strategy_details = {{"backward_compute_s", 0.0019},
                          {"bucket_timeline", json::array({{{"bucket", 0}, {"bytes", 1e6}, {"ready_s", 0.001},
                                                            {"allreduce_s", 0.0}, {"wire_s", 0.0}}})}};
  ProjectionOptions options;
  options.ranks = {8};
  options.fabric = "hdr-ib";
  const std::string md = markdown_projection({project_row({&one}, options)});
  EXPECT_EQ(md.find("0 B/s"), std::string::npos) << md;
  EXPECT_EQ(md.find("()"), std::string::npos) << md;
  EXPECT_NE(md.find("No link measured (measured on one rank, which crosses no link). Projected to: hdr-ib"),
            std::string::npos)
      << md;
  RunResult untimed = one;
  untimed.world_size = 2;
  untimed.global_batch = 128;
  untimed.steady_images_per_s = 128 / 0.002;
  const std::string md2 = markdown_projection({project_row({&untimed}, options)});
  EXPECT_NE(md2.find("No link measured (no bucket allreduce was timed on the wire, so no link was measured to set the "
                     "model on). Projected to: hdr-ib"),
            std::string::npos)
      << md2;
  // A measured link still prints its figures.
  const RunResult timed = measured_row();
  const std::string md3 = markdown_projection({project_row({&timed}, options)});
  EXPECT_NE(md3.find("Link measured: 0.0 us latency, "), std::string::npos) << md3;
  EXPECT_EQ(md3.find("B/s ()"), std::string::npos) << md3;
}

TEST(Projection, CompressionHalvesTheBytesOnTheWire) {
  const RunResult plain = measured_row();
  RunResult fp16 = measured_row("fp16");
  ProjectionOptions options;
  options.ranks = {8};
  options.fabric = "hdr-ib";
  const RowProjection a = project_row({&plain}, options);
  const RowProjection b = project_row({&fp16}, options);
  ASSERT_TRUE(a.not_projected.empty() && b.not_projected.empty());
  EXPECT_NEAR(b.points[0].comm_s / a.points[0].comm_s, 0.5, 0.05) << "latency aside, half the bytes";
  EXPECT_EQ(b.fabric.name, "hdr-ib");
}

TEST(Projection, RowsWithoutATimelineOrALinkSayWhy) {
  RunResult builtin = measured_row("builtin-fp16");
  builtin.strategy_details = {{"comm_hook", "the Reducer's built-in FP16_COMPRESS"}};
  EXPECT_NE(project_row({&builtin}, {}).not_projected.find("no bucket timeline"), std::string::npos);
  RunResult one = measured_row();
  one.world_size = 1;
  EXPECT_NE(project_row({&one}, {}).not_projected.find("measured on one rank"), std::string::npos);
  ProjectionOptions named;
  named.fabric = "ndr-ib";
  EXPECT_TRUE(project_row({&one}, named).not_projected.empty()) << "a fabric needs no measured link";
  named.fabric = "carrier-pigeon";
  EXPECT_THROW(project_row({&one}, named), InputError);
}

TEST(Projection, ASweepCarriesItsProjectionIntoTheReports) {
  ResultDocument doc;
  doc.runs = {measured_row()};
  SweepInfo sweep;
  ProjectionOptions options;
  options.ranks = {2, 16};
  options.fabric = "ndr-ib";
  sweep.projection = projection_options_json(options);
  doc.sweep = sweep;
  const auto projections = sweep_projections(doc);
  ASSERT_TRUE(projections.has_value());
  ASSERT_EQ(projections->size(), 1u);
  EXPECT_EQ(projections->front().points.size(), 2u);
  EXPECT_EQ(projection_options_from_json(sweep.projection).ranks, (std::vector<int64_t>{2, 16}));
  const std::string md = markdown_projection(*projections);
  EXPECT_NE(md.find("### ddp (faithful) on ndr-ib"), std::string::npos) << md;
  EXPECT_NE(md.find("| 16 | "), std::string::npos) << md;
  const json j = projection_json(*projections);
  EXPECT_EQ(j[0]["points"][1]["ranks"], 16);
  doc.sweep->projection["fabric"] = "nowhere";
  const auto bad = sweep_projections(doc);
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->front().not_projected.find("--fabric nowhere"), std::string::npos);
}

}  // namespace
}  // namespace ddpbench
