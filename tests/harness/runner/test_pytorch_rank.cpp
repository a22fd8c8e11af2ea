// The equivalence suite (ctest label `reference`): each ddpbench row against PyTorch's own
// implementation of it, both started by the binary from the same initial weights on the
// same batches. Per-step losses must agree within 1e-4 relative and final parameters
// within kParameterTolerance; the negative controls show the comparison notices a change
// of data order, learning rate or initial weights on one side.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "models/checkpoint.hpp"
#include "models/registry.hpp"
#include "support/process.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

// Both sides run the same LibTorch kernels in the same order, so they agree to float32
// rounding; 1e-6 (relative, with the same absolute floor) leaves room for a reduction
// reordered by another thread count, and is far below what one step at lr 0.05 moves.
constexpr double kParameterTolerance = 1e-6;
constexpr double kLossTolerance = 1e-4;

struct Side {
  std::vector<double> losses;
  std::vector<at::Tensor> state;
  nlohmann::json run;
};

// Steps enough to move the weights visibly; small enough for CI's two cores.
std::vector<std::string> row_args(const std::string& strategy, const TempDir& dir, const std::string& tag,
                                  std::vector<std::string> extra) {
  std::vector<std::string> args = {testing::ddpbench_binary(), "run", "--strategy", strategy, "--model", "tiny",
                                   "--num-classes", "10", "--dataset", "synthetic", "--synthetic-train-images", "512",
                                   "--synthetic-test-images", "128", "--batch-size", "32", "--max-steps", "6",
                                   "--warmup-steps", "1", "--workers", "0", "--lr", "0.05", "--cache-dir",
                                   (dir / "cache").string(), "--out", (dir / (tag + ".json")).string(),
                                   "--save-checkpoint", (dir / (tag + ".pt")).string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

Side run_side(const std::string& strategy, const TempDir& dir, const std::string& tag,
              const std::vector<std::string>& extra) {
  const auto r = testing::run_process(row_args(strategy, dir, tag, extra));
  EXPECT_EQ(r.exit_code, 0) << strategy << ": " << r.err;
  Side side;
  side.run = nlohmann::json::parse(testing::read_text(dir / (tag + ".json")))["runs"][0];
  EXPECT_EQ(side.run["status"], "ok") << side.run["reason"];
  for (const auto& step : side.run["step_records"]) side.losses.push_back(step["loss"].get<double>());
  torch::nn::AnyModule model = find_model("tiny").make(10);
  load_checkpoint(*model.ptr(), dir / (tag + ".pt"));
  for (const auto& [name, tensor] : state_dict(*model.ptr())) side.state.push_back(tensor.detach().clone());
  return side;
}

// Why two sides disagree, or "" when they agree.
std::string disagreement(const Side& ours, const Side& theirs, double parameter_tolerance = kParameterTolerance) {
  if (ours.losses.size() != theirs.losses.size() || ours.losses.size() < 5) {
    return "step counts " + std::to_string(ours.losses.size()) + " and " + std::to_string(theirs.losses.size());
  }
  for (std::size_t i = 0; i < ours.losses.size(); ++i) {
    const double a = ours.losses[i], b = theirs.losses[i];
    if (std::fabs(a - b) > kLossTolerance * std::max(std::fabs(a), std::fabs(b))) {
      return "step " + std::to_string(i) + " loss " + std::to_string(a) + " vs " + std::to_string(b);
    }
  }
  for (std::size_t i = 0; i < ours.state.size(); ++i) {
    const auto a = ours.state[i].to(at::kDouble), b = theirs.state[i].to(at::kDouble);
    if (!at::allclose(a, b, parameter_tolerance, parameter_tolerance)) {
      return "state tensor " + std::to_string(i) + " differs by " + std::to_string((a - b).abs().max().item<double>());
    }
  }
  return "";
}

// How far two sides may part. On CPUs both run the same kernels in the same order; on a GPU
// cuDNN's backward kernels may sum in another order in each process (atomics), so the sides
// agree to float rounding compounded over the steps, and a test image may tip either way.
struct Tolerance {
  double parameter = kParameterTolerance;
  int64_t test_images_apart = 0;
};

void expect_equivalent(const std::string& ours, const std::string& theirs, const std::vector<std::string>& extra,
                       Tolerance tolerance = {}) {
  TempDir dir;
  const Side a = run_side(ours, dir, "ours", extra);
  const Side b = run_side(theirs, dir, "theirs", extra);
  EXPECT_EQ(disagreement(a, b, tolerance.parameter), "");
  const double images = a.run["eval_images"].get<double>();
  EXPECT_LE(std::fabs(a.run["test_accuracy"].get<double>() - b.run["test_accuracy"].get<double>()) * images,
            static_cast<double>(tolerance.test_images_apart) + 1e-9)
      << a.run["test_accuracy"] << " vs " << b.run["test_accuracy"] << " over " << images << " test images";
  EXPECT_EQ(b.run["strategy"], theirs);
  EXPECT_NE(b.run["strategy_details"]["implementation"].get<std::string>().find("PyTorch"), std::string::npos);
}

TEST(PyTorchReference, SingleMatchesTorchSingle) { expect_equivalent("single", "torch-single", {}); }

// Random crops (drawn by ddpbench's plan on both sides) and the device-resident loader.
TEST(PyTorchReference, SingleWithCropsAndTheDeviceLoaderMatches) {
  expect_equivalent("single", "torch-single", {"--crop-padding", "4", "--loader", "device", "--test-transform", "plain"});
}

TEST(PyTorchReference, DdpMatchesDistributedDataParallelOnTwoGlooRanks) {
  expect_equivalent("ddp", "torch-ddp", {"--nproc", "2", "--device", "cpu", "--no-sync-bn", "--batch-size", "16"});
}

// Gradient compression on both sides: ddpbench's timed fp16 hook against PyTorch's
// fp16_compress_hook, the same casts in the same order.
TEST(PyTorchReference, DdpFp16CompressionMatchesTheFp16CompressHook) {
  expect_equivalent("ddp", "torch-ddp",
                    {"--nproc", "2", "--device", "cpu", "--no-sync-bn", "--batch-size", "16", "--comm-hook", "fp16"});
}

TEST(PyTorchReference, DdpBf16CompressionMatchesTheBf16CompressHook) {
  expect_equivalent("ddp", "torch-ddp",
                    {"--nproc", "2", "--device", "cpu", "--no-sync-bn", "--batch-size", "16", "--comm-hook", "bf16"});
}

TEST(PyTorchReference, Bf16AutocastOnTheCpuMatches) { expect_equivalent("single", "torch-single", {"--amp", "bf16"}); }

TEST(PyTorchReference, Fp16LossScalingMatchesGradScaler) {
  expect_equivalent("single", "torch-single", {"--amp", "fp16"});
}

// The comparison itself: one side with another learning rate, another data order (seed)
// or other initial weights does not pass.
TEST(PyTorchReference, TheComparisonNoticesAChangeOnOneSide) {
  TempDir dir;
  const Side ours = run_side("single", dir, "ours", {});
  torch::manual_seed(0);  // the default --seed: ddpbench's own initial weights
  save_checkpoint(*find_model("tiny").make(10).ptr(), dir / "ours-init.pt");
  EXPECT_NE(disagreement(ours, run_side("torch-single", dir, "lr", {"--lr", "0.051"})), "");
  EXPECT_NE(disagreement(ours, run_side("torch-single", dir, "order", {"--seed", "1", "--init-from",
                                                                        (dir / "ours-init.pt").string()})),
            "");
  EXPECT_NE(disagreement(ours, run_side("torch-single", dir, "init", {"--init-from", (dir / "ours.pt").string()})), "");
}

// Bad input and faults, as for ddpbench's own rows.
TEST(PyTorchReference, APythonWithoutTorchvisionIsBadInputNamingTheInstallCommand) {
  TempDir dir;
  auto args = row_args("torch-single", dir, "x", {"--model", "resnet18"});
  const auto r = testing::run_process(args, {"DDPBENCH_PYTHON=/usr/bin/python3"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("needs torch and torchvision in /usr/bin/python3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-m pip install torch==2.11.0 torchvision=="), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.json"));
}

TEST(PyTorchReference, APythonRankThatCrashesFailsTheRowWithItsTracebacksLastLine) {
  TempDir dir;
  // The model's own weights, pickled with LibTorch's type tags: ddpbench's reader (and the check
  // before any work) takes them, torch.load(weights_only=True) in the Python rank raises.
  torch::manual_seed(0);
  c10::Dict<std::string, at::Tensor> weights;
  for (const auto& [name, tensor] : state_dict(*find_model("tiny").make(10).ptr())) weights.insert(name, tensor);
  const std::vector<char> tagged = torch::pickle_save(c10::IValue(weights));
  testing::write_text(dir / "tagged.pt", std::string(tagged.begin(), tagged.end()));
  const auto r = testing::run_process(row_args("torch-single", dir, "x", {"--init-from", (dir / "tagged.pt").string()}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto run = nlohmann::json::parse(testing::read_text(dir / "x.json"))["runs"][0];
  EXPECT_EQ(run["status"], "failed");
  const std::string reason = run["reason"];
  EXPECT_NE(reason.find("exited with status 1"), std::string::npos) << reason;
  EXPECT_NE(reason.find("UnpicklingError"), std::string::npos) << reason;
}

// A twin whose rank 1 hangs before a step's collectives (--inject-fault-kind hang): rank 0 times
// out waiting in that step's allreduce. The row blamed rank 0 ("rank 0: exited with status 1:
// ... timed out"); it names rank 1 by its progress record, behind, as ddpbench's own rows do.
TEST(PyTorchReference, ATwinWhoseRankHangsNamesTheHungRankByItsProgress) {
  TempDir dir;
  const auto r = testing::run_process(row_args("torch-ddp", dir, "x",
                                               {"--device", "cpu", "--no-sync-bn", "--nproc", "2", "--timeout-s", "10",
                                                "--inject-fault-rank", "1", "--inject-fault-step", "3",
                                                "--inject-fault-kind", "hang"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto run = nlohmann::json::parse(testing::read_text(dir / "x.json"))["runs"][0];
  EXPECT_EQ(run["status"], "failed");
  const std::string reason = run["reason"];
  EXPECT_EQ(reason.rfind("rank 0: failed on rank 0: rank 1 is behind, alive: ", 0), 0u) << reason;
  EXPECT_NE(reason.find("where rank 0 is in collective #4 (training step 3)"), std::string::npos) << reason;
  EXPECT_NE(reason.find("; rank 0's own error: "), std::string::npos) << reason;
}

TEST(PyTorchReference, TorchDpWithoutGpusIsSkippedWithTheReason) {
  TempDir dir;
  const auto r = testing::run_process(row_args("torch-dp", dir, "x", {"--devices", "cpu,cpu"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto run = nlohmann::json::parse(testing::read_text(dir / "x.json"))["runs"][0];
  EXPECT_EQ(run["status"], "skipped");
  EXPECT_NE(run["reason"].get<std::string>().find("CUDA devices only"), std::string::npos) << run["reason"];
}

TEST(PyTorchReference, NoOverlapHasNoPyTorchEquivalent) {
  TempDir dir;
  const auto r = testing::run_process(row_args("torch-ddp", dir, "x", {"--no-overlap"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--no-overlap: PyTorch's DistributedDataParallel has no such switch"), std::string::npos) << r.err;
}

// Under an external torchrun, whose agent serves the store: ddpbench's ranks each run their
// Python twin, which joins through the agent.
TEST(PyTorchReference, TorchDdpRunsUnderTorchrun) {
  const std::string python = DDPBENCH_TEST_PYTHON;
  ASSERT_FALSE(python.empty()) << "the build names no Python (DDPBENCH_PYTHON)";
  TempDir dir;
  std::vector<std::string> args = {python, "-m", "torch.distributed.run", "--no-python", "--nproc-per-node", "2",
                                   "--master-port", std::to_string(29000 + (::getpid() + 2500) % 3000)};
  auto rank_args = row_args("torch-ddp", dir, "x", {"--device", "cpu", "--no-sync-bn"});
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  const auto r = testing::run_process(args);
  const auto result = dir / "x.json";
  ASSERT_EQ(r.exit_code, 0) << r.err << "\nrank 0's row: "
                            << (std::filesystem::exists(result) ? testing::read_text(result) : "none written");
  const auto run = nlohmann::json::parse(testing::read_text(result))["runs"][0];
  EXPECT_EQ(run["status"], "ok") << run["reason"];
  EXPECT_EQ(run["world_size"], 2);
  EXPECT_EQ(run["ranks"].size(), 2u);
}

// A twin that its preflight skips, as one rank of srun's world (each rank given --nproc 1):
// still skipped, with the world it was one rank of and the nodes in its configuration, so
// that a sweep's plan check sees the row it planned.
TEST(PyTorchReference, ATwinSkippedAsARankOfAnotherLaunchersWorldRecordsThatWorld) {
  TempDir dir;
  const auto r = testing::run_process(
      row_args("torch-ddp", dir, "x", {"--device", "cpu", "--sync-bn", "--nodes", "2"}),
      {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_STEP_NUM_NODES=2",
       "SLURM_STEP_NODELIST=node[1-2]", "SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_JOB_ID=7", "MASTER_ADDR=127.0.0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto run = nlohmann::json::parse(testing::read_text(dir / "x.json"))["runs"][0];
  EXPECT_EQ(run["status"], "skipped") << run["reason"];
  EXPECT_EQ(run["world_size"], 2);
  EXPECT_EQ(run["config"]["nproc"], 2);
  EXPECT_EQ(run["config"]["nodes"], 2);
  EXPECT_EQ(run["nodes"], nlohmann::json({"node1", "node2"}));
}

// The multi-rank path on one GPU: two ranks (processes, never threads: see
// tests/support/rank_threads.hpp) sharing cuda:0 over Gloo with CUDA tensors, the Reducer on
// CUDA gradients and SyncBatchNorm's CUDA kernels (batch_norm_stats, gather_stats_with_counts,
// backward_reduce/elemt) across them, end as one process on the concatenated batch does, in
// the default memory format and channels-last (strict fp32: the kernels then agree to float
// rounding). NCCL would refuse two ranks on one GPU: that is bad input, said so.
TEST(GpuSharedDevice, TwoGlooRanksOnOneGpuEqualOneProcessOnTheConcatenatedBatch) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  for (const std::string format : {"contiguous", "channels-last"}) {
    SCOPED_TRACE(format);
    const std::vector<std::string> layout =
        format == "channels-last" ? std::vector<std::string>{"--channels-last"} : std::vector<std::string>{};
    auto with_layout = [&](std::vector<std::string> args) {
      args.insert(args.end(), layout.begin(), layout.end());
      return args;
    };
    const Side ddp = run_side("ddp", dir, "ddp-" + format,
                              with_layout({"--nproc", "2", "--backend", "gloo", "--device", "cuda:0", "--batch-size",
                                           "16", "--sync-bn", "--no-tf32", "--no-cudnn-benchmark"}));
    const Side single = run_side("single", dir, "single-" + format,
                                 with_layout({"--device", "cuda:0", "--batch-size", "32", "--no-tf32",
                                              "--no-cudnn-benchmark"}));
    EXPECT_EQ(ddp.run["world_size"], 2);
    EXPECT_EQ(ddp.run["strategy_details"]["backend"], "gloo");
    ASSERT_EQ(ddp.state.size(), single.state.size());
    for (std::size_t i = 0; i < ddp.state.size(); ++i) {
      const auto a = ddp.state[i].to(at::kDouble), b = single.state[i].to(at::kDouble);
      EXPECT_TRUE(at::allclose(a, b, 1e-4, 1e-5)) << "state tensor " << i << " differs by "
                                                  << (a - b).abs().max().item<double>();
    }
  }
  const auto refused = testing::run_process(row_args("ddp", dir, "nccl", {"--nproc", "2", "--device", "cuda:0"}));
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--backend gloo shares it"), std::string::npos) << refused.err;
}

TEST(GpuPyTorchReference, DpMatchesDataParallel) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_equivalent("dp", "torch-dp",
                    {"--devices", "0", "--allow-single-device", "--device", "cuda", "--no-tf32", "--no-cudnn-benchmark"},
                    Tolerance{1e-4, 1});
}

}  // namespace
}  // namespace ddpbench
