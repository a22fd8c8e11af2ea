#include <gtest/gtest.h>

#include <filesystem>

#include "data/cifar10_files.hpp"
#include "harness/base/input_error.hpp"
#include "harness/control/row_check.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

// A small row on synthetic data: 512 images in batches of 64, 8 steps on one rank.
RunConfig small_row() {
  RunConfig c;
  c.model = "tiny";
  c.dataset = DatasetKind::synthetic;
  c.synthetic_train_images = 512;
  c.synthetic_test_images = 128;
  c.batch_size = 64;
  c.warmup_steps = 1;
  c.device = "cpu";
  return c;
}

RowStart world_of(int64_t ranks, bool distributed = true) {
  RowStart start;
  start.distributed = distributed;
  start.world_size = start.local_ranks = ranks;
  start.world_source = "--nproc " + std::to_string(ranks);
  return start;
}

// The error a rule throws ("" where it passes).
template <class Rule>
std::string refusal(Rule rule) {
  try {
    rule();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// torchrun --nproc_per_node 2 ddpbench run --strategy single: each process trained the whole row
// and wrote the same --out.
TEST(RowCheck, AOneProcessStrategyInAWorldOfMoreIsRefused) {
  RunConfig c = small_row();
  RowStart torchrun = world_of(2, /*distributed=*/false);
  torchrun.world_source = "torchrun, WORLD_SIZE 2";
  EXPECT_NE(refusal([&] { check_world(c, torchrun); })
                .find("--strategy single runs in one process, but this process is one of a world of 2 (torchrun, "
                      "WORLD_SIZE 2)"),
            std::string::npos);
  c.nproc = 2;
  EXPECT_NE(
      refusal([&] { check_world(c, world_of(1, false)); }).find("--nproc 2: strategy 'single' runs in one process"),
      std::string::npos);
  c.strategy = "ddp";
  EXPECT_EQ(refusal([&] { check_world(c, world_of(2)); }), "");
  c.strategy = "single";
  c.nproc = 1;
  EXPECT_EQ(refusal([&] { check_world(c, world_of(1, false)); }), "");
}

TEST(RowCheck, NcclOnTheCpuIsRefused) {
  RunConfig c = small_row();
  c.backend = CommBackend::nccl;
  EXPECT_NE(refusal([&] { check_backend(c); }).find("--backend nccl needs CUDA devices"), std::string::npos);
  c.device = "cuda";
  EXPECT_EQ(refusal([&] { check_backend(c); }), "");
  c.device = "cpu";
  c.backend = CommBackend::gloo;
  EXPECT_EQ(refusal([&] { check_backend(c); }), "");
}

// The steps are the row's after every cut: a sweep's preset cutting to 4 steps leaves no step 5.
TEST(RowCheck, StepsAndRanksAreTheRowsAfterEveryCut) {
  RunConfig c = small_row();
  EXPECT_EQ(row_steps(c, 1), 8);
  EXPECT_EQ(row_steps(c, 3), 3) << "171 images a rank, padded as DistributedSampler pads them";
  c.synthetic_train_images = 129;
  EXPECT_EQ(row_steps(c, 2), 2) << "65 images a rank (one padded): a batch of 64 and one of 1";
  c.synthetic_train_images = 512;
  c.max_steps = 4;
  c.epochs = 2;
  EXPECT_EQ(row_steps(c, 1), 8) << "four steps in each of two epochs";
  c.epochs = 1;
  c.inject_fault_rank = 0;
  c.inject_fault_step = 5;
  EXPECT_NE(refusal([&] { check_steps_and_ranks(c, world_of(1)); })
                .find("--inject-fault-step 5: the row runs 4 steps (0-3) after --max-steps 4"),
            std::string::npos);
  c.inject_fault_step = 3;
  EXPECT_EQ(refusal([&] { check_steps_and_ranks(c, world_of(1)); }), "");
  c.inject_fault_rank = 2;
  EXPECT_NE(
      refusal([&] { check_steps_and_ranks(c, world_of(2)); }).find("--inject-fault-rank 2: the row has 2 ranks (0-1)"),
      std::string::npos);
  c.inject_fault_rank.reset();
  c.inject_fault_step.reset();
  c.trace_steps = "1:2";
  EXPECT_NE(
      refusal([&] { check_steps_and_ranks(c, world_of(1)); }).find("--trace-steps: the traces are written beside"),
      std::string::npos);
  c.out = "r.json";
  c.trace_steps = "2:4";
  EXPECT_NE(refusal([&] { check_steps_and_ranks(c, world_of(1)); }).find("--trace-steps 2:4: the row runs 4 steps"),
            std::string::npos);
}

// --trace-steps past the row's steps, or over every steady step (traced steps leave the steady
// figures, which would then be empty), is bad input; the runner checks the same once it has read
// the row's data.
TEST(RowCheck, TraceStepsOutsideTheRowOrOverEveryMeasuredStepAreBadInput) {
  RunConfig c = small_row();
  c.warmup_steps = 2;
  c.out = "row.json";
  c.trace_steps = "3:12";
  EXPECT_THROW(check_trace_steps(c, 12), InputError);  // steps 0-11
  c.trace_steps = "2:11";
  EXPECT_THROW(check_trace_steps(c, 12), InputError);  // every step after the 2 of warm-up
  c.trace_steps = "0:11";
  EXPECT_THROW(check_trace_steps(c, 12), InputError);  // the same, warm-up included
  c.trace_steps = "0:1";
  EXPECT_NO_THROW(check_trace_steps(c, 12));  // warm-up alone: the first step explained
  c.trace_steps = "3:10";
  EXPECT_NO_THROW(check_trace_steps(c, 12));  // step 2 stays untraced and steady
  c.warmup_steps = 20;
  c.trace_steps = "0:11";
  EXPECT_NO_THROW(check_trace_steps(c, 12));  // no steady step to keep
}

// CIFAR-10's files missing or cut short, and --init-from missing, are found where the row starts:
// under --nproc 2 only the ranks found them, and the row failed with a result file.
TEST(RowCheck, TheDataAndTheInitialWeightsArePresentAndWhole) {
  TempDir dir;
  RunConfig c = small_row();
  c.dataset = DatasetKind::cifar10;
  c.data_dir = (dir / "none").string();
  EXPECT_NE(refusal([&] { check_inputs_present(c, world_of(2)); }).find("no CIFAR-10 binary files under"),
            std::string::npos);
  RowStart elsewhere = world_of(2);
  elsewhere.check_data = false;
  EXPECT_EQ(refusal([&] { check_inputs_present(c, elsewhere); }), "") << "the data on srun's nodes are theirs to check";
  c.dataset = DatasetKind::auto_detect;
  EXPECT_EQ(refusal([&] { check_inputs_present(c, world_of(2)); }), "") << "auto without files: the synthetic set";
  std::filesystem::create_directories(dir / kCifar10Folder);
  for (const auto& file : cifar10_files(dir / kCifar10Folder)) testing::write_text(file, std::string(3073 * 2, '\1'));
  c.data_dir = dir.path().string();
  EXPECT_NE(refusal([&] { check_inputs_present(c, world_of(2)); }).find("data_batch_1.bin' is truncated: 6146 bytes"),
            std::string::npos);
  c.dataset = DatasetKind::synthetic;
  EXPECT_EQ(training_images(c), 512);
  c.dataset = DatasetKind::auto_detect;
  EXPECT_EQ(training_images(c), 50000) << "auto reads the files it finds";
  c.dataset = DatasetKind::synthetic;
  c.init_from = (dir / "w.pt").string();
  EXPECT_NE(refusal([&] { check_inputs_present(c, world_of(2)); }).find("--init-from: no file"), std::string::npos);
}

// --cache-dir naming a file (or a folder under one) failed the row when the set was written,
// exit 1, its folders made.
TEST(RowCheck, ACacheFolderThatIsAFileIsBadInput) {
  TempDir dir;
  testing::write_text(dir / "notes.txt", "a user's notes");
  RunConfig c = small_row();
  for (const auto& cache : {dir / "notes.txt", dir / "notes.txt" / "deeper"}) {
    c.cache_dir = cache.string();
    EXPECT_EQ(refusal([&] { check_inputs_present(c, world_of(1)); }),
              "--cache-dir '" + cache.string() + "': '" + (dir / "notes.txt").string() + "' is a file, not a folder");
  }
  c.cache_dir = (dir / "new" / "cache").string();
  EXPECT_EQ(refusal([&] { check_inputs_present(c, world_of(1)); }), "");
  c.cache_dir = "none";
  EXPECT_EQ(refusal([&] { check_inputs_present(c, world_of(1)); }), "");
}

// --nproc 1000 was killed by the OOM killer with no word from ddpbench.
TEST(RowCheck, TheRanksOnThisMachineFitInItsMemory) {
  RunConfig c = small_row();
  RowStart start = world_of(1000);
  start.memory_bytes = int64_t{24} << 30;
  const std::string refused = refusal([&] { check_memory(c, start); });
  EXPECT_NE(refused.find("1000 ranks on this machine (--nproc 1000) need at least"), std::string::npos) << refused;
  EXPECT_NE(refused.find("this machine has 24.00 GiB"), std::string::npos) << refused;
  start.world_size = start.local_ranks = 2;
  EXPECT_EQ(refusal([&] { check_memory(c, start); }), "");
  // The set each rank holds counts: 2 ranks of 2^30 images each need terabytes.
  c.synthetic_train_images = kMostOfACount;
  EXPECT_NE(refusal([&] { check_memory(c, start); }).find("2 ranks on this machine"), std::string::npos);
  // So does the head: 2^30 classes of 2,049 parameters, four copies each, are terabytes (it
  // started, and the OOM killer ended it).
  c = small_row();
  c.num_classes = kMostOfACount;
  const std::string head = refusal([&] { check_memory(c, start); });
  EXPECT_NE(head.find("for its head of 1073741824 classes"), std::string::npos) << head;
  c.num_classes = 1000;
  EXPECT_EQ(refusal([&] { check_memory(c, start); }), "");
  start.memory_bytes = 0;
  c.num_classes = kMostOfACount;
  EXPECT_EQ(refusal([&] { check_memory(c, start); }), "") << "a machine that does not say is not judged";
}

// --num-classes 5 started, then every rank failed at its first loss (labels 0-9): exit 1, a failed
// row, where the input was bad.
TEST(RowCheck, TheHeadHoldsEveryLabelOfTheData) {
  RunConfig c = small_row();
  c.num_classes = 5;
  EXPECT_EQ(refusal([&] { check_classes(c); }),
            "--num-classes 5: the data's labels run 0-9 (CIFAR-10's 10 classes, which the synthetic set draws too): "
            "the head needs at least 10 outputs");
  c.num_classes = 10;
  EXPECT_EQ(refusal([&] { check_classes(c); }), "");
}

// A DataParallel row whose batch does not divide over its replicas passed sweep --dry-run, then
// every repetition failed at the strategy's own check.
TEST(RowCheck, DataParallelsBatchDividesOverItsReplicas) {
  RunConfig c = small_row();
  c.strategy = "dp";
  c.devices = "cpu,cpu,cpu";
  EXPECT_EQ(refusal([&] { check_replicas(c); }), "--batch-size 64 does not divide over 3 dp devices (--devices cpu,cpu,cpu)");
  c.devices = "cpu,cpu";
  EXPECT_EQ(refusal([&] { check_replicas(c); }), "");
  c.devices = "all";
  EXPECT_EQ(refusal([&] { check_replicas(c); }), "") << "counted where the devices are seen";
  c.strategy = "single";
  c.devices = "cpu,cpu,cpu";
  EXPECT_EQ(refusal([&] { check_replicas(c); }), "") << "only DataParallel splits its batch";
}

TEST(RowCheck, CheckRowRunsEveryRuleAfterTheRanges) {
  RunConfig c = small_row();
  EXPECT_EQ(refusal([&] { check_row(c, world_of(1, false)); }), "");
  c.synthetic_train_images = INT64_MAX;
  EXPECT_NE(refusal([&] { check_row(c, world_of(1, false)); }).find("--synthetic-train-images 9223372036854775807"),
            std::string::npos)
      << "the ranges first: the steps are reckoned from them";
  c = small_row();
  EXPECT_NE(refusal([&] { check_row(c, world_of(2, false)); }).find("runs in one process"), std::string::npos);
  c.backend = CommBackend::nccl;
  EXPECT_NE(refusal([&] { check_row(c, world_of(1)); }).find("--backend nccl"), std::string::npos);
  c = small_row();
  c.num_classes = 9;
  EXPECT_NE(refusal([&] { check_row(c, world_of(1, false)); }).find("--num-classes 9"), std::string::npos);
  c = small_row();
  c.strategy = "dp";
  c.devices = "cpu,cpu,cpu";
  EXPECT_NE(refusal([&] { check_row(c, world_of(1, false)); }).find("does not divide over 3 dp devices"),
            std::string::npos);
  EXPECT_GT(machine_memory_bytes(), 0) << "Linux says its memory in /proc/meminfo";
}

}  // namespace
}  // namespace ddpbench
