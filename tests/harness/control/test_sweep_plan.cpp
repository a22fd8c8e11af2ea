#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "harness/base/input_error.hpp"
#include "harness/control/run_options.hpp"
#include "harness/control/sweep.hpp"
#include "reports/compare.hpp"
#include "support/proven_documents.hpp"
#include "reports/result_file.hpp"
#include "support/sample_results.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

SweepEnvironment machine(int64_t gpus) {
  SweepEnvironment env;
  env.visible_gpus = gpus;
  env.strategies = {"single", "dp", "ddp", "torch-single", "torch-dp", "torch-ddp"};
  env.pytorch_twins = {{"single", "torch-single"}, {"dp", "torch-dp"}, {"ddp", "torch-ddp"}};
  env.machine.cpu_cores = 2;
  return env;
}

const PlannedRow& row(const SweepPlan& plan, const std::string& name, const std::string& mode) {
  for (const auto& r : plan.rows) {
    if (r.info.name == name && r.info.mode == mode) return r;
  }
  throw std::runtime_error("no row " + name + " " + mode);
}

TEST(Sweep, TheTutorialTableOnAFourGpuMachine) {
  SweepCommand cmd;
  const SweepPlan plan = plan_sweep(cmd, machine(4));
  EXPECT_EQ(plan.info.preset, "tutorial");
  EXPECT_EQ(plan.info.baseline_row, "single");
  EXPECT_TRUE(plan.info.note.empty());
  ASSERT_EQ(plan.rows.size(), 10u);  // five rows, two modes
  const auto& single = row(plan, "single", "faithful");
  EXPECT_EQ(single.config.batch_size, 256);
  EXPECT_EQ(single.config.num_classes, 1000);
  EXPECT_EQ(single.config.loader, LoaderKind::host);
  EXPECT_DOUBLE_EQ(single.info.tutorial_seconds, 13.2);
  const auto& dp = row(plan, "dp-4gpu", "faithful");
  EXPECT_EQ(dp.config.batch_size, 1024);  // the published DataParallel row's global batch
  EXPECT_EQ(dp.config.workers, 20);
  EXPECT_EQ(dp.config.devices, "0,1,2,3");
  EXPECT_EQ(row(plan, "ddp-4gpu-amp", "faithful").config.amp, AmpMode::fp16);
  EXPECT_EQ(row(plan, "ddp-4gpu", "faithful").config.nproc, 4);
  // Controlled: one global batch of 1024, split over processes; device loader; 10 classes.
  EXPECT_EQ(row(plan, "single", "controlled").config.batch_size, 1024);
  EXPECT_EQ(row(plan, "dp-4gpu", "controlled").config.batch_size, 1024);
  EXPECT_EQ(row(plan, "ddp-2gpu", "controlled").config.batch_size, 512);
  EXPECT_EQ(row(plan, "ddp-4gpu", "controlled").config.batch_size, 256);
  EXPECT_EQ(row(plan, "ddp-4gpu", "controlled").config.loader, LoaderKind::device);
  EXPECT_EQ(row(plan, "ddp-4gpu", "controlled").config.num_classes, 10);
  for (const auto& r : plan.rows) EXPECT_FALSE(r.skip_reason.has_value()) << r.info.name;
  EXPECT_EQ(single.result_file, std::filesystem::path("results/rows/faithful/single.json"));
  EXPECT_EQ(single.config.out, "results/rows/faithful/single.json");
  EXPECT_EQ(single.config.name, "single");
}

TEST(Sweep, RowsNeedingMoreGpusThanPresentAreSkipped) {
  SweepCommand cmd;
  cmd.mode = "faithful";
  const SweepPlan plan = plan_sweep(cmd, machine(2));
  EXPECT_FALSE(row(plan, "ddp-2gpu", "faithful").skip_reason.has_value());
  EXPECT_EQ(row(plan, "ddp-4gpu", "faithful").skip_reason.value_or(""), "needs 4 GPUs, 2 visible");
  EXPECT_EQ(plan.info.rows.size(), 5u);
  SweepEnvironment no_dp = machine(4);
  no_dp.strategies = {"single", "ddp"};
  EXPECT_EQ(row(plan_sweep(cmd, no_dp), "dp-4gpu", "faithful").skip_reason.value_or(""),
            "strategy 'dp' is not in this build");
  // Rows told to run on the CPU need no GPU.
  cmd.overrides = {{"device", "cpu"}};
  EXPECT_FALSE(row(plan_sweep(cmd, machine(2)), "ddp-4gpu", "faithful").skip_reason.has_value());
}

TEST(Sweep, WithoutAGpuTheCpuPresetRunsTheSameRowsCutShort) {
  SweepCommand cmd;
  SweepEnvironment cpu_with_bf16 = machine(0);
  cpu_with_bf16.cpu_native_bf16 = true;
  const SweepPlan plan = plan_sweep(cmd, cpu_with_bf16);
  EXPECT_EQ(plan.info.preset, "cpu");
  EXPECT_NE(plan.info.note.find("No GPU on this machine: the CPU preset"), std::string::npos);
  for (const auto& r : plan.rows) {
    EXPECT_FALSE(r.skip_reason.has_value()) << r.info.name;
    EXPECT_EQ(r.config.device, "cpu");
    EXPECT_TRUE(r.config.max_steps.has_value());
  }
  EXPECT_EQ(row(plan, "single", "faithful").config.batch_size, 32);
  EXPECT_EQ(row(plan, "dp-4gpu", "faithful").config.batch_size, 128);
  EXPECT_EQ(row(plan, "dp-4gpu", "faithful").config.devices, "cpu,cpu,cpu,cpu");
  EXPECT_EQ(row(plan, "ddp-4gpu", "controlled").config.batch_size, 32);  // 1024 / 8 over 4 ranks
  EXPECT_NE(plan.info.note.find("The rows run as Gloo ranks and CPU replicas sharing 2 cores"), std::string::npos)
      << plan.info.note;
  // The note is the rows': a sweep of the single row alone spoke of Gloo ranks it did not run.
  SweepCommand single_only;
  single_only.rows = {"single"};
  const std::string note = plan_sweep(single_only, cpu_with_bf16).info.note;
  EXPECT_NE(note.find("The rows run in one process each sharing 2 cores"), std::string::npos) << note;
  // Asked for explicitly on a GPU machine too.
  cmd.table = "cpu";
  EXPECT_EQ(plan_sweep(cmd, machine(8)).info.preset, "cpu");
}

TEST(Sweep, TheCpuPresetSkipsMixedPrecisionRowsUnlessTheCpuHasHalfPrecisionOrTheRowIsNamed) {
  SweepCommand cmd;
  cmd.mode = "faithful";
  const auto reason = [&](const SweepEnvironment& env) {
    return row(plan_sweep(cmd, env), "ddp-4gpu-amp", "faithful").skip_reason.value_or("");
  };
  EXPECT_NE(reason(machine(0)).find("this CPU has no bf16 arithmetic"), std::string::npos) << reason(machine(0));
  SweepEnvironment fp16_only = machine(0);
  fp16_only.cpu_native_fp16 = true;
  EXPECT_NE(reason(fp16_only).find("~25x slower even with AVX512-FP16"), std::string::npos)
      << "LibTorch's CPU fp16 is no faster for the CPU having it: " << reason(fp16_only);
  EXPECT_FALSE(row(plan_sweep(cmd, machine(0)), "ddp-4gpu", "faithful").skip_reason.has_value());
  SweepEnvironment cpu_with_bf16 = machine(0);
  cpu_with_bf16.cpu_native_bf16 = true;
  EXPECT_EQ(reason(cpu_with_bf16), "");
  EXPECT_EQ(reason(machine(4)), "") << "GPU rows do not depend on the CPU";
  cmd.rows = {"ddp-4gpu-amp"};
  EXPECT_EQ(reason(machine(0)), "") << "a row named in --rows runs";
  cmd.rows.clear();
  cmd.overrides = {{"amp", "bf16"}};
  EXPECT_EQ(reason(machine(0)), "") << "--amp asks for mixed precision on every row";
}

// bf16 in place of fp16 wherever the CPU computes bf16, said in the row's notes: even with
// AVX512-FP16, LibTorch's CPU fp16 autocast measured ~25x slower than fp32 (ResNet-50, 2 images/s
// against 54 on an Emerald Rapids Xeon), while bf16 runs on oneDNN's AMX kernels.
TEST(Sweep, TheCpuPresetRunsBf16InPlaceOfFp16WhereverTheCpuHasBf16) {
  SweepCommand cmd;
  cmd.mode = "faithful";
  SweepEnvironment bf16_only = machine(0);
  bf16_only.cpu_native_bf16 = true;
  const PlannedRow amp = row(plan_sweep(cmd, bf16_only), "ddp-4gpu-amp", "faithful");
  EXPECT_EQ(amp.config.amp, AmpMode::bf16);
  ASSERT_EQ(amp.notes.size(), 1u);
  EXPECT_NE(amp.notes.front().find("bf16, not the tutorial's fp16"), std::string::npos);
  SweepEnvironment both = bf16_only;
  both.cpu_native_fp16 = true;
  const PlannedRow with_fp16 = row(plan_sweep(cmd, both), "ddp-4gpu-amp", "faithful");
  EXPECT_EQ(with_fp16.config.amp, AmpMode::bf16);
  ASSERT_EQ(with_fp16.notes.size(), 1u);
  EXPECT_NE(with_fp16.notes.front().find("~25x slower than fp32 even with AVX512-FP16"), std::string::npos)
      << with_fp16.notes.front();
  EXPECT_EQ(row(plan_sweep(cmd, machine(4)), "ddp-4gpu-amp", "faithful").config.amp, AmpMode::fp16)
      << "GPU rows run the tutorial's fp16";
  // Naming the row lifts the skip where the CPU has no bf16; it never brings back fp16.
  cmd.rows = {"ddp-4gpu-amp"};
  EXPECT_EQ(row(plan_sweep(cmd, both), "ddp-4gpu-amp", "faithful").config.amp, AmpMode::bf16);
  EXPECT_EQ(row(plan_sweep(cmd, machine(0)), "ddp-4gpu-amp", "faithful").config.amp, AmpMode::fp16)
      << "no bf16 here: the row named runs as defined";
  cmd.overrides = {{"amp", "fp16"}};
  EXPECT_EQ(row(plan_sweep(cmd, both), "ddp-4gpu-amp", "faithful").config.amp, AmpMode::fp16)
      << "--amp given is what runs";
}

// A sweep row named as another's twin or run without SyncBatchNorm would share its result
// file and its place in the reports: bad input, naming both.
TEST(Sweep, ARowNamedAsAnotherRowsTwinOrComparisonRunIsBadInput) {
  for (const std::string name : {"ddp-2.no-sync-bn", "ddp-2.torch"}) {
    SCOPED_TRACE(name);
    testing::TempDir dir;
    testing::write_text(dir / "s.json", R"({"defaults": {"model": "tiny", "device": "cpu"},
      "rows": [{"name": "ddp-2", "options": {"strategy": "ddp", "nproc": 2}},
               {"name": ")" + name + R"(", "options": {"strategy": "ddp", "nproc": 2}}]})");
    SweepCommand cmd;
    cmd.file = (dir / "s.json").string();
    cmd.mode = "faithful";
    cmd.reference = true;
    try {
      plan_sweep(cmd, machine(0));
      FAIL() << "a row named " << name << " was planned beside ddp-2's";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("row '" + name + "': that name is also"), std::string::npos) << what;
      EXPECT_NE(what.find("'ddp-2'"), std::string::npos) << what;
    }
    cmd.reference = false;
    EXPECT_NO_THROW(plan_sweep(cmd, machine(0))) << "without twins there is nothing to collide with";
  }
}

// PyTorch's SyncBatchNorm is CUDA-only. On CPU ranks each SyncBatchNorm DDP row keeps its
// place in the table as the tutorial ran it, and its comparison with PyTorch runs both sides
// without: ddpbench's row once more (ROW.no-sync-bn, right before the twin), and the twin.
TEST(Sweep, OnCpusEachSyncBnDdpRowIsComparedWithPyTorchWithoutSyncBnOnBothSides) {
  SweepCommand cmd;
  cmd.reference = true;
  cmd.repeat = 2;
  SweepEnvironment cpu = machine(0);
  cpu.cpu_native_bf16 = true;
  const SweepPlan plan = plan_sweep(cmd, cpu);
  for (const std::string mode : {"faithful", "controlled"}) {
    for (const std::string name : {"ddp-2gpu", "ddp-4gpu", "ddp-4gpu-amp"}) {
      SCOPED_TRACE(name + " (" + mode + ")");
      const PlannedRow& ours = row(plan, name, mode);
      EXPECT_TRUE(ours.config.sync_bn) << "the table's row runs as the tutorial ran it";
      const PlannedRow& without = row(plan, name + ".no-sync-bn", mode);
      const PlannedRow& twin = row(plan, name + ".torch", mode);
      EXPECT_FALSE(without.config.sync_bn);
      EXPECT_EQ(without.config.strategy, "ddp");
      EXPECT_FALSE(twin.config.sync_bn);
      EXPECT_FALSE(twin.skip_reason.has_value()) << twin.skip_reason.value_or("");
      EXPECT_EQ(twin.info.reference_of, name);
      EXPECT_EQ(twin.info.compared_with, name + ".no-sync-bn");
      EXPECT_EQ(twin.info.compared_without, "SyncBatchNorm: PyTorch's runs on CUDA only");
      EXPECT_TRUE(without.info.reference_of.empty());
      EXPECT_EQ(without.config.amp, ours.config.amp);
      EXPECT_EQ(without.config.batch_size, ours.config.batch_size);
      EXPECT_EQ(without.result_file.filename(), name + ".no-sync-bn.r0.json");
    }
    EXPECT_THROW(row(plan, "single.no-sync-bn", mode), std::exception) << "a single row has no SyncBatchNorm";
    EXPECT_THROW(row(plan, "dp-4gpu.no-sync-bn", mode), std::exception);
  }
  // Each repetition: the row, ddpbench without SyncBatchNorm, then the twin, back to back.
  std::vector<std::string> order;
  for (const auto& r : plan.rows) {
    if (r.info.mode == "faithful" && r.info.name.starts_with("ddp-2gpu")) order.push_back(r.info.name);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"ddp-2gpu", "ddp-2gpu.no-sync-bn", "ddp-2gpu.torch", "ddp-2gpu",
                                             "ddp-2gpu.no-sync-bn", "ddp-2gpu.torch"}));
  // On GPUs the twin runs SyncBatchNorm itself: no extra run.
  const SweepPlan gpu = plan_sweep(cmd, machine(4));
  EXPECT_TRUE(row(gpu, "ddp-2gpu.torch", "faithful").config.sync_bn);
  EXPECT_TRUE(row(gpu, "ddp-2gpu.torch", "faithful").info.compared_with.empty());
  EXPECT_THROW(row(gpu, "ddp-2gpu.no-sync-bn", "faithful"), std::exception);
  // A row without SyncBatchNorm is compared as it is.
  cmd.overrides = {{"sync-bn", "false"}};
  EXPECT_THROW(row(plan_sweep(cmd, cpu), "ddp-2gpu.no-sync-bn", "faithful"), std::exception);
}

TEST(Sweep, ARowThatRanAnotherConfigurationIsNamedOptionByOption) {
  SweepCommand cmd;
  cmd.rows = {"single"};
  cmd.mode = "faithful";
  cmd.overrides = {{"preset", "fast"}, {"amp", "off"}};
  const PlannedRow planned = row(plan_sweep(cmd, machine(0)), "single", "faithful");
  EXPECT_EQ(planned.config.amp, AmpMode::off);
  RunResult ran;
  ran.config = run_config_to_json(planned.config);
  ran.config["out"] = "elsewhere.json";
  EXPECT_EQ(plan_difference(planned.config, ran), "") << "output paths do not change what is measured";
  ran.config["amp"] = "bf16";
  EXPECT_EQ(plan_difference(planned.config, ran), "amp \"off\" vs \"bf16\"");
}

// --resume's rule (measured_elsewhere): a row of another machine or build, by every aspect of
// compare's environment rule, or of another revision, is not this sweep's.
// Under srun's --kill-on-bad-exit a failed task stops the others: rank 0, stopped by srun's SIGTERM,
// says "interrupted", where its peer failed; the row failed, with srun's words, unless the sweep
// itself was signalled.
TEST(Sweep, ARowSrunStoppedAfterATaskFailedIsFailedWithSrunsWords) {
  PlannedRow row;
  row.launch = {"/usr/bin/srun", "--kill-on-bad-exit=1"};
  RunResult result;
  result.status = RunStatus::interrupted;
  result.reason = "interrupted by Terminated";
  ProcessExit srun;
  srun.label = "row ddp-2";
  srun.exit_code = 1;
  srun.stderr_tail = {"ddpbench: rank 1: --inject-fault-step 3: exiting", "srun: error: node2: task 1: Exited with "
                                                                           "exit code 1"};
  const RunResult failed = stopped_by_srun(row, result, srun, false);
  EXPECT_EQ(failed.status, RunStatus::failed);
  EXPECT_NE(failed.reason.find("a task failed and srun stopped the others (--kill-on-bad-exit): rank 1 on node2: "
                               "Exited with exit code 1; row ddp-2 exited with status 1: ddpbench: rank 1: "
                               "--inject-fault-step 3"),
            std::string::npos)
      << failed.reason;
  // The rank that failed named though srun's last lines are its stop of the others (the cluster's
  // test: rank 1 was named nowhere in the reason, only task 0's exit 143 and the step cancelled).
  srun.exit_code = 137;
  srun.stderr_tail = {"srun: error: node2: task 1: Exited with exit code 3",
                      "slurmstepd-node1: error: *** STEP 9.3 ON node1 CANCELLED AT 2026-12-07T15:12:19 ***",
                      "srun: error: node1: task 0: Exited with exit code 143", "srun: Force Terminated StepId=9.3"};
  EXPECT_NE(stopped_by_srun(row, result, srun, false).reason.find(": rank 1 on node2: Exited with exit code 3; "),
            std::string::npos)
      << stopped_by_srun(row, result, srun, false).reason;
  srun.stderr_tail = {"srun: error: node1: task 0: Exited with exit code 143"};
  EXPECT_EQ(stopped_by_srun(row, result, srun, false).reason.find("rank 0"), std::string::npos)
      << "a task srun stopped is not the one that failed";
  EXPECT_EQ(stopped_by_srun(row, result, srun, true).status, RunStatus::interrupted) << "the sweep was signalled";
  row.launch.clear();
  EXPECT_EQ(stopped_by_srun(row, result, srun, false).status, RunStatus::interrupted) << "not srun's";
}

TEST(Sweep, ARowMeasuredOnAnotherMachineBuildOrRevisionIsNotKept) {
  Environment here;
  for (const auto& [field, value] : {std::pair{&Environment::cpu_model, "Xeon"}, {&Environment::build_type, "Release"},
                                     {&Environment::omp_num_threads, "unset"}, {&Environment::cpu_affinity, "0-1"},
                                     {&Environment::git_revision, "abc"}, {&Environment::host, "ci-1"}}) {
    here.*field = value;
  }
  EXPECT_EQ(measured_elsewhere(here, here), "");
  Environment other_host = here;
  other_host.host = "ci-2";  // the host alone is no other machine's measurement (hosts are renamed)
  EXPECT_EQ(measured_elsewhere(other_host, here), "");
  const auto edited = [&](const std::function<void(Environment&)>& edit) {
    Environment before = here;
    edit(before);
    return measured_elsewhere(before, here);
  };
  EXPECT_EQ(edited([](Environment& e) { e.git_revision = "def"; }), "git revision: def vs abc");
  EXPECT_EQ(edited([](Environment& e) { e.compiler = "Clang 17"; }), "compiler: Clang 17 vs ");
  EXPECT_EQ(edited([](Environment& e) { e.cpu_affinity = "0"; }), "CPUs the process could use: 0 vs 0-1");
  EXPECT_EQ(edited([](Environment& e) { e.omp_num_threads = "1"; }), "OMP_NUM_THREADS: 1 vs unset");
  EXPECT_EQ(edited([](Environment& e) { e.build_type = "Debug"; }), "build type: Debug vs Release");
  EXPECT_EQ(edited([](Environment& e) { e.libtorch_version = "2.10.0"; }), "LibTorch: 2.10.0 vs not recorded");
  // A row file edited to leave out what this build records proves nothing of it: such a row was
  // kept from a run of one thread (the one rule compare reads too: only one file saying it differs).
  EXPECT_EQ(edited([](Environment& e) { e.omp_num_threads.clear(); }), "OMP_NUM_THREADS: not recorded vs unset");
  EXPECT_EQ(edited([](Environment& e) { e.cpu_affinity.clear(); }), "CPUs the process could use: not recorded vs 0-1");
  // Nor one whose CPU's identity was left out (a row from a machine of another CPU, its vendor,
  // family, model, cores and instruction sets blanked, was kept).
  here.cpu.vendor = "GenuineIntel";
  here.cpu.family = 6;
  here.cpu.model = 143;
  here.cpu.physical_cores = 2;
  here.cpu.flags = {"avx2", "fma"};
  EXPECT_EQ(measured_elsewhere(here, here), "");
  EXPECT_EQ(edited([](Environment& e) { e.cpu = CpuFacts{}; }),
            "CPU identity (vendor, family, model, instruction sets, cores): recorded only in the current's file");
  EXPECT_EQ(edited([](Environment& e) { e.cpu.physical_cores = 0; }), "physical cores: not recorded vs 2");
}

// --resume kept a row of --dataset auto trained on the synthetic set after CIFAR-10 appeared in
// --data-dir (one sweep of two datasets), and a row file copied into another row's slot.
TEST(Sweep, ARowFileIsKeptOnlyAsItsOwnSlotsRunOnWhatAutoFindsNow) {
  testing::TempDir dir;
  PlannedRow row;
  row.config.name = "r";
  row.config.dataset = DatasetKind::auto_detect;
  row.config.data_dir = (dir / "data").string();
  row.result_file = "results/rows/faithful/r.r1.json";
  RunResult run;
  run.name = "r";
  run.dataset = "synthetic";
  run.threads_per_rank = 1;
  run.status = RunStatus::failed;  // what it ran, not how it ended, is asked below (a failed row is never kept)
  run.config = {{"out", "results/rows/faithful/r.r1.json"}};
  ResultDocument doc;
  doc.runs = {run};
  const auto why = [&](const ResultDocument& d) { return not_this_slots_run(row, prove_results(d, "the row's result")); };
  // An ok row with its step records emptied (the seventh attack): kept, then compared by its figures.
  PlannedRow on_cifar = row;
  on_cifar.config.dataset = DatasetKind::cifar10;
  RunResult ok_row = testing::sample_run("r", "faithful", 1, 10, 5000);
  ok_row.config["out"] = "results/rows/faithful/r.r1.json";
  ok_row.threads_per_rank = 1;
  ResultDocument recorded;
  recorded.environment.gpus = {{"NVIDIA A100-SXM4-40GB", 40LL << 30, "8.0"}};
  recorded.runs = {ok_row};
  ASSERT_EQ(not_this_slots_run(on_cifar, prove_results(recorded, "the row's result")), "");
  recorded.runs[0].step_records.clear();
  EXPECT_EQ(not_this_slots_run(on_cifar, prove_results(recorded, "the row's result")),
            "it holds no step records, which this build records (one a step)");
  // A row of one process records no ranks' timings, and is kept (the fourteenth attack: every
  // single row was run again); one of two with its ranks' timings emptied (the ninth) is not.
  recorded.runs[0] = ok_row;
  ASSERT_TRUE(recorded.runs[0].ranks.empty());
  EXPECT_EQ(not_this_slots_run(on_cifar, prove_results(recorded, "the row's result")), "");
  RunResult two_ranks = testing::sample_run("r", "faithful", 2, 10, 5000);
  two_ranks.config["out"] = "results/rows/faithful/r.r1.json";
  two_ranks.threads_per_rank = 1;
  recorded.runs = {two_ranks};
  EXPECT_EQ(not_this_slots_run(on_cifar, prove_results(recorded, "the row's result")),
            "it records 0 of its 2 ranks' timings, which this build records for each");
  EXPECT_EQ(why(doc), "");
  std::filesystem::create_directories(dir / "data/cifar-10-batches-bin");
  testing::write_text(dir / "data/cifar-10-batches-bin/data_batch_1.bin", "");
  EXPECT_EQ(why(doc), "it trained on synthetic; --dataset auto finds cifar10 now");
  std::filesystem::remove_all(dir / "data");
  ResultDocument copied = doc;
  copied.runs[0].config["out"] = "results/rows/faithful/r.r0.json";
  EXPECT_EQ(why(copied), "it was written as results/rows/faithful/r.r0.json, not as results/rows/faithful/r.r1.json");
  ResultDocument elsewhere = doc;  // another --out-dir's file copied into this one
  elsewhere.runs[0].config["out"] = "A/rows/faithful/r.r1.json";
  EXPECT_EQ(why(elsewhere), "it was written as A/rows/faithful/r.r1.json, not as results/rows/faithful/r.r1.json");
  ResultDocument spelled = doc;
  spelled.runs[0].config["out"] = "results/./rows/faithful/r.r1.json";
  EXPECT_EQ(why(spelled), "");
  ResultDocument two = doc;  // a whole results.json, its runs read as one slot's
  two.runs.push_back(two.runs[0]);
  two.runs[1].repetition = 1;
  two.sweep = SweepInfo{};
  two.sweep->repeat = 2;
  EXPECT_EQ(why(two), "the file holds 2 runs of a sweep, not one row's run");
  ResultDocument other = doc;
  other.runs[0].name = "zzz";
  EXPECT_EQ(why(other), "it is row 'zzz''s run");
  ResultDocument unthreaded = doc;
  unthreaded.runs[0].threads_per_rank = 0;
  EXPECT_EQ(why(unthreaded), "it does not record its threads per rank, which this build records");
  row.info.reference_of = "r";  // a PyTorch twin counts no threads of its own
  EXPECT_EQ(why(unthreaded), "");
}

TEST(Sweep, CommandLineOverridesWinAndRowsCanBePicked) {
  SweepCommand cmd;
  cmd.rows = {"single", "ddp-2gpu"};
  cmd.mode = "controlled";
  cmd.repeat = 2;
  cmd.out_dir = "out";
  cmd.overrides = {{"model", "tiny"}, {"batch-size", "16"}, {"max-steps", "3"}};
  const SweepPlan plan = plan_sweep(cmd, machine(4));
  ASSERT_EQ(plan.rows.size(), 4u);
  EXPECT_EQ(plan.info.rows.size(), 2u);
  EXPECT_EQ(plan.info.repeat, 2);
  for (const auto& r : plan.rows) {
    EXPECT_EQ(r.config.model, "tiny");
    EXPECT_EQ(r.config.batch_size, 16);
    EXPECT_EQ(r.config.max_steps, std::optional<int64_t>(3));
  }
  EXPECT_EQ(plan.rows[1].repetition, 1);
  EXPECT_EQ(plan.rows[1].result_file, std::filesystem::path("out/rows/controlled/single.r1.json"));
  cmd.rows = {"triple"};
  try {
    plan_sweep(cmd, machine(4));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--rows: no row 'triple' in tutorial"), std::string::npos) << e.what();
  }
}

TEST(Sweep, SweepFilesDefineTheirOwnRows) {
  testing::TempDir dir;
  testing::write_text(dir / "s.json", R"({
    "name": "mine", "baseline": "base", "controlled_global_batch": 64,
    "defaults": {"model": "tiny", "num-classes": 10},
    "rows": [
      {"name": "base", "options": {"strategy": "single"}},
      {"name": "two", "devices": 2, "tutorial_seconds": 9.8,
       "options": {"strategy": "ddp", "nproc": 2}, "faithful": {"bucket-mb": 1}}
    ]})");
  SweepCommand cmd;
  cmd.file = (dir / "s.json").string();
  const SweepPlan plan = plan_sweep(cmd, machine(2));
  EXPECT_EQ(plan.info.preset, "mine");
  EXPECT_EQ(plan.info.baseline_row, "base");
  EXPECT_EQ(row(plan, "two", "faithful").config.bucket_mb, 1.0);
  EXPECT_EQ(row(plan, "two", "controlled").config.bucket_mb, 25.0);
  EXPECT_EQ(row(plan, "two", "controlled").config.batch_size, 32);
  EXPECT_EQ(row(plan, "base", "faithful").config.model, "tiny");
  // A preset in a row fills in what no layer set: the fast path, but the controlled loader.
  cmd.overrides = {{"preset", "fast"}, {"amp", "off"}};
  const SweepPlan fast = plan_sweep(cmd, machine(2));
  EXPECT_EQ(row(fast, "base", "faithful").config.sgd, SgdImpl::fused);
  EXPECT_EQ(row(fast, "base", "faithful").config.amp, AmpMode::off);
  EXPECT_EQ(row(fast, "base", "faithful").config.loader, LoaderKind::device);
  cmd.overrides.clear();

  auto error = [&](const std::string& text) {
    testing::write_text(dir / "bad.json", text);
    cmd.file = (dir / "bad.json").string();
    try {
      plan_sweep(cmd, machine(2));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto expect_error = [&](const std::string& text, const std::string& message) {
    const std::string e = error(text);
    EXPECT_NE(e.find(message), std::string::npos) << text << " gave: " << (e.empty() ? "no error" : e);
  };
  expect_error("{", "is not valid JSON");
  expect_error(R"([1, 2])", "expected a JSON object, got array");
  expect_error(R"({"rows": []})", "no rows");
  expect_error(R"({"rows": [{"options": {}}]})", "row 1: no 'name'");
  // Unknown keys at every level, with the closest known one.
  expect_error(R"({"baseine": "x", "rows": [{"name": "x"}]})", "unknown key 'baseine' (did you mean 'baseline'?)");
  expect_error(R"({"rows": [{"name": "x", "option": {}}]})", "row 1: unknown key 'option' (did you mean 'options'?)");
  expect_error(R"({"rows": [{"name": "x", "options": {"batch-sise": 3}}]})",
               "row 'x': unknown option 'batch-sise' (did you mean 'batch-size'?)");
  expect_error(R"({"defaults": {"modle": "tiny"}, "rows": [{"name": "x"}]})",
               "defaults: unknown option 'modle' (did you mean 'model'?)");
  // Two rows of one name, wrong types, values checked as on the command line.
  expect_error(R"({"rows": [{"name": "x"}, {"name": "x"}]})", "row 'x': a second row of that name");
  // Row names are result file names: none may leave --out-dir.
  expect_error(R"({"rows": [{"name": "../../etc/x"}]})", "name '../../etc/x' must be letters, digits");
  expect_error(R"({"rows": [{"name": "a/b"}]})", "name 'a/b' must be letters, digits");
  expect_error(R"({"rows": [{"name": ".hidden"}]})", "not starting with '.'");
  expect_error(R"({"rows": [{"name": "x", "devices": "2"}]})", "'devices' must be an integer, not string \"2\"");
  expect_error(R"({"rows": [{"name": "x", "options": []}]})", "'options' must be an object, not array");
  expect_error(R"({"name": 3, "rows": [{"name": "x"}]})", "'name' must be a string, not number 3");
  expect_error(R"({"rows": [{"name": "x", "options": {"batch-size": 0}}]})", "--batch-size must be positive");
  expect_error(R"({"rows": [{"name": "x", "controlled": {"amp": "fp8"}}]})", "row 'x' (controlled): --amp: unknown value 'fp8'");
  expect_error(R"({"baseline": "y", "rows": [{"name": "x"}]})", "'baseline' names no row ('y')");
}

// The faithful plan of the sweep file `text` with --reference, on a machine with 2 GPUs.
SweepPlan faithful_plan_with_twins(const std::string& text) {
  testing::TempDir dir;
  testing::write_text(dir / "s.json", text);
  SweepCommand cmd;
  cmd.file = (dir / "s.json").string();
  cmd.mode = "faithful";
  cmd.reference = true;
  return plan_sweep(cmd, machine(2));
}

// A graphed row on a machine without a GPU is skipped with the reason, twin and all, as `run`
// skips it, whatever the CPU table sets (device cpu, one warm-up step); on a GPU machine it is
// planned as given; a graphed row of a strategy no graph captures is bad input everywhere.
TEST(Sweep, AGraphedRowWithoutAGpuIsSkippedNotRefused) {
  testing::TempDir dir;
  testing::write_text(dir / "s.json", R"({"defaults": {"model": "tiny", "warmup-steps": 4},
    "rows": [{"name": "eager", "options": {"strategy": "single"}},
             {"name": "graphed", "options": {"strategy": "single", "cuda-graphs": true}}]})");
  SweepCommand cmd;
  cmd.file = (dir / "s.json").string();
  cmd.reference = true;
  const SweepPlan cpu = plan_sweep(cmd, machine(0));
  EXPECT_EQ(row(cpu, "eager", "faithful").config.device, "cpu");  // the CPU table's
  for (const char* name : {"graphed", "graphed.torch"}) {
    EXPECT_EQ(row(cpu, name, "faithful").skip_reason.value_or(""),
              "--cuda-graphs captures the step on a GPU, and none is visible")
        << name;
  }
  EXPECT_FALSE(row(cpu, "eager", "faithful").skip_reason.has_value());
  const SweepPlan gpu = plan_sweep(cmd, machine(1));
  EXPECT_FALSE(row(gpu, "graphed", "faithful").skip_reason.has_value());
  EXPECT_TRUE(row(gpu, "graphed", "faithful").config.cuda_graphs);
  testing::write_text(dir / "s.json", R"({"defaults": {"model": "tiny", "warmup-steps": 4},
    "rows": [{"name": "graphed-ddp", "options": {"strategy": "ddp", "nproc": 2, "cuda-graphs": true}}]})");
  EXPECT_THROW(plan_sweep(cmd, machine(0)), InputError);
  EXPECT_THROW(plan_sweep(cmd, machine(1)), InputError);
  // What a GPU machine would refuse is refused on CPUs too: only the device and warm-up are the CPU table's.
  testing::write_text(dir / "s.json", R"({"defaults": {"model": "tiny", "warmup-steps": 4},
    "rows": [{"name": "graphed-fp16", "options": {"strategy": "single", "amp": "fp16", "cuda-graphs": true}}]})");
  EXPECT_THROW(plan_sweep(cmd, machine(0)), InputError);
  EXPECT_THROW(plan_sweep(cmd, machine(1)), InputError);
}

// With --reference every row is followed by its PyTorch twin, except where PyTorch has no
// such configuration: a row without overlap gets a twin skipped with the reason.
TEST(Sweep, ReferenceTwinsFollowTheirRowsAndANoOverlapRowsTwinIsSkipped) {
  const SweepPlan plan = faithful_plan_with_twins(R"({"baseline": "base", "defaults": {"model": "tiny"},
    "rows": [{"name": "base", "options": {"strategy": "single"}},
             {"name": "held", "options": {"strategy": "ddp", "nproc": 2, "overlap": false}}]})");
  ASSERT_EQ(plan.rows.size(), 4u);
  EXPECT_EQ(plan.rows[1].info.name, "base.torch");
  EXPECT_EQ(plan.rows[1].config.strategy, "torch-single");
  EXPECT_FALSE(plan.rows[1].skip_reason.has_value());
  EXPECT_EQ(plan.rows[3].info.name, "held.torch");
  ASSERT_TRUE(plan.rows[3].skip_reason.has_value());
  EXPECT_NE(plan.rows[3].skip_reason->find("--no-overlap: PyTorch's DistributedDataParallel has no such switch"),
            std::string::npos)
      << *plan.rows[3].skip_reason;
  EXPECT_FALSE(plan.rows[2].skip_reason.has_value()) << "the row itself runs";
}

// A sweep row can say why it has no PyTorch twin (e.g. PyTorch is not given one GPU twice):
// the twin is planned and skipped with that reason, the row itself runs; a slowdown never
// reaches a twin.
TEST(Sweep, ARowsNoTwinSkipsItsTwinWithTheReasonAndTwinsAreNeverSlowed) {
  const SweepPlan plan = faithful_plan_with_twins(R"({"defaults": {"model": "tiny", "inject-slowdown": 0.2},
    "rows": [{"name": "base", "options": {"strategy": "single"}},
             {"name": "shared", "no_twin": "two replicas on one GPU", "options": {"strategy": "dp"}}]})");
  ASSERT_EQ(plan.rows.size(), 4u);
  EXPECT_EQ(plan.rows[1].config.inject_slowdown, 0.0) << "PyTorch's row is the reference";
  EXPECT_EQ(plan.rows[0].config.inject_slowdown, 0.2);
  EXPECT_FALSE(plan.rows[1].skip_reason.has_value());
  ASSERT_TRUE(plan.rows[3].skip_reason.has_value());
  EXPECT_EQ(*plan.rows[3].skip_reason, "no PyTorch twin for this row: two replicas on one GPU");
  EXPECT_FALSE(plan.rows[2].skip_reason.has_value());
  EXPECT_THROW(parse_sweep_file(R"({"rows": [{"name": "x", "no_twin": ""}]})", "f.json"), InputError);
  EXPECT_THROW(parse_sweep_file(R"({"rows": [{"name": "x", "no_twin": 3}]})", "f.json"), InputError);
}

// Only an option the twin's own strategy lacks skips it: overlap means nothing to
// torch-single, so a single row without overlap keeps its twin.
TEST(Sweep, AnOptionTheTwinDoesNotUseLeavesTheTwinToRun) {
  const SweepPlan plan = faithful_plan_with_twins(R"({"defaults": {"model": "tiny"},
    "rows": [{"name": "base", "options": {"strategy": "single", "overlap": false}}]})");
  ASSERT_EQ(plan.rows.size(), 2u);
  EXPECT_EQ(plan.rows[1].config.strategy, "torch-single");
  EXPECT_FALSE(plan.rows[1].skip_reason.has_value()) << *plan.rows[1].skip_reason;
}

// A default of scripts/ci-bench.env ("NAME=${NAME:-value}"), as the script reads it.
std::string ci_bench_default(const std::filesystem::path& env_file, const std::string& name) {
  std::ifstream in(env_file);
  std::string line;
  const std::string prefix = name + "=${" + name + ":-";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0 && line.back() == '}') return line.substr(prefix.size(), line.size() - prefix.size() - 1);
  }
  ADD_FAILURE() << "no default for " << name << " in " << env_file;
  return "";
}

// scripts/ci-bench compares against a committed baseline: it must hold every row that
// scripts/ci-bench.sweep.json plans, as often as scripts/ci-bench.env repeats it, with the
// same configuration, or the gate would fail closed on its own baseline.
// Under --launcher srun every row is a job step of the allocation: a distributed row's ranks
// are srun's tasks, spread evenly over the nodes it asks for; a single-process row one task.
TEST(Sweep, RowsRunAsJobStepsOfTheAllocationUnderSrun) {
  testing::TempDir dir;
  testing::write_text(dir / "s.json", R"({
    "defaults": {"model": "tiny", "num-classes": 10, "device": "cpu"},
    "rows": [
      {"name": "single", "options": {"strategy": "single"}},
      {"name": "ddp-2", "devices": 2, "options": {"strategy": "ddp", "nproc": 2}},
      {"name": "ddp-2node", "devices": 4, "nodes": 2, "options": {"strategy": "ddp", "nproc": 4}},
      {"name": "ddp-3node", "devices": 3, "nodes": 3, "options": {"strategy": "ddp", "nproc": 3}}
    ]})");
  SweepCommand cmd;
  cmd.file = (dir / "s.json").string();
  cmd.mode = "controlled";
  cmd.launcher = "srun";
  cmd.reference = true;
  SweepEnvironment env = machine(0);
  env.allocation_nodes = {"node1", "node2"};
  env.srun = "/usr/bin/srun";
  const SweepPlan plan = plan_sweep(cmd, env);
  const auto& spread = row(plan, "ddp-2node", "controlled");
  // --kill-on-bad-exit: a rank stuck after its peer failed kept the step open and the sweep never
  // went on.
  EXPECT_EQ(spread.launch, (std::vector<std::string>{"/usr/bin/srun", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2",
                                                     "--kill-on-bad-exit=1", "--job-name=ddpbench-ddp-2node"}));
  // The placement is part of the row: 4 processes over 2 nodes (each task is given --nproc 1).
  EXPECT_EQ(spread.config.nproc, 4);
  EXPECT_EQ(spread.config.nodes, 2);
  EXPECT_EQ(spread.world_size, 4);
  EXPECT_EQ(spread.config.batch_size, 1024 / 8 / 4);  // the global batch split over the four ranks
  EXPECT_FALSE(spread.skip_reason.has_value());
  // Its PyTorch twin runs the same way.
  EXPECT_EQ(row(plan, "ddp-2node.torch", "controlled").launch[1], "--nodes=2");
  EXPECT_EQ(row(plan, "ddp-2node.torch", "controlled").config.nodes, 2);
  EXPECT_EQ(row(plan, "ddp-2", "controlled").launch[1], "--nodes=1");
  EXPECT_EQ(row(plan, "ddp-2", "controlled").launch[2], "--ntasks=2");
  EXPECT_EQ(row(plan, "single", "controlled").launch[2], "--ntasks=1");
  EXPECT_EQ(row(plan, "single", "controlled").world_size, 1);
  const auto& beyond = row(plan, "ddp-3node", "controlled");
  EXPECT_EQ(beyond.skip_reason.value_or(""), "needs 3 nodes; the allocation has 2");
  EXPECT_EQ(beyond.world_size, 3);
  // GPUs are counted per node: 4 over 2 nodes needs 2 on each.
  cmd.overrides = {{"device", "cuda"}};
  env.visible_gpus = 1;
  EXPECT_EQ(row(plan_sweep(cmd, env), "ddp-2node", "controlled").skip_reason.value_or(""),
            "needs 4 GPUs over 2 nodes, 1 on each");
  env.visible_gpus = 2;
  EXPECT_FALSE(row(plan_sweep(cmd, env), "ddp-2node", "controlled").skip_reason.has_value());
  cmd.overrides.clear();
  // Without srun a row across nodes is skipped, saying how to run it.
  cmd.launcher = "local";
  const auto local = plan_sweep(cmd, machine(0));
  EXPECT_NE(row(local, "ddp-2node", "controlled").skip_reason.value_or("").find("needs 2 nodes: run the sweep inside a "
                                                                               "SLURM allocation of as many with "
                                                                               "--launcher srun"),
            std::string::npos);
  EXPECT_TRUE(row(local, "ddp-2", "controlled").launch.empty());
  EXPECT_EQ(row(local, "ddp-2", "controlled").config.nproc, 2);
  // Ranks that cannot be spread evenly, and nodes that are not a positive count: bad input,
  // with srun or without (found before any allocation is asked for).
  cmd.rows = {"ddp-3node"};
  env.allocation_nodes = {"a", "b", "c"};
  cmd.overrides = {{"nproc", "4"}};
  for (const char* launcher : {"srun", "local"}) {
    cmd.launcher = launcher;
    try {
      plan_sweep(cmd, env);
      ADD_FAILURE() << "4 ranks over 3 nodes planned";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "row 'ddp-3node' (controlled): 4 processes cannot be spread evenly over 'nodes' 3"),
                std::string::npos)
          << e.what();
    }
  }
  // --nodes is the sweep's to give: a row asks with its "nodes" key.
  cmd.rows.clear();
  cmd.overrides = {{"nodes", "2"}};
  try {
    plan_sweep(cmd, env);
    ADD_FAILURE() << "--nodes taken as a sweep override";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--nodes is the sweep's to give each rank"), std::string::npos) << e.what();
  }
  for (const char* nodes : {"0", "-1", "1.5", "\"2\""}) {
    EXPECT_THROW(parse_sweep_file(std::string(R"({"rows": [{"name": "x", "nodes": )") + nodes +
                                      R"(, "options": {"strategy": "ddp"}}]})",
                                  "f.json"),
                 InputError)
        << nodes;
  }
}

// The allocation --launcher srun runs in, from SLURM's variables; outside one, bad input.
TEST(Sweep, TheAllocationComesFromSlurmsVariables) {
  testing::TempDir dir;
  const std::filesystem::path bin = dir / "bin";
  std::filesystem::create_directories(bin);
  testing::write_text(bin / "srun", "#!/bin/sh\n");
  std::filesystem::permissions(bin / "srun", std::filesystem::perms::owner_all);
  const std::string saved_path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  const auto restore = [&] {
    for (const char* name : {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_GPUS_ON_NODE"}) {
      ::unsetenv(name);
    }
    ::setenv("PATH", saved_path.c_str(), 1);
  };
  restore();
  const auto error = [] {
    SweepEnvironment env;
    try {
      read_slurm_allocation(env);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error().find("--launcher srun: not inside a SLURM allocation (SLURM_JOB_ID is not set)"), std::string::npos);
  ::setenv("SLURM_JOB_ID", "42", 1);
  EXPECT_NE(error().find("the allocation names no nodes"), std::string::npos);
  ::setenv("SLURM_JOB_NODELIST", "gpu[01-03]", 1);
  ::setenv("PATH", "/nonexistent", 1);
  EXPECT_NE(error().find("--launcher srun: no srun in PATH"), std::string::npos);
  ::setenv("PATH", bin.c_str(), 1);
  ::setenv("SLURM_GPUS_ON_NODE", "4", 1);
  SweepEnvironment env;
  read_slurm_allocation(env);
  EXPECT_EQ(env.allocation_nodes, (std::vector<std::string>{"gpu01", "gpu02", "gpu03"}));
  EXPECT_EQ(env.srun, (bin / "srun").string());
  EXPECT_EQ(env.visible_gpus, 4);
  ::setenv("SLURM_JOB_NODELIST", "gpu[03-01]", 1);
  EXPECT_NE(error().find("SLURM_JOB_NODELIST='gpu[03-01]' is not a SLURM host list"), std::string::npos);
  restore();
}

// scripts/slurm/cluster.sweep.json opens with the tutorial's rows, as the preset has them.
TEST(Sweep, TheClusterSweepFileBeginsWithTheTutorialsRows) {
  const char* source = std::getenv("DDPBENCH_SOURCE_DIR");
  if (source == nullptr) GTEST_SKIP() << "DDPBENCH_SOURCE_DIR not set";
  const SweepDefinition cluster =
      read_sweep_file(std::filesystem::path(source) / "scripts" / "slurm" / "cluster.sweep.json");
  const SweepDefinition tutorial = tutorial_sweep();
  ASSERT_GT(cluster.rows.size(), tutorial.rows.size());
  EXPECT_EQ(cluster.baseline_row, tutorial.baseline_row);
  EXPECT_EQ(cluster.controlled_global_batch, tutorial.controlled_global_batch);
  for (std::size_t i = 0; i < tutorial.rows.size(); ++i) {
    const SweepRowSpec& a = cluster.rows[i];
    const SweepRowSpec& b = tutorial.rows[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.devices, b.devices) << a.name;
    EXPECT_EQ(a.nodes, 1) << a.name;
    EXPECT_DOUBLE_EQ(a.tutorial_seconds, b.tutorial_seconds) << a.name;
    EXPECT_EQ(a.options, b.options) << a.name;
    EXPECT_EQ(a.mode_options, b.mode_options) << a.name;
  }
  for (std::size_t i = tutorial.rows.size(); i < cluster.rows.size(); ++i) {
    EXPECT_EQ(cluster.rows[i].nodes, 2) << cluster.rows[i].name;
  }
}

TEST(Sweep, TheCommittedCiBenchBaselineMatchesItsSweepFile) {
  const char* source = std::getenv("DDPBENCH_SOURCE_DIR");
  if (source == nullptr) GTEST_SKIP() << "DDPBENCH_SOURCE_DIR not set";
  const std::filesystem::path scripts = std::filesystem::path(source) / "scripts";
  SweepCommand cmd;  // as scripts/ci-bench runs it
  cmd.file = (scripts / "ci-bench.sweep.json").string();
  cmd.mode = "faithful";
  cmd.table = "tutorial";
  cmd.repeat = std::stoll(ci_bench_default(scripts / "ci-bench.env", "DDPBENCH_CI_REPEAT"));
  cmd.reference = true;
  const SweepPlan plan = plan_sweep(cmd, machine(0));
  const ResultDocument baseline = read_result_file(scripts / "ci-bench.baseline.json");
  ASSERT_TRUE(baseline.sweep.has_value());
  EXPECT_EQ(baseline.sweep->repeat, cmd.repeat) << "rerun scripts/ci-bench --update-baseline";
  std::set<std::string> ran;  // ddpbench's rows that ran (their twins gate through the floor)
  for (const auto& planned : plan.rows) {
    const nlohmann::json expected = comparable_config(run_config_to_json(planned.config));
    int64_t matching = 0;
    for (const auto& run : baseline.runs) {
      if (run.name == planned.info.name && run.mode == "faithful" && run.status != RunStatus::failed &&
          comparable_config(run.config) == expected) {
        ++matching;
        if (run.status == RunStatus::ok && planned.info.reference_of.empty()) ran.insert(run.name);
      }
    }
    EXPECT_EQ(matching, cmd.repeat) << planned.info.name << ": rerun scripts/ci-bench --update-baseline";
  }
  CompareOptions options;  // as scripts/ci-bench compares
  options.normalize_by = ci_bench_default(scripts / "ci-bench.env", "DDPBENCH_CI_NORMALIZE_BY");
  options.alpha = std::stod(ci_bench_default(scripts / "ci-bench.env", "DDPBENCH_CI_ALPHA"));
  options.metrics.clear();
  std::stringstream metrics(ci_bench_default(scripts / "ci-bench.env", "DDPBENCH_CI_METRICS"));
  for (std::string metric; std::getline(metrics, metric, ',');) options.metrics.push_back(metric);
  options.threshold = std::stod(ci_bench_default(scripts / "ci-bench.env", "DDPBENCH_CI_THRESHOLD"));
  options.min_vs_pytorch = std::stod(ci_bench_default(scripts / "ci-bench.env", "DDPBENCH_CI_MIN_VS_PYTORCH"));
  const Comparison self = compare_results(baseline, baseline, options);
  // Every row that ran is timed; over the twin, dp-2 (whose own twin needs GPUs) over the twin
  // that ran nearest it, and says so.
  EXPECT_EQ(self.metrics.size(), options.metrics.size() * ran.size());
  if (options.normalize_by == "twin") {
    EXPECT_NE(std::find(self.notes.begin(), self.notes.end(),
                        "dp-2 (faithful): normalised by ddp-2.torch, the PyTorch twin that ran nearest it in each "
                        "repetition (its own, dp-2.torch, did not run in the baseline)"),
              self.notes.end())
        << markdown_comparison(self, options);
  }
  EXPECT_EQ(self.pytorch.size(), 2 * options.metrics.size()) << "single and ddp-2 against their twins (dp-2's needs GPUs)";
  ASSERT_EQ(self.without_twin.size(), 1u);
  EXPECT_NE(self.without_twin[0].find("dp-2 (faithful): its PyTorch twin dp-2.torch is skipped"), std::string::npos);
  EXPECT_FALSE(self.regression()) << "the gate fails its own baseline:\n" << markdown_comparison(self, options);
}

// The plan's rules, each on its own: what one rule decides, it decides alone.

SweepRowSpec spec_of(const std::string& name, nlohmann::json options, int64_t devices = 1) {
  SweepRowSpec spec;
  spec.name = name;
  spec.devices = devices;
  spec.options = std::move(options);
  return spec;
}

TEST(PlanRules, LayersApplyInOrderAndTheCommandLineWins) {
  SweepDefinition definition;
  definition.name = "layers";
  definition.defaults = {{"model", "tiny"}, {"bucket-mb", 5}, {"workers", 3}};
  SweepRowSpec spec = spec_of("r", {{"strategy", "ddp"}, {"nproc", 2}, {"bucket-mb", 7}});
  spec.mode_options = {{"faithful", {{"bucket-mb", 9}, {"batch-size", 40}}}};
  definition.rows = {spec};
  SweepCommand command;
  command.table = "tutorial";
  const SweepEnvironment env = machine(2);
  const RunConfig faithful = configure_row(plan_context(command, env, definition), spec, "faithful", "here");
  EXPECT_EQ(faithful.bucket_mb, 9.0) << "the mode's options come after the row's";
  EXPECT_EQ(faithful.batch_size, 40);
  EXPECT_EQ(faithful.workers, 3) << "the defaults hold where no layer above sets";
  const RunConfig controlled = configure_row(plan_context(command, env, definition), spec, "controlled", "here");
  EXPECT_EQ(controlled.bucket_mb, 7.0);
  EXPECT_EQ(controlled.workers, 0) << "the controlled mode's settings come after the defaults";
  EXPECT_EQ(controlled.batch_size, 512) << "1024 over the row's two processes";
  command.overrides = {{"bucket-mb", "11"}};
  EXPECT_EQ(configure_row(plan_context(command, env, definition), spec, "faithful", "here").bucket_mb, 11.0);
  command.overrides = {{"nodes", "2"}};
  try {
    (void)configure_row(plan_context(command, env, definition), spec, "faithful", "sweep 'layers', row 'r'");
    FAIL() << "--nodes given to a row";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sweep 'layers', row 'r': --nodes is the sweep's"), std::string::npos) << e.what();
  }
}

// Controlled mode promises one global batch for every row: it is split over the processes a row
// runs as after the command line (sweep --nproc 3 gave ddp-2gpu a global batch of 192 and
// ddp-4gpu 96, where 1024 / 8 = 128 was promised), unless a batch is given for the row.
TEST(PlanRules, TheControlledBatchIsSplitOverTheRanksTheRowRunsAs) {
  SweepCommand command;
  command.mode = "controlled";
  EXPECT_EQ(row(plan_sweep(command, machine(0)), "single", "controlled").config.batch_size, 128);
  command.rows = {"ddp-2gpu", "ddp-4gpu"};  // --nproc 3 is bad input for a one-process row
  command.overrides = {{"nproc", "3"}};
  const SweepPlan plan = plan_sweep(command, machine(0));
  for (const char* name : {"ddp-2gpu", "ddp-4gpu"}) {
    EXPECT_EQ(row(plan, name, "controlled").config.nproc, 3) << name;
    EXPECT_EQ(row(plan, name, "controlled").config.batch_size, 42) << name << ": 128 over 3 ranks";
  }
  command.overrides.emplace_back("batch-size", "20");
  EXPECT_EQ(row(plan_sweep(command, machine(0)), "ddp-2gpu", "controlled").config.batch_size, 20)
      << "a batch given on the command line is the row's own";
}

// The CPU preset cuts: each of its settings at most the preset's, so a sweep file's smaller value
// stays (a synthetic set of 512 images was made 8,192, x16), a larger or unset one is cut; and
// what it changed is recorded row by row, the command line's options its own.
// Every row that will run is checked as `run` checks it, before the first row (and on --dry-run):
// a fault at step 5 of a row the preset cut to 4 steps, and --nproc 2 on a one-process row, passed
// the plan and failed every repetition after the other rows had run.
TEST(PlanRules, EveryRowThatWillRunIsCheckedAsRunChecksIt) {
  SweepDefinition definition;
  definition.name = "checked";
  definition.defaults = {{"model", "tiny"}, {"dataset", "synthetic"}, {"synthetic-train-images", 512}};
  const SweepRowSpec single = spec_of("one", {{"strategy", "single"}});
  definition.rows = {single};
  SweepCommand command;
  command.table = "cpu";
  command.overrides = {{"inject-fault-rank", "0"}, {"inject-fault-step", "5"}};
  const auto refusal = [&](const SweepRowSpec& spec, const SweepEnvironment& env) -> std::string {
    try {
      plan_row(plan_context(command, env, definition), spec, "faithful");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal(single, machine(0))
                .find("checked, row 'one' (faithful): --inject-fault-step 5: the row runs 4 steps (0-3) after "
                      "--max-steps 4"),
            std::string::npos)
      << refusal(single, machine(0));
  command.overrides = {{"nproc", "2"}};
  EXPECT_NE(refusal(single, machine(0)).find("row 'one' (faithful): --nproc 2: strategy 'single' runs in one process"),
            std::string::npos);
  // The ranks that run here must fit in this machine's memory; srun's run on the allocation's nodes.
  command.overrides = {{"nproc", "1000"}};
  const SweepRowSpec ranks = spec_of("ranks", {{"strategy", "ddp"}});
  SweepEnvironment small = machine(0);
  small.memory_bytes = int64_t{24} << 30;
  EXPECT_NE(refusal(ranks, small).find("row 'ranks' (faithful): 1000 ranks on this machine (--nproc 1000) need"),
            std::string::npos);
  command.launcher = "srun";
  small.allocation_nodes = {"node1"};
  small.srun = "/usr/bin/srun";
  EXPECT_EQ(refusal(ranks, small), "");
  // A row that will not run is not judged: it is reported skipped.
  command.launcher = "local";
  command.overrides = {{"nproc", "2"}};
  small.strategies = {"ddp"};
  EXPECT_EQ(refusal(single, small), "") << "strategy 'single' is not in this build: skipped";
}

TEST(PlanRules, TheCpuPresetOnlyCutsAndSaysWhatItChangedInEachRow) {
  SweepDefinition definition;
  definition.name = "cuts";
  definition.defaults = {{"model", "tiny"},          {"dataset", "synthetic"}, {"synthetic-train-images", 512},
                         {"warmup-steps", 10},        {"workers", 1},           {"max-steps", 100},
                         {"device", "cuda"},          {"max-eval-batches", 1}};
  const SweepRowSpec spec = spec_of("r", {{"strategy", "single"}});
  definition.rows = {spec};
  SweepCommand command;
  command.table = "cpu";
  command.overrides = {{"warmup-steps", "3"}};
  const SweepEnvironment no_gpu = machine(0);  // the context holds it by reference
  const PlanContext context = plan_context(command, no_gpu, definition);
  const RunConfig c = configure_row(context, spec, "faithful", "here");
  EXPECT_EQ(c.synthetic_train_images, 512) << "smaller than the preset's 8,192: kept";
  EXPECT_EQ(c.synthetic_test_images, 1024);
  EXPECT_EQ(c.workers, 1);
  EXPECT_EQ(c.max_eval_batches, 1);
  EXPECT_EQ(c.max_steps, 4);
  EXPECT_EQ(c.warmup_steps, 3) << "the command line's";
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.batch_size, 32);
  const std::vector<std::string> changes = preset_changes(context, spec, "faithful", "here");
  const std::vector<std::string> expected = {"batch-size 256 → 32", "device cuda → cpu", "max-steps 100 → 4",
                                             "synthetic-test-images 10000 → 1024"};
  EXPECT_EQ(changes, expected);
  EXPECT_EQ(row(plan_sweep(command, machine(0)), "single", "faithful").info.preset_changes.empty(), false);
  command.table = "tutorial";
  EXPECT_TRUE(preset_changes(plan_context(command, machine(2), definition), spec, "faithful", "here").empty());
}

// A DataParallel row that names its devices ("devices": "0,1") ran on as many CPU replicas as its
// count said (1, the default): then it was skipped, "needs at least 2 devices, 1 available".
TEST(PlanRules, TheCpuPresetKeepsADataParallelRowsListedDevicesAsCpuReplicas) {
  SweepDefinition definition;
  definition.name = "dp";
  definition.defaults = {{"model", "tiny"}, {"dataset", "synthetic"}, {"batch-size", 64}};
  const SweepRowSpec spec = spec_of("dp", {{"strategy", "dp"}, {"devices", "0,1"}});
  definition.rows = {spec};
  SweepCommand command;
  command.table = "cpu";
  const RunConfig c = configure_row(plan_context(command, machine(0), definition), spec, "faithful", "here");
  EXPECT_EQ(c.devices, "cpu,cpu");
}

// torchrun --nproc_per_node 2 ddpbench sweep (or srun -n 2) ran every row twice at once, both
// writing the same reports.
TEST(PlanRules, ASweepInALaunchersWorldOfMoreThanOneIsRefused) {
  SweepCommand command;
  SweepEnvironment env = machine(0);
  env.launcher_world = RankEnvironment{};
  env.launcher_world->world_size = 2;
  env.launcher_world->source = "torchrun";
  try {
    plan_sweep(command, env);
    ADD_FAILURE() << "planned";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("sweep: this process is one of 2 processes torchrun started", 0), 0u)
        << e.what();
  }
  env.launcher_world->world_size = 1;
  EXPECT_NO_THROW(plan_sweep(command, env)) << "a world of one is this process alone";
}

// A row's own batch-size was replaced in controlled mode by its share of the global batch, and
// nothing said so.
TEST(PlanRules, AControlledRowsOwnBatchReplacedBySharingIsSaid) {
  SweepDefinition definition;
  definition.name = "own";
  definition.defaults = {{"model", "tiny"}, {"dataset", "synthetic"}};
  definition.rows = {spec_of("own", {{"strategy", "ddp"}, {"nproc", 2}, {"batch-size", 64}}, 2)};
  SweepCommand command;
  command.file = "own.json";
  const SweepEnvironment two_gpus = machine(2);  // the context holds it by reference
  const PlanContext context = plan_context(command, two_gpus, definition);
  const PlannedRowGroup controlled = plan_row(context, definition.rows[0], "controlled");
  ASSERT_EQ(controlled.row.notes.size(), 1u);
  EXPECT_EQ(controlled.row.notes[0], "controlled mode: its own batch-size 64 is replaced by its share of the controlled "
                                     "global batch, 512 a process over 2 processes (a batch-size in its \"mode_options\" "
                                     "for \"controlled\" keeps one of its own)");
  EXPECT_TRUE(plan_row(context, definition.rows[0], "faithful").row.notes.empty());
}

TEST(PlanRules, TheFirstReasonASkipHasIsTheOneGiven) {
  SweepDefinition definition;
  definition.name = "skips";
  SweepCommand command;
  SweepEnvironment env = machine(1);
  const PlanContext context = plan_context(command, env, definition);
  RunConfig c;
  c.strategy = "ddp";
  c.device = "cuda";
  c.nproc = 4;
  EXPECT_EQ(skip_reason(context, spec_of("r", {}, 4), c).value_or(""), "needs 4 GPUs, 1 visible");
  c.device = "cpu";
  EXPECT_FALSE(skip_reason(context, spec_of("r", {}, 4), c)) << "a CPU row needs no GPU";
  SweepRowSpec two_nodes = spec_of("r", {}, 4);
  two_nodes.nodes = 2;
  EXPECT_NE(skip_reason(context, two_nodes, c).value_or("").find("--launcher srun"), std::string::npos);
  env.strategies = {"single"};
  const PlanContext without_ddp = plan_context(command, env, definition);
  EXPECT_EQ(skip_reason(without_ddp, two_nodes, c).value_or(""), "strategy 'ddp' is not in this build")
      << "the build's strategies are judged first";
}

TEST(PlanRules, TheCpuPresetTurnsFp16IntoBf16UnlessAmpIsGiven) {
  SweepDefinition definition;
  SweepCommand command;
  command.table = "cpu";
  SweepEnvironment env = machine(0);
  env.cpu_native_bf16 = true;
  RunConfig c;
  c.amp = AmpMode::fp16;
  const std::vector<std::string> notes = cpu_mixed_precision(plan_context(command, env, definition), c);
  EXPECT_EQ(c.amp, AmpMode::bf16);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("bf16, not the tutorial's fp16"), std::string::npos);
  c.amp = AmpMode::fp16;
  command.overrides = {{"amp", "fp16"}};
  EXPECT_TRUE(cpu_mixed_precision(plan_context(command, env, definition), c).empty());
  EXPECT_EQ(c.amp, AmpMode::fp16) << "--amp on the command line is what runs";
  command.overrides.clear();
  command.table = "tutorial";
  EXPECT_TRUE(cpu_mixed_precision(plan_context(command, env, definition), c).empty());
  EXPECT_EQ(c.amp, AmpMode::fp16) << "only the CPU preset changes the type";
}

TEST(PlanRules, AGroupRunsRowComparisonTwinInEachRepetitionWithFilesOfTheirOwn) {
  SweepDefinition definition;
  definition.name = "group";
  const SweepRowSpec spec = spec_of("d", {{"strategy", "ddp"}, {"nproc", 2}, {"model", "tiny"}, {"sync-bn", true}}, 2);
  definition.rows = {spec};
  SweepCommand command;
  command.reference = true;
  command.repeat = 2;
  command.out_dir = "out";
  const SweepEnvironment env = machine(0);
  const PlannedRowGroup group = plan_row(plan_context(command, env, definition), spec, "faithful");
  std::vector<std::string> names;
  for (const PlannedRow* member : group.members()) names.push_back(member->info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"d", "d.no-sync-bn", "d.torch"}));
  ASSERT_TRUE(group.twin);
  EXPECT_EQ(group.twin->info.reference_of, "d");
  EXPECT_EQ(group.twin->info.compared_with, "d.no-sync-bn");
  EXPECT_EQ(group.twin->config.strategy, "torch-ddp");
  std::vector<PlannedRow> rows;
  append_repetitions(command, spec, group, rows);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].result_file, std::filesystem::path("out/rows/faithful/d.r0.json"));
  EXPECT_EQ(rows[4].result_file, std::filesystem::path("out/rows/faithful/d.no-sync-bn.r1.json"));
  EXPECT_EQ(rows[5].config.out, "out/rows/faithful/d.torch.r1.json");
  EXPECT_EQ(rows[5].repetition, 1);
}

TEST(PlanRules, NamedRowsMustExistAndNamesMustNotCollide) {
  SweepDefinition definition = tutorial_sweep();
  SweepCommand command;
  command.rows = {"ddp-3gpu"};
  try {
    check_named_rows(command, definition);
    FAIL() << "an unknown row was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(rows: single|dp-4gpu|ddp-2gpu|ddp-4gpu|ddp-4gpu-amp)"), std::string::npos);
  }
  SweepInfo info;
  info.rows = {{"a", "faithful", kNotMeasured, 1, ""}, {"a", "controlled", kNotMeasured, 1, ""}};
  EXPECT_NO_THROW(check_unique_names(info, "s")) << "one name in two modes is two rows";
  info.rows.push_back({"a", "faithful", kNotMeasured, 1, "b"});
  EXPECT_THROW(check_unique_names(info, "s"), InputError);
}

}  // namespace
}  // namespace ddpbench
