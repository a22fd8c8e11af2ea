#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include "data/synthetic.hpp"
#include "harness/runner/runner.hpp"
#include "models/registry.hpp"
#include "strategies/ddp.hpp"
#include "strategies/single.hpp"
#include "support/rank_threads.hpp"

namespace ddpbench {
namespace {

constexpr int64_t kBatch = 8;  // per rank

Batch batch_for(int64_t first, int64_t count) {
  static const auto data = make_synthetic({2, 64, 8});
  return Batch{(data.train.images.narrow(0, first, count).to(at::kFloat) / 255.0 - 0.5) / 0.5,
               data.train.labels.narrow(0, first, count)};
}

// Parameters after `steps` steps of `strategy` on rank `rank` of `comm`'s world, rank r
// training on samples [r * kBatch, (r + 1) * kBatch) of every step's world batch.
// One set of initial weights for every model of a test, drawn before any rank thread
// starts: the global generator is shared by the threads.
const torch::nn::AnyModule& initial_model() {
  static const torch::nn::AnyModule model = [] {
    torch::manual_seed(11);
    return find_model("tiny").make(10);
  }();
  return model;
}

std::vector<at::Tensor> train(std::unique_ptr<Strategy> strategy, const RunConfig& config,
                              std::shared_ptr<Communicator> comm, int64_t rank, int64_t world, int steps,
                              int64_t per_rank) {
  torch::nn::AnyModule model = initial_model().clone();
  torch::optim::SGD optimizer(model.ptr()->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  DistContext dist;
  dist.rank = rank;
  dist.world_size = world;
  dist.comm = std::move(comm);
  auto timer = make_phase_timer(c10::kCPU);
  MixedPrecision precision(config.amp, dist.device);
  const StrategyOptions options = strategy_options(config);
  TrainingSetup setup{model, optimizer, dist, options, *timer, precision};
  strategy->prepare(setup);
  for (int s = 0; s < steps; ++s) {
    strategy->train_step(batch_for(s * world * per_rank % 48 + rank * per_rank, per_rank));
  }
  std::vector<at::Tensor> out;
  for (const auto& p : model.ptr()->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : model.ptr()->buffers()) out.push_back(b.detach().clone());
  return out;
}

std::vector<at::Tensor> train_ddp(int64_t world, const RunConfig& config, int steps, int64_t per_rank = kBatch) {
  std::mutex mutex;
  std::map<int64_t, std::vector<at::Tensor>> results;
  initial_model();
  testing::run_ranks(world, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
    auto params = train(make_ddp_strategy(strategy_options(config)), config, comm, rank, world, steps, per_rank);
    std::lock_guard lock(mutex);
    results[rank] = std::move(params);
  });
  // Parameters end bitwise identical on every rank; so do the buffers with SyncBatchNorm
  // (without it each rank's running statistics follow its own batch until the next
  // forward broadcasts rank 0's, as in PyTorch's DDP).
  const std::size_t parameters = find_model("tiny").make(10).ptr()->parameters().size();
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

// DDP on W ranks of batch B with SyncBatchNorm takes the step one process takes on the W*B
// batch: same parameters, same running statistics.
void expect_ddp_equals_single_on_concatenated_batch(int64_t world) {
  RunConfig config;
  config.sync_bn = true;
  const auto ddp = train_ddp(world, config, 1);
  const auto single = train(make_single_strategy(strategy_options(config)), config, nullptr, 0, 1, 1, world * kBatch);
  expect_close(ddp, single, 1e-5);
}

TEST(Ddp, TwoRanksEqualOneProcessOnTheConcatenatedBatch) { expect_ddp_equals_single_on_concatenated_batch(2); }
TEST(Ddp, ThreeRanksEqualOneProcessOnTheConcatenatedBatch) { expect_ddp_equals_single_on_concatenated_batch(3); }

TEST(Ddp, SeveralStepsKeepRanksIdenticalAndTrackTheSingleProcess) {
  RunConfig config;
  const auto ddp = train_ddp(2, config, 4);
  // Step s of the single process sees what ranks 0 and 1 see together in step s.
  const auto single = train(make_single_strategy(strategy_options(config)), config, nullptr, 0, 1, 4, 2 * kBatch);
  expect_close(ddp, single, 1e-4);
}

TEST(Ddp, BucketSizeAndOverlapDoNotChangeTheResult) {
  RunConfig one_bucket;
  one_bucket.bucket_mb = 100;
  RunConfig tiny_buckets;
  tiny_buckets.bucket_mb = 0.0001;  // ~100 bytes: every parameter in a bucket of its own
  RunConfig no_overlap = tiny_buckets;
  no_overlap.overlap = false;
  const auto a = train_ddp(2, one_bucket, 3);
  const auto b = train_ddp(2, tiny_buckets, 3);
  const auto c = train_ddp(2, no_overlap, 3);
  expect_close(a, b, 1e-6);
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_TRUE(at::equal(b[i], c[i])) << "tensor " << i;
}

TEST(Ddp, WithoutSyncBnEachRankNormalisesItsOwnBatch) {
  RunConfig config;
  config.sync_bn = false;
  const auto local = train_ddp(2, config, 1);
  const auto single = train(make_single_strategy(strategy_options(config)), config, nullptr, 0, 1, 1, 2 * kBatch);
  double largest = 0;
  for (std::size_t i = 0; i < local.size(); ++i) {
    largest = std::max(largest, (local[i].to(at::kDouble) - single[i].to(at::kDouble)).abs().max().item<double>());
  }
  EXPECT_GT(largest, 1e-4) << "without SyncBatchNorm the statistics are per rank, so the step differs";
}

TEST(Ddp, DetailsDescribeTheBuckets) {
  testing::run_ranks(2, [](int64_t rank, std::shared_ptr<Communicator> comm) {
    torch::nn::AnyModule model = find_model("tiny").make(10);
    torch::optim::SGD optimizer(model.ptr()->parameters(), torch::optim::SGDOptions(0.1));
    RunConfig config;
    config.bucket_mb = 0.002;  // 2,097 bytes
    DistContext dist;
    dist.rank = rank;
    dist.world_size = 2;
    dist.comm = comm;
    auto timer = make_phase_timer(c10::kCPU);
    MixedPrecision precision(config.amp, dist.device);
    const StrategyOptions options = strategy_options(config);
    TrainingSetup setup{model, optimizer, dist, options, *timer, precision};
    auto ddp = make_ddp_strategy(options);
    ddp->prepare(setup);
    const auto details = ddp->details();
    int64_t total = 0;
    for (const auto& b : details["bucket_bytes"]) total += b.get<int64_t>();
    EXPECT_EQ(total, details["gradient_bytes_per_step"].get<int64_t>());
    EXPECT_EQ(total, 4 * (8 * 3 * 9 + 8 + 8 + 16 * 8 * 9 + 16 + 16 + 10 * 16 + 10));
    EXPECT_GT(details["buckets"].get<int64_t>(), 1);
    EXPECT_EQ(details["sync_bn_layers"], 2);
    EXPECT_EQ(details["backend"], "gloo");
  });
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
  std::mutex mutex;
  std::map<int64_t, RunResult> results;
  testing::run_ranks(2, [&](int64_t rank, std::shared_ptr<Communicator> comm) {
    DistContext dist;
    dist.rank = rank;
    dist.world_size = 2;
    dist.comm = comm;
    auto r = run_row(config, dist, data, std::chrono::steady_clock::now());
    std::lock_guard lock(mutex);
    results[rank] = r;
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
    EXPECT_GE(r.rank_spread_s, 0.0);
  }
  EXPECT_EQ(results[0].test_accuracy, results[1].test_accuracy);
  EXPECT_EQ(results[0].train_time_s, results[1].train_time_s);
}

// The NCCL path on one GPU: a world of one still reduces every bucket through NCCL.
TEST(GpuDdp, NcclWorldOfOneTrainsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  testing::run_ranks(
      1,
      [&](int64_t, std::shared_ptr<Communicator> comm) {
        EXPECT_EQ(comm->backend_name(), "nccl");
        torch::nn::AnyModule model = initial_model().clone(cuda);
        torch::optim::SGD optimizer(model.ptr()->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
        DistContext dist;
        dist.device = cuda;
        dist.comm = comm;
        RunConfig config;
        auto timer = make_phase_timer(cuda);
        MixedPrecision precision(config.amp, dist.device);
        const StrategyOptions options = strategy_options(config);
        TrainingSetup setup{model, optimizer, dist, options, *timer, precision};
        auto ddp = make_ddp_strategy(options);
        ddp->prepare(setup);
        const Batch b = batch_for(0, 32);
        const Batch batch{b.images.to(cuda), b.labels.to(cuda)};
        const double first = ddp->train_step(batch).item<double>();
        double last = first;
        for (int i = 0; i < 10; ++i) last = ddp->train_step(batch).item<double>();
        EXPECT_LT(last, first);
        EXPECT_GT(timer->collect().backward_s, 0);
      },
      std::chrono::seconds(120), CommBackend::nccl, cuda);
}

}  // namespace
}  // namespace ddpbench
