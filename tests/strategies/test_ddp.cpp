#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "data/synthetic.hpp"
#include "harness/control/run_config.hpp"
#include "harness/runner/runner.hpp"
#include "models/registry.hpp"
#include "reports/bucket_assignment.hpp"
#include "reports/tuning_advice.hpp"
#include "strategies/ddp.hpp"
#include "strategies/single.hpp"
#include "support/prepared_training.hpp"
#include "support/rank_threads.hpp"

namespace ddpbench {
namespace {

constexpr int64_t kBatch = 8;  // per rank

Batch batch_for(int64_t first, int64_t count) {
  static const auto data = make_synthetic({2, 64, 8});
  return Batch{(data.train.images.narrow(0, first, count).to(at::kFloat) / 255.0 - 0.5) / 0.5,
               data.train.labels.narrow(0, first, count)};
}

// One set of initial weights per model for every rank of a test, drawn before any rank
// thread starts: the global generator is shared by the threads.
torch::nn::AnyModule initial_model(const std::string& name = "tiny", int64_t classes = 10) {
  static std::mutex mutex;
  static std::map<std::string, torch::nn::AnyModule> models;
  std::lock_guard lock(mutex);
  const std::string key = name + "/" + std::to_string(classes);
  if (models.count(key) == 0) {
    torch::manual_seed(11);
    models.emplace(key, find_model(name).make(classes));
  }
  return models.at(key).clone();
}

// Everything a strategy is prepared with, for one rank of a test.
struct Rank : testing::PreparedTraining {
  Rank(torch::nn::AnyModule m, const RunConfig& config, std::shared_ptr<Communicator> comm, int64_t rank,
       int64_t world, c10::Device device = c10::kCPU)
      : PreparedTraining(std::move(m), device, strategy_options(config), 0.1, config.amp) {
    dist.rank = rank;
    dist.world_size = world;
    dist.comm = std::move(comm);
  }
  [[nodiscard]] std::vector<at::Tensor> state() const {
    std::vector<at::Tensor> out;
    for (const auto& p : model.ptr()->parameters()) out.push_back(p.detach().clone());
    for (const auto& b : model.ptr()->buffers()) out.push_back(b.detach().clone());
    return out;
  }
};

// Parameters and buffers after `steps` steps on rank `rank`, which trains on samples
// [rank * per_rank, (rank + 1) * per_rank) of every step's world batch.
std::vector<at::Tensor> train(std::unique_ptr<Strategy> strategy, const RunConfig& config,
                              std::shared_ptr<Communicator> comm, int64_t rank, int64_t world, int steps,
                              int64_t per_rank) {
  Rank r(initial_model(), config, std::move(comm), rank, world);
  r.prepare(*strategy);
  for (int s = 0; s < steps; ++s) {
    strategy->train_step(batch_for(s * world * per_rank % 48 + rank * per_rank, per_rank));
  }
  return r.state();
}

std::vector<at::Tensor> train_single(const RunConfig& config, int steps, int64_t batch) {
  return train(make_single_strategy(strategy_options(config)), config, nullptr, 0, 1, steps, batch);
}

// Runs `body` on every rank of a world and returns what each returned, by rank.
template <class T>
std::map<int64_t, T> on_ranks(int64_t world, const std::function<T(int64_t, std::shared_ptr<Communicator>)>& body) {
  std::mutex mutex;
  std::map<int64_t, T> results;
  testing::run_ranks(world, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
    T value = body(rank, std::move(comm));
    std::lock_guard lock(mutex);
    results[rank] = std::move(value);
  });
  return results;
}

std::vector<at::Tensor> train_ddp(int64_t world, const RunConfig& config, int steps, int64_t per_rank = kBatch) {
  initial_model();
  auto results = on_ranks<std::vector<at::Tensor>>(world, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
    return train(make_ddp_strategy(strategy_options(config)), config, std::move(comm), rank, world, steps, per_rank);
  });
  // Parameters end bitwise identical on every rank; so do the buffers with SyncBatchNorm
  // (without it each rank's running statistics follow its own batch until the next
  // forward broadcasts rank 0's, as in PyTorch's DDP).
  const std::size_t parameters = initial_model().ptr()->parameters().size();
  const std::size_t compared = config.sync_bn ? results[0].size() : parameters;
  for (int64_t r = 1; r < world; ++r) {
    for (std::size_t i = 0; i < compared; ++i) {
      EXPECT_TRUE(at::equal(results[0][i], results[r][i])) << "rank " << r << " differs in tensor " << i;
    }
  }
  return results[0];
}

void expect_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::allclose(a[i].to(at::kDouble), b[i].to(at::kDouble), tolerance, tolerance))
        << "tensor " << i << " differs by " << (a[i] - b[i]).abs().max().item<double>();
  }
}

// DDP on W ranks of batch B with SyncBatchNorm takes the steps one process takes on the
// W*B batch: same parameters, same running statistics, step after step.
void expect_ddp_equals_single_on_concatenated_batch(int64_t world) {
  RunConfig config;
  config.sync_bn = true;
  const auto ddp = train_ddp(world, config, 3);
  expect_close(ddp, train_single(config, 3, world * kBatch), 1e-5);
}

TEST(Ddp, TwoRanksEqualOneProcessOnTheConcatenatedBatch) { expect_ddp_equals_single_on_concatenated_batch(2); }
TEST(Ddp, ThreeRanksEqualOneProcessOnTheConcatenatedBatch) { expect_ddp_equals_single_on_concatenated_batch(3); }

TEST(Ddp, BucketSizeOverlapAndBucketViewsDoNotChangeTheResult) {
  RunConfig one_bucket;
  one_bucket.bucket_mb = 100;
  RunConfig tiny_buckets;
  tiny_buckets.bucket_mb = 0.0001;  // ~100 bytes: every parameter in a bucket of its own
  RunConfig no_overlap = tiny_buckets;
  no_overlap.overlap = false;
  RunConfig views = tiny_buckets;
  views.gradient_as_bucket_view = true;
  const auto a = train_ddp(2, one_bucket, 3);
  const auto b = train_ddp(2, tiny_buckets, 3);
  expect_close(a, b, 1e-6);
  for (const auto* other : {&no_overlap, &views}) {
    const auto c = train_ddp(2, *other, 3);
    for (std::size_t i = 0; i < b.size(); ++i) EXPECT_TRUE(at::equal(b[i], c[i])) << "tensor " << i;
  }
}

// Compressed buckets (fp16 or bf16 on the wire, as PyTorch's compression hooks, or the
// Reducer's built-in FP16_COMPRESS) end where the uncompressed ones do, within the precision
// of the compression, and not exactly there: the compression did happen.
TEST(Ddp, CompressedBucketsMatchTheUncompressedWithinTheirPrecision) {
  RunConfig plain;
  plain.sync_bn = false;
  plain.bucket_mb = 0.001;
  const auto exact = train_ddp(2, plain, 3);
  for (const auto& [hook, tolerance] : {std::pair{CommHook::fp16, 1e-3}, std::pair{CommHook::bf16, 1e-2},
                                        std::pair{CommHook::builtin_fp16, 1e-3}}) {
    SCOPED_TRACE(enum_name(kCommHookNames, hook));
    RunConfig compressed = plain;
    compressed.comm_hook = hook;
    const auto got = train_ddp(2, compressed, 3);
    expect_close(got, exact, tolerance);
    double largest = 0;
    for (std::size_t i = 0; i < got.size(); ++i) largest = std::max(largest, (got[i] - exact[i]).abs().max().item<double>());
    EXPECT_GT(largest, 0.0) << "no difference at all: the bucket was not compressed";
  }
}

TEST(Ddp, WithoutSyncBnEachRankNormalisesItsOwnBatch) {
  RunConfig config;
  config.sync_bn = false;
  const auto local = train_ddp(2, config, 1);
  const auto single = train_single(config, 1, 2 * kBatch);
  double largest = 0;
  for (std::size_t i = 0; i < local.size(); ++i) {
    largest = std::max(largest, (local[i].to(at::kDouble) - single[i].to(at::kDouble)).abs().max().item<double>());
  }
  EXPECT_GT(largest, 1e-4) << "without SyncBatchNorm the statistics are per rank, so the step differs";
}

// Like DistributedDataParallel's forward in eval mode after training: rank 0's buffers on
// every rank before the first evaluation batch, so all ranks evaluate one model.
TEST(Ddp, WithoutSyncBnEvaluationUsesRankZerosBuffers) {
  RunConfig config;
  config.sync_bn = false;
  initial_model();
  struct Buffers {
    std::vector<at::Tensor> before, after;
  };
  auto results = on_ranks<Buffers>(2, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
    Rank r(initial_model(), config, std::move(comm), rank, 2);
    auto ddp = make_ddp_strategy(r.options);
    r.prepare(*ddp);
    ddp->train_step(batch_for(rank * kBatch, kBatch));
    Buffers b;
    for (const auto& t : r.model.ptr()->buffers()) b.before.push_back(t.clone());
    const auto evaluated = ddp->eval_model();
    for (const auto& t : evaluated.ptr()->buffers()) b.after.push_back(t.clone());
    return b;
  });
  bool differed = false;
  for (std::size_t i = 0; i < results[0].before.size(); ++i) {
    differed = differed || !at::equal(results[0].before[i], results[1].before[i]);
    EXPECT_TRUE(at::equal(results[1].after[i], results[0].before[i])) << "buffer " << i;
    EXPECT_TRUE(at::equal(results[0].after[i], results[0].before[i])) << "buffer " << i;
  }
  EXPECT_TRUE(differed) << "the ranks' running statistics should differ after a step on their own batches";
}

// A module with a parameter its forward never uses.
struct WithUnusedImpl : torch::nn::Cloneable<WithUnusedImpl> {
  WithUnusedImpl() { reset(); }
  void reset() override {
    used = register_module("used", torch::nn::Linear(3 * 32 * 32, 10));
    unused = register_module("unused", torch::nn::Linear(4, 4));
  }
  at::Tensor forward(const at::Tensor& x) { return used->forward(x.flatten(1)); }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};
TORCH_MODULE(WithUnused);

// As PyTorch: without find_unused_parameters the next iteration fails, naming the flag;
// with it the unused parameter keeps an undefined gradient and never moves.
TEST(Ddp, UnusedParametersBehaveAsInPyTorch) {
  torch::manual_seed(3);
  const torch::nn::AnyModule start(WithUnused{});
  for (bool find_unused : {false, true}) {
    RunConfig config;
    config.find_unused_parameters = find_unused;
    auto results = on_ranks<std::string>(2, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
      Rank r(start.clone(), config, std::move(comm), rank, 2);
      auto ddp = make_ddp_strategy(r.options);
      r.prepare(*ddp);
      try {
        for (int s = 0; s < 3; ++s) ddp->train_step(batch_for(rank * kBatch, kBatch));
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      auto* module = r.model.ptr<WithUnusedImpl>().get();
      EXPECT_FALSE(module->unused->weight.grad().defined());
      EXPECT_TRUE(at::equal(module->unused->weight, start.ptr<WithUnusedImpl>()->unused->weight));
      EXPECT_FALSE(at::equal(module->used->weight, start.ptr<WithUnusedImpl>()->used->weight));
      return std::string();
    });
    for (const auto& [rank, error] : results) {
      if (find_unused) {
        EXPECT_EQ(error, "") << rank;
      } else {
        EXPECT_NE(error.find("find_unused_parameters"), std::string::npos) << rank << ": " << error;
      }
    }
  }
}

nlohmann::json details_after_steps(const std::string& model, int64_t classes, const RunConfig& config, int steps,
                                   int64_t per_rank) {
  initial_model(model, classes);
  return on_ranks<nlohmann::json>(2, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
           Rank r(initial_model(model, classes), config, std::move(comm), rank, 2);
           auto ddp = make_ddp_strategy(r.options);
           r.prepare(*ddp);
           for (int s = 0; s < steps; ++s) {
             r.timer->set_step(s);
             ddp->train_step(batch_for(rank * per_rank, per_rank));
             r.timer->collect();
           }
           return ddp->details();
         })
      .at(0);
}

TEST(Ddp, OneBucketFirstThenBucketsRebuiltFromTheGradientOrder) {
  RunConfig config;
  config.bucket_mb = 0.002;  // 2,097 bytes
  const int64_t total = 4 * (8 * 3 * 9 + 8 + 8 + 16 * 8 * 9 + 16 + 16 + 10 * 16 + 10);
  const auto before = details_after_steps("tiny", 10, config, 0, kBatch);
  EXPECT_EQ(before["engine"], "c10d::Reducer");
  EXPECT_EQ(before["bucket_bytes"], nlohmann::json::array({total}));
  EXPECT_EQ(before["buckets_rebuilt"], false);
  EXPECT_EQ(before["sync_bn_layers"], 2);
  EXPECT_EQ(before["backend"], "gloo");
  const auto after = details_after_steps("tiny", 10, config, 2, kBatch);
  EXPECT_EQ(after["buckets_rebuilt"], true);
  EXPECT_EQ(after["bucket_bytes_initial"], nlohmann::json::array({total}));
  EXPECT_GT(after["buckets"].get<int64_t>(), 1);
  EXPECT_EQ(after["gradient_bytes_per_step"].get<int64_t>(), total);
}

// The values PyTorch 2.11's DistributedDataParallel reports for torchvision's ResNet-50
// with 1000 classes at the default caps (2 Gloo ranks): one bucket on iteration 1, then
// buckets rebuilt from the order the gradients became ready.
TEST(Ddp, ResNet50BucketsAreDistributedDataParallels) {
  const auto details = details_after_steps("resnet50", 1000, RunConfig{}, 2, 2);
  EXPECT_EQ(details["bucket_bytes_initial"], nlohmann::json::array({102228128}));
  EXPECT_EQ(details["bucket_bytes"], nlohmann::json::array({8196000, 31502336, 26255360, 26550272, 9724160}));
  EXPECT_EQ(details["first_bucket_cap_bytes"], 1 << 20);
}

// The tuning advisor's buckets (reports/bucket_assignment.hpp, no LibTorch) are the Reducer's:
// c10d::compute_bucket_assignment_by_size as the rebuild calls it, over ResNet-50's 161
// gradients in three orders (the order backward makes them ready, registration order, a
// shuffle), for every cap the advisor weighs and a few odd ones.
TEST(Ddp, TheAdvisorsBucketAssignmentIsTheReducersForEveryCap) {
  std::vector<at::Tensor> params = initial_model("resnet50", 1000).ptr()->parameters();
  std::vector<std::vector<int64_t>> orders(3);
  for (int64_t i = 0; i < static_cast<int64_t>(params.size()); ++i) orders[0].insert(orders[0].begin(), i);
  for (int64_t i = 0; i < static_cast<int64_t>(params.size()); ++i) orders[1].push_back(i);
  orders[2] = orders[1];
  std::mt19937 shuffle(7);
  std::shuffle(orders[2].begin(), orders[2].end(), shuffle);
  for (const auto& order : orders) {
    std::vector<at::Tensor> tensors;
    std::vector<GradientSize> sizes;
    for (int64_t i : order) {
      tensors.push_back(params[static_cast<std::size_t>(i)]);
      sizes.push_back({params[static_cast<std::size_t>(i)].numel() * 4, "Float"});
    }
    for (double mb : {0.1, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 3.3}) {
      const std::vector<int64_t> limits = ddp_bucket_limits(mb);
      const std::vector<std::size_t> c10d_limits(limits.begin(), limits.end());
      const auto reducer = std::get<0>(c10d::compute_bucket_assignment_by_size(
          tensors, c10d_limits, std::vector<bool>(params.size(), false), order));
      std::vector<std::vector<std::size_t>> ours;
      for (const auto& bucket : assign_buckets(sizes, limits)) {
        ours.emplace_back();
        for (std::size_t position : bucket) ours.back().push_back(static_cast<std::size_t>(order[position]));
      }
      EXPECT_EQ(ours, reducer) << mb << " MB";
    }
  }
}

// From what a row records (every gradient's bytes in the order the Reducer rebuilt from), the
// advisor lays out the buckets the Reducer built, byte for byte, at caps below, at and above the
// default; with find_unused_parameters, which keeps the first layout (registration order, last
// parameters first), too. Each gradient is listed once, ready no later than backward's last.
TEST(Ddp, TheRecordedGradientsRebucketIntoTheReducersBuckets) {
  for (const auto& [mb, find_unused] : std::vector<std::pair<double, bool>>{
           {0.5, false}, {2.0, false}, {25.0, false}, {25.0, true}, {5.0, true}}) {
    RunConfig config;
    config.bucket_mb = mb;
    config.sync_bn = false;
    config.find_unused_parameters = find_unused;
    const auto details = details_after_steps("resnet18", 10, config, 3, 2);
    const auto& gradients = details.at("gradient_timeline");
    ASSERT_EQ(gradients.size(), initial_model("resnet18", 10).ptr()->parameters().size()) << mb;
    std::set<int64_t> seen;
    for (const auto& g : gradients) {
      EXPECT_TRUE(seen.insert(g.at("parameter").get<int64_t>()).second) << g;
      EXPECT_LE(g.at("ready_s").get<double>(), details.at("backward_compute_s").get<double>() + 1e-9) << g;
      EXPECT_GE(g.at("ready_s").get<double>(), 0.0) << g;
    }
    EXPECT_EQ(gradients.front().at("name"), "fc.bias") << "backward reaches the last layer first";
    RunResult row;
    row.config = {{"find-unused-parameters", find_unused}};
    row.strategy_details = details;
    EXPECT_EQ(nlohmann::json(ddp_bucket_bytes(row, mb)), details.at("bucket_bytes"))
        << mb << " MB" << (find_unused ? ", find_unused_parameters" : "");
    EXPECT_EQ(details.at("buckets_rebuilt"), !find_unused);
    EXPECT_GT(details.at("compression_s_per_byte").at("fp16").get<double>(), 0.0);
    EXPECT_GT(details.at("compression_s_per_byte").at("bf16").get<double>(), 0.0);
  }
}

// Backward alone and the allreduce alone, measured after the steps (at evaluation), are each
// the median of three runs: on hosts capped by a CPU quota one run drew backward's slowdown
// beside the allreduces anywhere from 16 % to 47 % and carried it into every projection.
TEST(Ddp, BackwardAndTheAllreduceAloneAreTheMedianOfThreeRuns) {
  RunConfig config;
  config.sync_bn = false;
  const auto details = on_ranks<nlohmann::json>(2, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
                         Rank r(initial_model("tiny", 10), config, std::move(comm), rank, 2);
                         auto ddp = make_ddp_strategy(r.options);
                         r.prepare(*ddp);
                         for (int s = 0; s < 3; ++s) {
                           r.timer->set_step(s);
                           ddp->train_step(batch_for(rank * kBatch, kBatch));
                           r.timer->collect();
                         }
                         ddp->eval_model();
                         return ddp->details();
                       }).at(0);
  const auto& runs = details.at("backward_alone_runs_s");
  ASSERT_EQ(runs.size(), 3U) << details;
  EXPECT_LE(runs[0].get<double>(), runs[1].get<double>());
  EXPECT_LE(runs[1].get<double>(), runs[2].get<double>());
  EXPECT_EQ(details.at("backward_alone_s"), runs[1]);
  double latest_alone_s = 0;
  for (const auto& g : details.at("gradient_timeline")) {
    latest_alone_s = std::max(latest_alone_s, g.at("alone_ready_s").get<double>());
  }
  EXPECT_EQ(latest_alone_s, runs[1].get<double>()) << "the gradients' ready times are the median run's";
  EXPECT_EQ(details.at("allreduce_alone").at("runs"), 3);
  for (const char* dtype : {"fp32_s", "fp16_s", "bf16_s"}) {
    const auto& each = details.at("allreduce_alone_runs_s").at(dtype);
    ASSERT_EQ(each.size(), 3U) << dtype;
    EXPECT_LE(each[0].get<double>(), each[1].get<double>()) << dtype;
    EXPECT_LE(each[1].get<double>(), each[2].get<double>()) << dtype;
    EXPECT_GT(each[0].get<double>(), 0.0) << dtype;
    EXPECT_EQ(details.at("allreduce_alone").at(dtype), each[1]) << dtype;
  }
}

// The Reducer's hooks start a bucket's allreduce while backward is still computing the
// gradients of earlier layers; without overlap nothing starts before the last gradient.
TEST(Ddp, BucketsAreLaunchedBeforeTheLastGradientIsReady) {
  RunConfig config;
  config.bucket_mb = 1;
  const auto overlapped = details_after_steps("resnet18", 10, config, 3, 4);
  EXPECT_GT(overlapped["buckets"].get<int64_t>(), 4);
  EXPECT_GE(overlapped["buckets_overlapping_backward_last_step"].get<int64_t>(), 1);
  config.overlap = false;
  const auto serial = details_after_steps("resnet18", 10, config, 3, 4);
  EXPECT_EQ(serial["buckets_overlapping_backward_last_step"].get<int64_t>(), 0);
}

// The runner over two ranks: each test image is evaluated once, by one rank, and the
// counts are combined, so both ranks report the same accuracy over the whole test set.
TEST(Ddp, RunnerEvaluatesEachTestImageOnceAcrossRanks) {
  const auto data = make_synthetic({0, 600, 333});
  RunConfig config;
  config.strategy = "ddp";
  config.model = "tiny";
  config.num_classes = 10;
  config.batch_size = 50;
  config.workers = 0;
  config.warmup_steps = 1;
  config.lr = 0.05;
  config.bucket_mb = 0.001;
  auto results = on_ranks<RunResult>(2, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
    DistContext dist;
    dist.rank = rank;
    dist.world_size = 2;
    dist.comm = std::move(comm);
    return run_row(config, dist, data, std::chrono::steady_clock::now());
  });
  for (const auto& [rank, r] : results) {
    EXPECT_EQ(r.eval_images, 333) << rank;
    EXPECT_EQ(r.world_size, 2);
    EXPECT_EQ(r.steps, 6);  // 300 images per rank, batches of 50
    EXPECT_EQ(r.images_trained, 600);
    EXPECT_EQ(r.global_batch, 100);
    ASSERT_EQ(r.ranks.size(), 2u);
    EXPECT_EQ(r.ranks[1].rank, 1);
    EXPECT_TRUE(std::isfinite(r.ranks[1].step_time_s.p50));
    // Where each rank's steps went: its own work, its loader, waiting for the other.
    for (const auto& timing : r.ranks) {
      EXPECT_GT(timing.compute_s, 0.0) << timing.rank;
      EXPECT_GE(timing.data_s, 0.0) << timing.rank;
      EXPECT_GE(timing.wait_s, 0.0) << timing.rank;
    }
    double steady_s = 0;  // this rank's own steps after warm-up, which its figures divide up
    for (std::size_t i = 1; i < r.step_records.size(); ++i) steady_s += r.step_records[i].time_s;
    const RankTiming& own = r.ranks[static_cast<std::size_t>(rank)];
    EXPECT_NEAR(own.compute_s + own.data_s + own.wait_s, steady_s / static_cast<double>(r.step_records.size() - 1), 1e-9);
    EXPECT_GE(r.rank_compute_spread, 1.0);
    // Every step timed its allreduces; the part left after backward is part of them.
    for (const auto& step : r.step_records) {
      EXPECT_GT(step.phases.allreduce_s, 0.0);
      EXPECT_GE(step.phases.comm_s, 0.0);
      EXPECT_LE(step.phases.comm_s, step.phases.allreduce_s + 1e-4);
      EXPECT_GT(step.phases.backward_s, 0.0);
    }
  }
  EXPECT_EQ(results[0].test_accuracy, results[1].test_accuracy);
  EXPECT_EQ(results[0].train_time_s, results[1].train_time_s);
}

// The NCCL path on one GPU: a world of one still reduces every bucket through NCCL.
TEST(GpuDdp, NcclWorldOfOneTrainsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  initial_model();
  testing::run_ranks(
      1,
      [&](int64_t, std::shared_ptr<Communicator> comm) {
        EXPECT_EQ(comm->backend_name(), "nccl");
        Rank r(initial_model(), RunConfig{}, std::move(comm), 0, 1, cuda);
        auto ddp = make_ddp_strategy(r.options);
        r.prepare(*ddp);
        const Batch b = batch_for(0, 32);
        const Batch batch{b.images.to(cuda), b.labels.to(cuda)};
        const double first = ddp->train_step(batch).item<double>();
        double last = first;
        for (int i = 0; i < 10; ++i) last = ddp->train_step(batch).item<double>();
        EXPECT_LT(last, first);
        const PhaseSeconds phases = r.timer->collect();
        EXPECT_GT(phases.backward_s, 0);
        EXPECT_GT(phases.allreduce_s, 0);
      },
      std::chrono::seconds(120), CommBackend::nccl, cuda);
}

// SyncBatchNorm's CUDA kernels across two ranks sharing one GPU are tested with the ranks as
// processes (GpuSharedDevice.*, tests/harness/runner/test_pytorch_rank.cpp): as threads of one
// process they would deadlock in backward (tests/support/rank_threads.hpp says why).

}  // namespace
}  // namespace ddpbench
