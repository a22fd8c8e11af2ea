// The binary end to end: exit codes, messages and files, for good and bad input.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/process.hpp"

namespace ddpbench {
namespace {

using testing::ProcessResult;
using testing::TempDir;

ProcessResult ddpbench(std::vector<std::string> args) {
  args.insert(args.begin(), testing::ddpbench_binary());
  return testing::run_process(args);
}

// A fast row: tiny model, small synthetic data, two steps.
std::vector<std::string> quick_run(std::vector<std::string> extra) {
  std::vector<std::string> args = {"run", "--model", "tiny", "--num-classes", "10", "--dataset", "synthetic",
                                   "--synthetic-train-images", "512", "--synthetic-test-images", "128",
                                   "--batch-size", "64", "--max-steps", "2", "--warmup-steps", "1",
                                   "--workers", "1", "--device", "cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void expect_bad_input(const ProcessResult& r, const std::string& message) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

// Nothing the binary offers is undocumented: every flag that `run --help`, `sweep --help`,
// `compare --help`, `project --help` and `advise --help` list (a switch's `--no-` form with it) is in docs/.
TEST(Main, EveryOptionTheHelpListsIsInTheDocs) {
  const char* source = DDPBENCH_TEST_SOURCE_DIR;  // compiled in: the binary's own tree
  std::string docs;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(source) / "docs")) {
    if (entry.path().extension() == ".md") docs += testing::read_text(entry.path());
  }
  ASSERT_FALSE(docs.empty());
  int flags = 0;
  for (const char* command : {"run", "sweep", "compare", "project", "advise"}) {
    const auto help = ddpbench({command, "--help"});
    ASSERT_EQ(help.exit_code, 0) << help.err;
    std::istringstream lines(help.out);
    for (std::string line; std::getline(lines, line);) {
      // An option line: two spaces, then its flags ("--overlap,--no-overlap{false}").
      if (line.rfind("  --", 0) != 0) continue;
      std::string flag = line.substr(2, line.find_first_of(" ,{", 2) - 2);
      if (flag == "--help") continue;
      ++flags;
      EXPECT_NE(docs.find("`" + flag), std::string::npos) << command << " " << flag << " is not in docs/";
    }
  }
  EXPECT_GT(flags, 60) << "the help was not read";
}

TEST(Main, RunWritesTheResultAndPrintsTheRow) {
  TempDir dir;
  const auto r = ddpbench(quick_run({"--out", (dir / "r.json").string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| row | strategy |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| single | single | 1 | cpu | synthetic | ok |"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(testing::read_text(dir / "r.json"));
  EXPECT_EQ(doc["schema"], "ddpbench/result/v1");
  EXPECT_EQ(doc["argv"][1], "run");
  for (const char* key : {"host", "cpu_model", "cpu_cores", "gpus", "driver_version", "cuda_runtime_version",
                          "cudnn_version", "nccl_version", "libtorch_version", "git_revision"}) {
    EXPECT_TRUE(doc["environment"].contains(key)) << key;
  }
  const auto& run = doc["runs"][0];
  EXPECT_EQ(run["status"], "ok");
  EXPECT_EQ(run["steps"], 2);
  EXPECT_EQ(run["epoch_cut"], true);
  EXPECT_EQ(run["dataset"], "synthetic");
  EXPECT_EQ(run["eval_images"], 128);
  EXPECT_GE(run["test_accuracy"].get<double>(), 0.0);
  EXPECT_LE(run["test_accuracy"].get<double>(), 1.0);
  EXPECT_GT(run["train_time_s"].get<double>(), 0.0);
  EXPECT_GT(run["step_time_s"]["p50"].get<double>(), 0.0);
  EXPECT_EQ(run["config"]["batch-size"], 64);
  EXPECT_EQ(run["step_records"].size(), 2u);
}

TEST(Main, ListNamesStrategiesAndModels) {
  const auto r = ddpbench({"list"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("single"), std::string::npos);
  EXPECT_NE(r.out.find("resnet50"), std::string::npos);
}

TEST(Main, ListOptionsPrintsTheReferenceTablesAlone) {
  const auto r = ddpbench({"list", "--options"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("## `ddpbench run`\n\n| option | default | meaning |\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("## `ddpbench compare`\n\n| option | default | meaning |\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| `--lr X` | `0.001` | SGD learning rate |\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("strategies:"), std::string::npos) << "the strategies and models are not listed with it";
}

TEST(Main, BadFlagsExitTwoWithOneLineAndNoFile) {
  TempDir dir;
  const std::string out = (dir / "r.json").string();
  expect_bad_input(ddpbench(quick_run({"--strategy", "zero", "--out", out})), "unknown strategy 'zero'");
  expect_bad_input(ddpbench(quick_run({"--model", "vgg", "--out", out})), "unknown model 'vgg'");
  expect_bad_input(ddpbench(quick_run({"--batch-size", "0", "--out", out})), "--batch-size must be positive");
  expect_bad_input(ddpbench(quick_run({"--max-steps", "-1", "--out", out})), "--max-steps");
  expect_bad_input(ddpbench(quick_run({"--lr", "0", "--out", out})), "--lr must be a positive number");
  expect_bad_input(ddpbench(quick_run({"--epochs", "two", "--out", out})), "--epochs: 'two' is not an integer");
  expect_bad_input(ddpbench({"run", "--bogus"}), "--bogus");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Main, MissingOrTruncatedDataExitsTwo) {
  TempDir dir;
  const std::string out = (dir / "r.json").string();
  expect_bad_input(ddpbench(quick_run({"--dataset", "cifar10", "--data-dir", (dir / "none").string(), "--out", out})),
                   "no CIFAR-10 binary files under");
  std::filesystem::create_directories(dir / "cifar-10-batches-bin");
  for (const char* f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                        "data_batch_5.bin", "test_batch.bin"}) {
    testing::write_text(dir / "cifar-10-batches-bin" / f, std::string(3073 * 3, '\1'));
  }
  expect_bad_input(ddpbench(quick_run({"--dataset", "cifar10", "--data-dir", dir.path().string(), "--out", out})),
                   "data_batch_1.bin' is truncated");
  // auto finds the broken files too: it must not fall back to synthetic data silently.
  expect_bad_input(ddpbench(quick_run({"--dataset", "auto", "--data-dir", dir.path().string(), "--out", out})),
                   "is truncated");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Main, UnwritableOutputsAndMissingInitFileExitTwo) {
  TempDir dir;
  testing::write_text(dir / "file", "x");
  expect_bad_input(ddpbench(quick_run({"--out", (dir / "file/r.json").string()})), "--out: cannot write");
  expect_bad_input(ddpbench(quick_run({"--save-checkpoint", (dir / "file/w.pt").string()})),
                   "--save-checkpoint: cannot write");
  expect_bad_input(ddpbench(quick_run({"--init-from", (dir / "absent.pt").string()})), "--init-from: no file");
  // Checked before any work: the whole epoch used to run first.
  const auto start = std::chrono::steady_clock::now();
  expect_bad_input(ddpbench({"run", "--out", "/proc/nope/o.json"}), "--out: cannot write '/proc/nope/o.json'");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Values no run has are bad input before any work: they were a 20-frame c10 stack trace and exit 1
// (--synthetic-train-images 9223372036854775807), a hang at the rendezvous (--timeout-s
// 99999999999), and a row that ran and recorded bucket_cap_bytes -9223372036854775808
// (--bucket-mb 1e300).
TEST(Main, ValuesNoRunHasExitTwoBeforeAnyWork) {
  TempDir dir;
  const std::string out = (dir / "r.json").string();
  expect_bad_input(ddpbench(quick_run({"--synthetic-train-images", "9223372036854775807", "--out", out})),
                   "--synthetic-train-images 9223372036854775807 is more than 1073741824");
  expect_bad_input(ddpbench(quick_run({"--strategy", "ddp", "--timeout-s", "99999999999", "--out", out})),
                   "--timeout-s 99999999999 is more than 604800");
  expect_bad_input(ddpbench(quick_run({"--strategy", "ddp", "--bucket-mb", "1e300", "--out", out})),
                   "--bucket-mb 1e+300 is not a bucket cap");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Main, CudaDeviceWithoutGpuExitsTwo) {
  TempDir dir;
  const auto r = ddpbench(quick_run({"--device", "cuda", "--out", (dir / "r.json").string()}));
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has a GPU";
  expect_bad_input(r, "--device cuda: no CUDA device is available");
  EXPECT_FALSE(std::filesystem::exists(dir / "r.json"));
  expect_bad_input(ddpbench(quick_run({"--device", "tpu"})), "--device tpu: expected auto|cpu|cuda[:N]");
}

TEST(Main, CheckpointRoundTripsThroughTheCli) {
  TempDir dir;
  const auto saved = ddpbench(quick_run({"--save-checkpoint", (dir / "w.pt").string()}));
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  ASSERT_TRUE(std::filesystem::exists(dir / "w.pt"));
  const auto loaded = ddpbench(quick_run({"--init-from", (dir / "w.pt").string()}));
  EXPECT_EQ(loaded.exit_code, 0) << loaded.err;
  expect_bad_input(ddpbench(quick_run({"--init-from", (dir / "w.pt").string(), "--num-classes", "12"})),
                   "does not match the model");
}

// The output rule: the result file written over the weights (--out X --save-checkpoint X, no
// word before), the weights over --init-from, either over a file the run did not write, are bad
// input naming both paths, before any work; a run's own earlier result and checkpoint it replaces.
TEST(Main, AnOutputNeverReplacesAnInputAnotherOutputOrAFileNotItsOwn) {
  TempDir dir;
  const std::string out = (dir / "r.json").string(), weights = (dir / "w.pt").string();
  testing::write_text(dir / "notes.txt", "a user's notes");
  expect_bad_input(ddpbench(quick_run({"--out", out, "--save-checkpoint", out})),
                   "--save-checkpoint '" + out + "' is the file --out '" + out + "' writes too");
  expect_bad_input(ddpbench(quick_run({"--out", (dir / "notes.txt").string()})),
                   "exists and is not a row's result file (what --out writes)");
  expect_bad_input(ddpbench(quick_run({"--save-checkpoint", (dir / "notes.txt").string()})),
                   "exists and is not a checkpoint (PyTorch's zip of named tensors)");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(testing::read_text(dir / "notes.txt"), "a user's notes");
  for (int twice = 0; twice < 2; ++twice) {
    const auto r = ddpbench(quick_run({"--out", out, "--save-checkpoint", weights}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string saved = testing::read_text(dir / "w.pt");
  expect_bad_input(ddpbench(quick_run({"--init-from", weights, "--save-checkpoint", (dir / "." / "w.pt").string()})),
                   "is the file --init-from '" + weights + "' reads");
  EXPECT_EQ(testing::read_text(dir / "w.pt"), saved);
  // A sweep's results.json (or a stored CI baseline, which is one) is a result file too, but no
  // run's: --out replaced its N rows with 1, exit 0.
  auto swept = nlohmann::json::parse(testing::read_text(out));
  swept["sweep"] = {{"preset", "ci"}};
  testing::write_text(dir / "results.json", swept.dump());
  expect_bad_input(ddpbench(quick_run({"--out", (dir / "results.json").string()})),
                   "exists and is not a row's result file (what --out writes)");
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir / "results.json")), swept);
}

// The eighth attack: a rank of another launcher's world (torchrun's variables) wrote its trace
// over a user's file at the trace's name, and over its own --init-from, exit 0.
TEST(Main, ARankOfAnotherLaunchersWorldKeepsTheOutputRuleForItsTraces) {
  TempDir dir;
  const std::string out = (dir / "r.json").string();
  testing::write_text(dir / "r.rank0.trace.json", "a user's notes");
  const std::vector<std::string> torchrun = {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
                                             "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29531"};
  std::vector<std::string> args = quick_run({"--strategy", "ddp", "--out", out, "--trace-steps", "0:0"});
  args.insert(args.begin(), testing::ddpbench_binary());
  const auto r = testing::run_process(args, torchrun);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("r.rank0.trace.json' exists and is not a rank's trace"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_text(dir / "r.rank0.trace.json"), "a user's notes");
}

TEST(Main, HelpExitsZero) {
  const auto r = ddpbench({"run", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--max-steps"), std::string::npos);
}

}  // namespace
}  // namespace ddpbench
