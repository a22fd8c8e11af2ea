// The launcher and distributed rows end to end, through the ddpbench binary: ranks started
// by `--nproc`, ranks started by someone else's launcher, and a rank that dies.
#include <gtest/gtest.h>

#include <algorithm>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

namespace ddpbench {
namespace {

using testing::ProcessResult;
using testing::TempDir;

// Seconds a failed row may take past its --timeout-s to stop its ranks and write its reports:
// a bound for a hang, far above what a loaded machine needs (a few seconds), so it never flakes.
constexpr int kTeardownS = 30;

std::vector<std::string> ddp_args(std::vector<std::string> extra) {
  std::vector<std::string> args = {testing::ddpbench_binary(), "run", "--strategy", "ddp", "--model", "tiny",
                                   "--num-classes", "10", "--dataset", "synthetic", "--synthetic-train-images",
                                   "1000", "--synthetic-test-images", "301", "--batch-size", "50", "--workers", "1",
                                   "--warmup-steps", "2", "--device", "cpu", "--timeout-s", "60"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json first_run(const std::filesystem::path& file) {
  return nlohmann::json::parse(testing::read_text(file))["runs"][0];
}

using testing::pids_with;

int processes_with(const std::string& marker) { return static_cast<int>(pids_with(marker).size()); }

// Whether a CUDA device is visible, asked of the build's Python and its torch (this test
// binary does not link LibTorch).
// A Python that does not start is no answer: it fails the test rather than skipping it (a bare
// "python3" did, silently, on the first GPU run).
bool cuda_available() {
  static const int exit_code =
      testing::run_process({DDPBENCH_TEST_PYTHON, "-c",
                            "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"})
          .exit_code;
  if (exit_code != 0 && exit_code != 1) {
    throw std::runtime_error(std::string("cannot ask ") + DDPBENCH_TEST_PYTHON + " for CUDA: exit " +
                             std::to_string(exit_code));
  }
  return exit_code == 0;
}

void expect_consistent_ddp_row(const nlohmann::json& run, int64_t world) {
  EXPECT_EQ(run["status"], "ok") << run.dump();
  EXPECT_EQ(run["world_size"], world);
  EXPECT_EQ(run["eval_images"], 301);  // every test image once, whatever the world size
  EXPECT_EQ(run["ranks"].size(), static_cast<std::size_t>(world));
  EXPECT_EQ(run["global_batch"], 50 * world);
  EXPECT_EQ(run["strategy_details"]["backend"], "gloo");
  const int64_t per_rank = (1000 + world - 1) / world;
  EXPECT_EQ(run["steps"], (per_rank + 49) / 50);
  // The row's peak memory is the largest rank's; each rank's is there too.
  int64_t largest = 0;
  for (const auto& rank : run["ranks"]) {
    EXPECT_GT(rank["peak_memory_bytes"].get<int64_t>(), 0);
    largest = std::max(largest, rank["peak_memory_bytes"].get<int64_t>());
  }
  if (world > 1) {
    EXPECT_EQ(run["peak_memory_bytes"].get<int64_t>(), largest);
  }
}

TEST(Launcher, NprocStartsTheRanksAndReportsOneRow) {
  for (int64_t world : {2, 3}) {
    TempDir dir;
    const auto r = testing::run_process(ddp_args({"--nproc", std::to_string(world), "--out", (dir / "r.json").string()}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("| ddp | ddp | " + std::to_string(world) + " | cpu | synthetic | ok |"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("[rank 0]"), std::string::npos) << r.err;
    expect_consistent_ddp_row(first_run(dir / "r.json"), world);
  }
}

// Waits until `count` processes carry `marker` (the launcher and its ranks are up).
bool wait_for_processes(const std::string& marker, int count) {
  for (int i = 0; i < 300 && processes_with(marker) < count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return processes_with(marker) >= count;
}

TEST(Launcher, ARankThatDiesFailsTheRunWithinSecondsAndLeavesNoProcess) {
  TempDir dir;
  const std::string marker = "fault-" + std::to_string(::getpid());
  const auto start = std::chrono::steady_clock::now();
  // A 600 s timeout: the row ends when the rank dies, not when the others time out.
  const auto r = testing::run_process(ddp_args({"--nproc", "3", "--name", marker, "--inject-fault-rank", "1",
                                                "--inject-fault-step", "3", "--timeout-s", "600", "--out",
                                                (dir / "r.json").string()}));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(elapsed, std::chrono::seconds(120));
  const auto run = first_run(dir / "r.json");
  EXPECT_EQ(run["status"], "failed");
  EXPECT_EQ(run["world_size"], 3);
  const std::string reason = run["reason"];
  EXPECT_NE(reason.find("rank 1 was killed by signal 9"), std::string::npos) << reason;
  EXPECT_NE(reason.find("--inject-fault-step 3: killing this rank"), std::string::npos) << reason;
  EXPECT_NE(r.out.find("| failed [1] |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("- [1] rank 1 was killed by signal 9"), std::string::npos) << r.out;
  EXPECT_EQ(processes_with(marker), 0);
}

// The pid of the rank process (RANK=`rank` in its environment) whose command line holds `marker`.
pid_t rank_process(const std::string& marker, int64_t rank) {
  pid_t found = 0;
  for (const pid_t pid : pids_with(marker)) {
    std::string environ = testing::read_text("/proc/" + std::to_string(pid) + "/environ");
    environ.insert(0, 1, '\0');
    if (environ.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos &&
        environ.find(std::string("\0DDPBENCH_LAUNCHED=1", 20)) != std::string::npos) {
      found = pid;
    }
  }
  return found;
}

// One of 2 ranks is frozen (SIGSTOP) mid-run, once rank 0 has said it trained 3 steps: the row
// fails within --timeout-s (and the teardown's seconds), its reason names the frozen rank and
// the phase, and no process is left (a stopped one too).
void freeze_a_rank_and_expect_it_named(int64_t frozen, const std::string& expected) {
  TempDir dir;
  const std::string marker = "freeze-" + std::to_string(frozen) + "-" + std::to_string(::getpid());
  auto args = ddp_args({"--nproc", "2", "--epochs", "1000", "--log-interval-steps", "1", "--name", marker, "--out",
                        (dir / "r.json").string()});
  *(std::find(args.begin(), args.end(), "--timeout-s") + 1) = "10";
  testing::SpawnedProcess launcher(args);
  ASSERT_TRUE(launcher.when_said("] step 3/").has_value()) << launcher.err_so_far();
  const pid_t rank = rank_process(marker, frozen);
  ASSERT_GT(rank, 0);
  ::kill(rank, SIGSTOP);
  const auto frozen_at = std::chrono::steady_clock::now();
  const auto r = launcher.wait();
  const auto detected_after = std::chrono::steady_clock::now() - frozen_at;
  std::cerr << "rank " << frozen << " frozen: the row failed after "
            << std::chrono::duration<double>(detected_after).count() << " s (timeout 10 s)\n";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(detected_after, std::chrono::seconds(10 + kTeardownS));
  const auto run = first_run(dir / "r.json");
  EXPECT_EQ(run["status"], "failed");
  const std::string reason = run["reason"];
  EXPECT_NE(reason.find(expected), std::string::npos) << reason;
  const bool phase_named = reason.find("allreduce of bucket ") != std::string::npos ||
                           reason.find("broadcast failed") != std::string::npos ||
                           reason.find("SyncBN forward failed") != std::string::npos ||
                           reason.find("SyncBN backward failed") != std::string::npos;
  EXPECT_TRUE(phase_named) << reason;
  EXPECT_EQ(processes_with(marker), 0);
}

TEST(Launcher, AFrozenRankIsNamedWithinTheTimeout) {
  freeze_a_rank_and_expect_it_named(1, "failed on rank 0: rank 1 stopped answering");
}

TEST(Launcher, AFrozenRankZeroIsNamedByTheOthers) {
  freeze_a_rank_and_expect_it_named(0, "failed on rank 1: rank 0 stopped answering");
}

// A rank alive and beating but stuck before a collective (--inject-fault-kind hang): named
// by its progress, as behind, within --timeout-s (and the teardown's seconds), with the phase
// the others wait in; no process is left.
TEST(Launcher, ARankStuckAliveIsNamedAsBehindWithinTheTimeout) {
  TempDir dir;
  const std::string marker = "hang-" + std::to_string(::getpid());
  auto args = ddp_args({"--nproc", "2", "--name", marker, "--inject-fault-rank", "1", "--inject-fault-step", "3",
                        "--inject-fault-kind", "hang", "--out", (dir / "r.json").string()});
  *(std::find(args.begin(), args.end(), "--timeout-s") + 1) = "10";
  testing::SpawnedProcess launcher(args);
  const auto hung_at = launcher.when_said("--inject-fault-step 3: hanging here");
  ASSERT_TRUE(hung_at.has_value()) << launcher.err_so_far();
  const auto r = launcher.wait();
  const double detected_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - *hung_at).count();
  std::cerr << "rank 1 hung: the row failed after " << detected_after << " s (timeout 10 s)\n";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(detected_after, 10 + kTeardownS);
  const auto run = first_run(dir / "r.json");
  EXPECT_EQ(run["status"], "failed");
  const std::string reason = run["reason"];
  std::cerr << "reason: " << reason << "\n";
  EXPECT_EQ(reason.rfind("rank 0: ", 0), 0u) << reason;
  EXPECT_NE(reason.find("failed on rank 0: rank 1 is behind, alive: "), std::string::npos) << reason;
  EXPECT_NE(reason.find("where rank 0 is in collective #"), std::string::npos) << reason;
  EXPECT_EQ(processes_with(marker), 0);
}

// As NCCL's watchdog does on a timeout, the healthy rank is aborted (SIGABRT) while the
// stuck one lives on: the launcher names the stuck rank from the progress records, never
// the aborted victim.
TEST(Launcher, TheRankTheProgressRecordsBlameIsNamedNotTheAbortedVictim) {
  TempDir dir;
  const std::string marker = "victim-" + std::to_string(::getpid());
  auto args = ddp_args({"--nproc", "2", "--name", marker, "--inject-fault-rank", "1", "--inject-fault-step", "3",
                        "--inject-fault-kind", "hang", "--out", (dir / "r.json").string()});
  *(std::find(args.begin(), args.end(), "--timeout-s") + 1) = "30";
  testing::SpawnedProcess launcher(args);
  ASSERT_TRUE(launcher.when_said("--inject-fault-step 3: hanging here").has_value()) << launcher.err_so_far();
  // Rank 0 waits in its collective past half the timeout (a watchdog aborts only after it),
  // and is aborted before Gloo's own timeout would end the wait: 22 s into a window of 15 to
  // 30 s, 7 s from either edge however late the line above was relayed.
  std::this_thread::sleep_for(std::chrono::seconds(22));
  const pid_t rank0 = rank_process(marker, 0);
  ASSERT_GT(rank0, 0);
  ::kill(rank0, SIGABRT);
  const auto r = launcher.wait();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string reason = first_run(dir / "r.json")["reason"];
  std::cerr << "reason: " << reason << "\n";
  EXPECT_EQ(reason.rfind("the ranks' progress records: rank 1 is behind, alive: ", 0), 0u) << reason;
  EXPECT_NE(reason.find("(then rank 0 was killed by signal 6"), std::string::npos) << reason;
  EXPECT_EQ(processes_with(marker), 0);
}

// A rank killed just after it entered a collective (the OOM killer mid-allreduce) is ahead of
// the others, which are behind it only because it went first: it is the cause, whichever rank.
TEST(AdversarialCulprit, ARankKilledInsideACollectiveIsBlamedNotTheRankBehindIt) {
  for (const int64_t killed : {1, 0}) {
    TempDir dir;
    const auto r = testing::run_process(ddp_args({"--nproc", "2", "--inject-fault-rank", std::to_string(killed),
                                                  "--inject-fault-step", "3", "--inject-fault-kind",
                                                  "kill-in-collective", "--out", (dir / "r.json").string()}));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const std::string reason = first_run(dir / "r.json")["reason"];
    std::cerr << "rank " << killed << " killed in a collective: " << reason << "\n";
    EXPECT_EQ(reason.rfind("rank " + std::to_string(killed) + " was killed by signal 9", 0), 0u) << reason;
    EXPECT_EQ(reason.find("(then rank " + std::to_string(killed)), std::string::npos) << reason;
  }
  // Only where a row has collectives.
  auto single = ddp_args({"--inject-fault-rank", "0", "--inject-fault-step", "1", "--inject-fault-kind",
                          "kill-in-collective"});
  *std::find(single.begin(), single.end(), "ddp") = "single";
  const auto refused = testing::run_process(single);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("kill-in-collective needs the ranks' collectives of --strategy ddp"), std::string::npos)
      << refused.err;
}

// A fault or a slowdown aimed at a rank the row does not have, or a step it never reaches,
// tests nothing: it is bad input, said before any rank starts, not a row that passes.
TEST(AdversarialCulprit, AFaultAimedAtNoRankOrStepIsBadInput) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--nproc", "2", "--inject-fault-rank", "7", "--inject-fault-step", "1"},
       "--inject-fault-rank 7: the row has 2 ranks (0-1)"},
      {{"--nproc", "2", "--inject-fault-rank", "1", "--inject-fault-step", "99"},
       "--inject-fault-step 99: the row runs 10 steps (0-9)"},
      {{"--nproc", "2", "--inject-slowdown", "0.5", "--inject-slowdown-rank", "5"},
       "--inject-slowdown-rank 5: the row has 2 ranks (0-1)"},
      {{"--inject-fault-rank", "1", "--inject-fault-step", "0"}, "--inject-fault-rank 1: the row has 1 rank (0)"},
  };
  for (const auto& [extra, says] : cases) {
    TempDir dir;
    auto args = ddp_args(extra);
    args.insert(args.end(), {"--out", (dir / "r.json").string()});
    const auto r = testing::run_process(args);
    EXPECT_EQ(r.exit_code, 2) << says << ": " << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "r.json")) << says;
  }
}

// A straggler in a row that succeeds: the rank slowed by --inject-slowdown-rank is the
// slowest by its own compute, whichever rank it is, though every rank's steps take as long.
// Slowed in its loader, in forward, at the start of backward or after the optimizer, the rank
// is named, with what held it (its loader, or its own compute).
TEST(AdversarialStraggler, ARankSlowedInAnyPhaseIsNamedWithItsCause) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"optimizer", 1}, {"data", 0}, {"forward", 1}, {"backward", 0}};
  for (const auto& [phase, slowed] : cases) {
    SCOPED_TRACE(phase);
    TempDir dir;
    const auto r = testing::run_process(ddp_args({"--nproc", "2", "--inject-slowdown", "1.0", "--inject-slowdown-rank",
                                                  std::to_string(slowed), "--inject-slowdown-phase", phase, "--out",
                                                  (dir / "r.json").string()}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto run = first_run(dir / "r.json");
    EXPECT_EQ(run["slowest_rank"], slowed) << run["ranks"].dump();
    // Flagged uneven (the reports' 1.10): a rank doing twice the work reads far beyond it.
    EXPECT_GT(run["rank_spread"].get<double>(), 1.1) << run["ranks"].dump();
    EXPECT_EQ(run["straggler_cause"], phase == "data" ? "data" : "compute") << run["ranks"].dump();
    const auto& ranks = run["ranks"];
    EXPECT_GT(ranks[1 - slowed]["wait_s"].get<double>(), ranks[slowed]["wait_s"].get<double>())
        << "the others wait for the straggler: " << ranks.dump();
  }
}

TEST(Launcher, InterruptStopsEveryRank) {
  TempDir dir;
  const std::string marker = "interrupt-" + std::to_string(::getpid());
  testing::SpawnedProcess launcher(ddp_args({"--nproc", "2", "--epochs", "1000", "--log-interval-steps", "1", "--name",
                                             marker, "--out", (dir / "r.json").string()}));
  ASSERT_TRUE(launcher.when_said("] step 3/").has_value()) << launcher.err_so_far();
  ::kill(launcher.pid(), SIGINT);
  const auto r = launcher.wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  // The row is interrupted, not failed, and keeps the steps rank 0 finished.
  const auto run = first_run(dir / "r.json");
  EXPECT_EQ(run["status"], "interrupted") << run["reason"];
  EXPECT_NE(run["reason"].get<std::string>().find("interrupted by"), std::string::npos) << run["reason"];
  EXPECT_GT(run["step_records"].size(), 0u);
  EXPECT_EQ(processes_with(marker), 0);
}

// A lone row: SIGTERM stops it after the step in flight, its steps kept, exit 143.
TEST(Launcher, SigtermStopsALoneRowKeepingItsSteps) {
  TempDir dir;
  const std::string marker = "sigterm-" + std::to_string(::getpid());
  auto args = ddp_args({"--epochs", "1000", "--log-interval-steps", "1", "--name", marker, "--out",
                        (dir / "r.json").string()});
  args[3] = "single";  // --strategy single
  testing::SpawnedProcess row(args);
  ASSERT_TRUE(row.when_said("] step 3/").has_value()) << row.err_so_far();
  ::kill(row.pid(), SIGTERM);
  const auto r = row.wait();
  EXPECT_EQ(r.exit_code, 143) << r.err;
  const auto run = first_run(dir / "r.json");
  EXPECT_EQ(run["status"], "interrupted");
  EXPECT_NE(run["reason"].get<std::string>().find("Terminated"), std::string::npos) << run["reason"];
  EXPECT_GT(run["steps"].get<int64_t>(), 0);
  EXPECT_EQ(run["step_records"].size(), run["steps"].get<std::size_t>());
}

TEST(Launcher, RanksDieWithAKilledLauncher) {
  const std::string marker = "orphan-" + std::to_string(::getpid());
  testing::SpawnedProcess launcher(ddp_args({"--nproc", "2", "--epochs", "1000", "--name", marker}));
  ASSERT_TRUE(wait_for_processes(marker, 3));
  ::kill(launcher.pid(), SIGKILL);
  launcher.wait();
  for (int i = 0; i < 100 && processes_with(marker) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(processes_with(marker), 0);
}

TEST(Launcher, RunsAsOneRankUnderAnExternalLauncher) {
  TempDir dir;
  const std::string port = std::to_string(29000 + ::getpid() % 3000);
  const std::vector<std::string> common = {"WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port,
                                           "LOCAL_WORLD_SIZE=2"};
  auto env_for = [&](int rank) {
    auto env = common;
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    return env;
  };
  // Each process is one rank and starts nothing.
  testing::SpawnedProcess rank0(ddp_args({"--out", (dir / "r.json").string()}), env_for(0));
  testing::SpawnedProcess rank1(ddp_args({"--out", (dir / "rank1.json").string()}), env_for(1));
  const auto r0 = rank0.wait();
  const auto r1 = rank1.wait();
  ASSERT_EQ(r0.exit_code, 0) << r0.err;
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r0.out.find("| ddp | ddp | 2 |"), std::string::npos) << r0.out;
  EXPECT_EQ(r1.out, "") << "only rank 0 reports";
  EXPECT_FALSE(std::filesystem::exists(dir / "rank1.json")) << "only rank 0 writes files";
  expect_consistent_ddp_row(first_run(dir / "r.json"), 2);
}

// Launch contexts are explicit: --nproc N starts N ranks here whatever SLURM or Open MPI
// say (their variables do not reach the ranks), and is a contradiction inside torchrun.
// SLURM's batch step (its tasks the allocation's, no step of them) and a world of one are no world
// --nproc would start a second of; a step of 2 tasks or mpirun's 2 processes are
// (Launcher.DistributedInputErrorsExitTwo).
TEST(Launcher, AnExplicitNprocWinsOverSlurmsBatchStepAndAWorldOfOne) {
  const std::vector<std::vector<std::string>> contexts = {{"SLURM_PROCID=0", "SLURM_NTASKS=1"},
                                                          {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0"},
                                                          {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1"}};
  for (const auto& context : contexts) {
    TempDir dir;
    const auto r = testing::run_process(ddp_args({"--nproc", "2", "--timeout-s", "20", "--out", (dir / "r.json").string()}),
                                        context);
    ASSERT_EQ(r.exit_code, 0) << context.front() << ": " << r.err;
    expect_consistent_ddp_row(first_run(dir / "r.json"), 2);
  }
}

TEST(Launcher, NprocInsideATorchrunWorldIsBadInputNamingTheVariable) {
  TempDir dir;
  const auto r = testing::run_process(ddp_args({"--nproc", "2", "--out", (dir / "r.json").string()}),
                                      {"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=29999"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--nproc 2: this process is already a rank of a torchrun world (RANK=0)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "r.json"));
}

TEST(Launcher, WithoutNprocSlurmAndMpiVariablesMakeThisProcessARank) {
  for (const auto& context : std::vector<std::vector<std::string>>{{"SLURM_PROCID=0", "SLURM_NTASKS=1"},
                                                                   {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1"}}) {
    TempDir dir;
    auto env = context;
    env.push_back("MASTER_PORT=" + std::to_string(29000 + (::getpid() + 700) % 3000));
    const auto r = testing::run_process(ddp_args({"--out", (dir / "r.json").string()}), env);
    ASSERT_EQ(r.exit_code, 0) << context.front() << ": " << r.err;
    expect_consistent_ddp_row(first_run(dir / "r.json"), 1);
  }
}

// torchrun itself, where the Python that provides LibTorch has it: its agent serves the
// store, the ranks connect to it.
TEST(Launcher, RunsUnderTorchrun) {
  const std::string python = DDPBENCH_TEST_PYTHON;
  if (python.empty() || testing::run_process({python, "-c", "import torch.distributed.run"}).exit_code != 0) {
    GTEST_SKIP() << "no Python with torch.distributed.run";
  }
  TempDir dir;
  std::vector<std::string> args = {python, "-m", "torch.distributed.run", "--no-python", "--nproc-per-node", "2",
                                   "--master-port", std::to_string(29000 + (::getpid() + 1500) % 3000)};
  const auto rank_args = ddp_args({"--out", (dir / "r.json").string()});
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  const auto r = testing::run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_consistent_ddp_row(first_run(dir / "r.json"), 2);
}

TEST(Launcher, OneProcessIsAWorldOfOne) {
  TempDir dir;
  const auto r = testing::run_process(ddp_args({"--out", (dir / "r.json").string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_consistent_ddp_row(first_run(dir / "r.json"), 1);
}

TEST(Launcher, DistributedInputErrorsExitTwo) {
  const auto single = testing::run_process({testing::ddpbench_binary(), "run", "--nproc", "2", "--model", "tiny"});
  EXPECT_EQ(single.exit_code, 2);
  EXPECT_NE(single.err.find("--nproc 2: strategy 'single' runs in one process"), std::string::npos) << single.err;
  const auto nccl = testing::run_process(ddp_args({"--backend", "nccl"}));
  EXPECT_EQ(nccl.exit_code, 2);
  EXPECT_NE(nccl.err.find("--backend nccl needs CUDA devices"), std::string::npos) << nccl.err;
  const auto bad_env = testing::run_process(ddp_args({}), {"RANK=3", "WORLD_SIZE=2"});
  EXPECT_EQ(bad_env.exit_code, 2);
  EXPECT_NE(bad_env.err.find("RANK=3 is outside WORLD_SIZE=2"), std::string::npos) << bad_env.err;
  // --nproc 2 in each of srun's or mpirun's 2 processes started two worlds of 2, both writing --out;
  // in SLURM's batch step (no step of tasks) --nproc starts the ranks, as anywhere.
  for (const std::vector<std::string>& world :
       {std::vector<std::string>{"SLURM_JOB_ID=7", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_NUM_TASKS=2",
                                 "SLURM_LOCALID=0", "SLURM_NTASKS_PER_NODE=2", "MASTER_ADDR=127.0.0.1"},
        std::vector<std::string>{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE=2"}}) {
    const auto twice = testing::run_process(ddp_args({"--nproc", "2"}), world);
    EXPECT_EQ(twice.exit_code, 2) << world[0] << ": " << twice.err;
    EXPECT_NE(twice.err.find("--nproc 2: this process is already one of 2 processes"), std::string::npos)
        << twice.err;
  }
  // The launcher checks the port its ranks would meet at before starting any.
  const auto bad_port = testing::run_process(ddp_args({"--nproc", "2"}), {"MASTER_PORT=29x"});
  EXPECT_EQ(bad_port.exit_code, 2);
  EXPECT_NE(bad_port.err.find("environment variable MASTER_PORT='29x' is not an integer"), std::string::npos)
      << bad_port.err;
}

// Bad input is exit 2, one line and no result file whoever finds it: the launcher before any rank
// starts (missing or truncated CIFAR-10, a missing --init-from, NCCL on --device cpu) or a rank
// (--init-from that is no checkpoint, NCCL on a device that is the CPU by auto), with --nproc 1 as
// with --nproc 2, where the ranks' findings made a failed row and exit 1.
TEST(Launcher, BadInputIsExitTwoOneLineAndNoFileUnderNprocTwoAsUnderOne) {
  TempDir dir;
  std::filesystem::create_directories(dir / "cut/cifar-10-batches-bin");
  for (const char* f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                        "data_batch_5.bin", "test_batch.bin"}) {
    testing::write_text(dir / "cut/cifar-10-batches-bin" / f, std::string(3073 * 3, '\1'));
  }
  testing::write_text(dir / "junk.pt", "junk");
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--dataset", "cifar10", "--data-dir", (dir / "none").string()}, "no CIFAR-10 binary files under"},
      {{"--dataset", "cifar10", "--data-dir", (dir / "cut").string()}, "data_batch_1.bin' is truncated"},
      {{"--init-from", (dir / "absent.pt").string()}, "--init-from: no file"},
      {{"--init-from", (dir / "junk.pt").string()}, "not a PyTorch file of named tensors"},
      {{"--backend", "nccl", "--device", "cpu"}, "--backend nccl needs CUDA devices"},
  };
  if (!cuda_available())
    cases.push_back({{"--backend", "nccl", "--device", "auto"}, "--backend nccl needs CUDA devices"});
  for (const char* nproc : {"1", "2"}) {
    for (const auto& [extra, says] : cases) {
      auto args = ddp_args(extra);
      args.insert(args.end(), {"--nproc", nproc, "--max-steps", "3", "--out", (dir / "r.json").string()});
      const auto r = testing::run_process(args);
      EXPECT_EQ(r.exit_code, 2) << "--nproc " << nproc << ", " << says << ": " << r.err;
      EXPECT_NE(r.err.find("ddpbench: error: "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
      EXPECT_EQ(r.err.find("(torchrun, 1 node)"), std::string::npos) << "ranks ddpbench started: " << r.err;
      EXPECT_FALSE(std::filesystem::exists(dir / "r.json")) << "--nproc " << nproc << ", " << says;
    }
  }
}

// torchrun --nproc_per_node 2 ddpbench run --strategy single: both processes trained the whole row
// and wrote the same --out.
TEST(Launcher, AOneProcessStrategyInALaunchersWorldIsRefused) {
  TempDir dir;
  auto args = ddp_args({"--strategy", "single", "--out", (dir / "r.json").string()});
  const auto r = testing::run_process(args, {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                                             "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29999"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--strategy single runs in one process, but this process is one of a world of 2 (torchrun"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "r.json"));
  // A step srun started with two tasks is such a world; SLURM's batch step (the allocation's
  // SLURM_NTASKS, no step of tasks) is not, nor are variables a one-process row would not use.
  const auto srun_step = testing::run_process(args, {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                                                     "SLURM_STEP_NUM_TASKS=2", "MASTER_ADDR=127.0.0.1",
                                                     "MASTER_PORT=29999"});
  EXPECT_EQ(srun_step.exit_code, 2) << srun_step.err;
  EXPECT_NE(srun_step.err.find("one of a world of 2 (slurm"), std::string::npos) << srun_step.err;
  for (const auto& batch : std::vector<std::vector<std::string>>{{"SLURM_PROCID=0", "SLURM_NTASKS=4"}, {"RANK=0"}}) {
    auto quick = args;
    quick.insert(quick.end(), {"--max-steps", "2", "--max-eval-batches", "1"});
    const auto r_batch = testing::run_process(quick, batch);
    EXPECT_EQ(r_batch.exit_code, 0) << batch.front() << ": " << r_batch.err;
  }
}

// --nproc 1000 was killed by the OOM killer without a word from ddpbench.
TEST(Launcher, MoreRanksThanThisMachinesMemoryHoldsAreRefusedWithALine) {
  TempDir dir;
  const auto r = testing::run_process(
      ddp_args({"--nproc", "1000", "--synthetic-train-images", "100000", "--out", (dir / "r.json").string()}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("1000 ranks on this machine (--nproc 1000) need at least"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "r.json"));
}

// ncclCommInitRank waits for every rank: a peer that never starts is named within the timeout,
// where it once held rank 0 forever, and the rank's process ends though a thread is still
// inside ncclCommInitRank and NCCL's watchdog is alive (a failed rank leaves without static
// destructors, which could wait on them or crash into them).
TEST(GpuLauncher, AnNcclPeerThatNeverStartsIsNamedAndItsRankExits) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  const std::vector<std::string> rank0_of_two = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
                                                 "MASTER_ADDR=127.0.0.1",
                                                 "MASTER_PORT=" + std::to_string(29000 + (::getpid() + 1500) % 3000)};
  testing::SpawnedProcess rank0(
      ddp_args({"--device", "cuda:0", "--backend", "nccl", "--timeout-s", "10", "--out", (dir / "r.json").string()}),
      rank0_of_two);
  const auto r = rank0.wait(std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << "rank 0 never ended: " << r.err;
  EXPECT_LT(r.elapsed_s, 10 + 20) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto run = first_run(dir / "r.json");
  EXPECT_EQ(run["status"], "failed");
  const std::string reason = run["reason"];
  EXPECT_NE(reason.find("rendezvous failed on rank 0"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rank 1 never joined"), std::string::npos) << reason;
}

// Two SLURM runs whose ports collide (jobs 3 and 10003, the same step): each run's store keys
// are its own, so a rank of one that reaches the other's store never joins it. Run A fails
// naming its missing rank; it never reports a world it did not have.
TEST(Launcher, ARankOfAnotherRunOnTheSamePortNeverJoins) {
  TempDir dir;
  const auto slurm = [&](int rank, const std::string& job) {
    return std::vector<std::string>{"SLURM_PROCID=" + std::to_string(rank), "SLURM_NTASKS=2", "SLURM_LOCALID=" +
                                    std::to_string(rank), "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0",
                                    "MASTER_ADDR=127.0.0.1"};
  };
  // B's rank starts first and keeps trying the port for 60 s, so it reaches A's store as soon
  // as A serves it, however slowly LibTorch loads here; A waits 10 s for a rank 1 that never joins.
  testing::SpawnedProcess b1(ddp_args({"--timeout-s", "60", "--out", (dir / "b1.json").string()}), slurm(1, "10003"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  testing::SpawnedProcess a0(ddp_args({"--timeout-s", "10", "--out", (dir / "a.json").string()}), slurm(0, "3"));
  const auto rb = b1.wait(std::chrono::seconds(120));
  const auto ra = a0.wait(std::chrono::seconds(120));
  ASSERT_FALSE(ra.timed_out || rb.timed_out);
  EXPECT_EQ(ra.exit_code, 1) << ra.err;
  EXPECT_NE(ra.err.find("the ranks meet at 127.0.0.1:"), std::string::npos) << ra.err;
  const auto run = first_run(dir / "a.json");
  EXPECT_EQ(run["status"], "failed");
  EXPECT_NE(run["reason"].get<std::string>().find("rank 1 never joined"), std::string::npos) << run["reason"];
  EXPECT_EQ(rb.exit_code, 1) << rb.err;
  // The other run's rank says whose store it reached.
  EXPECT_NE(rb.err.find("the store there is another run's (slurm-3.0), not this run's (slurm-10003.0)"),
            std::string::npos)
      << rb.err;
}

// Something that takes the connection on the master's port but is no c10d store holds c10d's
// client in its retries: the rank still gives up within its timeout, saying so.
TEST(Launcher, AMasterPortHeldByAnotherServiceFailsWithinTheTimeout) {
  TempDir dir;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(fd, 16), 0);  // connections are taken by the kernel, never answered
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));
  testing::SpawnedProcess rank1(ddp_args({"--timeout-s", "5", "--out", (dir / "r.json").string()}),
                                {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port});
  const auto r = rank1.wait(std::chrono::seconds(90));
  ::close(fd);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_LT(r.elapsed_s, 5 + kTeardownS) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("could not reach the store at 127.0.0.1:" + port), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("does not answer as a c10d store"), std::string::npos) << r.err;
}

TEST(Launcher, CudaRanksBeyondTheVisibleGpusAreSkipped) {
  TempDir dir;
  const auto r = testing::run_process(
      ddp_args({"--nproc", "64", "--device", "cuda", "--out", (dir / "r.json").string()}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto run = first_run(dir / "r.json");
  EXPECT_EQ(run["status"], "skipped");
  EXPECT_NE(run["reason"].get<std::string>().find("needs 64 CUDA devices"), std::string::npos);
}

}  // namespace
}  // namespace ddpbench
