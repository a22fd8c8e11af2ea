#include <cmath>

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "data/synthetic.hpp"
#include "models/registry.hpp"
#include "strategies/cuda_graph_step.hpp"
#include "strategies/single.hpp"
#include "support/prepared_training.hpp"

namespace ddpbench {
namespace {

// One model, optimizer and timer on `device`, seeded alike for the eager and the captured run.
struct Row : testing::PreparedTraining {
  explicit Row(c10::Device device)
      : PreparedTraining((torch::manual_seed(0), find_model("tiny").make(10)), device, options_for_graphs(), 0.05) {}
  static StrategyOptions options_for_graphs() {
    StrategyOptions o;
    o.batch_size = 8;
    o.warmup_steps = 4;
    o.cuda_graphs = true;
    return o;
  }
  std::unique_ptr<Strategy> prepared(std::unique_ptr<Strategy> strategy) {
    prepare(*strategy);
    return strategy;
  }
};

// Batches of 8 from a fixed set, one of 5 (an epoch's last) among them.
std::vector<Batch> batches(c10::Device device) {
  static const auto data = make_synthetic({1, 128, 8});
  const auto images = ((data.train.images.to(at::kFloat) / 255.0 - 0.5) / 0.5).to(device);
  const auto labels = data.train.labels.to(device);
  std::vector<Batch> out;
  int64_t first = 0;
  for (const int64_t size : {8, 8, 8, 8, 8, 8, 5, 8, 8}) {
    out.push_back(Batch{images.narrow(0, first, size).clone(), labels.narrow(0, first, size).clone()});
    first += size;
  }
  return out;
}

struct Trained {
  std::vector<double> losses;
  std::vector<PhaseSeconds> phases;
  std::vector<at::Tensor> parameters;
  nlohmann::json details;
};

Trained train(Row& row, Strategy& strategy, const std::vector<Batch>& steps) {
  Trained out;
  for (const Batch& batch : steps) {
    out.losses.push_back(strategy.train_step(batch).item<double>());
    out.phases.push_back(row.timer->collect());
  }
  for (const auto& p : row.model.ptr()->parameters()) out.parameters.push_back(p.detach().cpu());
  out.details = strategy.details();
  return out;
}

// The captured step, replayed on each batch copied into its static inputs, trains as the eager
// step does: the same losses and weights. The stand-in graph runs the recorded step again, so
// on a CPU this checks what the wrapper owns (which step is captured, the copy in, the partial
// batch run eagerly, the counts and the unmeasured phases); the GPU test checks the graph.
TEST(CudaGraphStep, ReplaysTrainAsEagerStepsAndAPartialBatchRunsEagerly) {
  const auto steps = batches(c10::kCPU);
  Row eager_row(c10::kCPU);
  auto eager = eager_row.prepared(make_single_strategy(eager_row.options));
  const Trained expected = train(eager_row, *eager, steps);

  Row graph_row(c10::kCPU);
  auto graphed = graph_row.prepared(
      capture_in_cuda_graph(make_single_strategy(graph_row.options), graph_row.options, make_rerun_step_graph()));
  const Trained got = train(graph_row, *graphed, steps);

  ASSERT_EQ(got.losses.size(), expected.losses.size());
  for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_DOUBLE_EQ(got.losses[i], expected.losses[i]) << "step " << i;
  for (std::size_t i = 0; i < got.parameters.size(); ++i) {
    EXPECT_TRUE(at::equal(got.parameters[i], expected.parameters[i])) << "parameter " << i;
  }
  const auto& graphs = got.details.at("cuda_graphs");
  EXPECT_EQ(graphs.at("capture_step"), 3);  // the last of --warmup-steps 4
  EXPECT_EQ(graphs.at("replayed_steps"), 5);  // steps 3, 4, 5, 7, 8
  EXPECT_EQ(graphs.at("eager_steps"), 4);     // steps 0, 1, 2 and the partial 6
  EXPECT_GE(graphs.at("capture_s").get<double>(), 0);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const bool replayed = i >= 3 && i != 6;
    EXPECT_EQ(std::isnan(got.phases[i].forward_s), replayed) << "step " << i;
    EXPECT_EQ(std::isnan(got.phases[i].backward_s), replayed) << "step " << i;
    EXPECT_EQ(std::isnan(got.phases[i].optimizer_s), replayed) << "step " << i;
    if (!replayed) {
      EXPECT_GT(got.phases[i].forward_s, 0) << "step " << i;
    }
  }
}

// A row that never reaches its capture step ran eagerly throughout, and says so.
TEST(CudaGraphStep, ARowShorterThanItsWarmUpIsNeverCaptured) {
  const auto steps = batches(c10::kCPU);
  Row row(c10::kCPU);
  row.options.warmup_steps = 20;
  auto graphed =
      row.prepared(capture_in_cuda_graph(make_single_strategy(row.options), row.options, make_rerun_step_graph()));
  const Trained got = train(row, *graphed, steps);
  const auto& graphs = got.details.at("cuda_graphs");
  EXPECT_TRUE(graphs.at("capture_step").is_null());
  EXPECT_EQ(graphs.at("replayed_steps"), 0);
  EXPECT_EQ(graphs.at("eager_steps"), static_cast<int64_t>(steps.size()));
}

TEST(CudaGraphStep, ACpuMachineSkipsTheRowAndSaysWhy) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is visible";
  StrategyOptions options;
  options.cuda_graphs = true;
  const auto reason = cuda_graphs_preflight(options);
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("--cuda-graphs"), std::string::npos);
  options.cuda_graphs = false;
  EXPECT_FALSE(cuda_graphs_preflight(options).has_value());
}

// On a GPU the CUDA graph itself: replays equal eager steps within the equivalence tests'
// tolerance (cuDNN may pick other kernels in a capture), weights too.
TEST(GpuCudaGraphStep, ReplayedStepsMatchEagerOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device device(c10::kCUDA, 0);
  const auto steps = batches(device);
  Row eager_row(device);
  auto eager = eager_row.prepared(make_single_strategy(eager_row.options));
  const Trained expected = train(eager_row, *eager, steps);
  Row graph_row(device);
  auto graphed = graph_row.prepared(capture_in_cuda_graph(make_single_strategy(graph_row.options), graph_row.options));
  const Trained got = train(graph_row, *graphed, steps);
  for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_NEAR(got.losses[i], expected.losses[i], 1e-4) << "step " << i;
  for (std::size_t i = 0; i < got.parameters.size(); ++i) {
    EXPECT_TRUE(at::allclose(got.parameters[i], expected.parameters[i], 1e-4, 1e-5)) << "parameter " << i;
  }
  EXPECT_EQ(got.details.at("cuda_graphs").at("replayed_steps"), 5);
}

}  // namespace
}  // namespace ddpbench
