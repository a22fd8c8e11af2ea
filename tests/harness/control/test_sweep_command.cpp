// The sweep end to end through the binary: rows in their own processes, a failed row that
// does not stop the others, and a killed sweep resumed without losing or repeating a row.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/process.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

// Quick rows, a slow one, one that runs until stopped, one whose steps take seconds each (ResNet-18
// on one thread, each step stretched tenfold by busy work) and one that fails, on synthetic data.
void write_sweep_file(const std::filesystem::path& path) {
  testing::write_text(path, R"({
    "name": "test sweep",
    "defaults": {"model": "tiny", "num-classes": 10, "dataset": "synthetic", "synthetic-train-images": 512,
                 "synthetic-test-images": 128, "batch-size": 64, "workers": 0, "device": "cpu", "warmup-steps": 1},
    "rows": [
      {"name": "quick", "options": {"strategy": "single", "max-steps": 2}},
      {"name": "ranks", "devices": 2, "options": {"strategy": "ddp", "nproc": 2, "max-steps": 2}},
      {"name": "slow", "options": {"strategy": "single", "epochs": 12}},
      {"name": "endless", "options": {"strategy": "single", "epochs": 100000, "log-interval-steps": 1}},
      {"name": "stalling", "options": {"strategy": "single", "model": "resnet18", "batch-size": 32, "threads": 1,
                                       "epochs": 100000, "log-interval-steps": 1, "inject-slowdown": 10}},
      {"name": "broken", "options": {"strategy": "ddp", "nproc": 2, "inject-fault-rank": 1, "inject-fault-step": 1}}
    ]})");
}

std::vector<std::string> sweep_args(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {testing::ddpbench_binary(), "sweep", "--file", (dir / "s.json").string(),
                                   "--mode", "faithful", "--table", "tutorial", "--out-dir", (dir / "out").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json results(const TempDir& dir) {
  return nlohmann::json::parse(testing::read_text(dir / "out/results.json"));
}

// The rows the sweep's reports hold so far (0 before the first is written).
std::size_t rows_reported(const TempDir& dir) {
  try {
    return results(dir)["runs"].size();
  } catch (const std::exception&) {
    return 0;
  }
}

// Waits up to 30 s until the reports hold `rows` rows.
bool wait_for_rows(const TempDir& dir, std::size_t rows) {
  for (int i = 0; i < 600 && rows_reported(dir) < rows; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return rows_reported(dir) >= rows;
}

TEST(SweepCommand, AFailedRowBecomesARowAndTheSweepGoesOn) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  const auto r = testing::run_process(sweep_args(dir, {"--rows", "broken,quick", "--gbench-json",
                                                       (dir / "gb.json").string()}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto doc = results(dir);
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["name"], "quick");
  EXPECT_EQ(doc["runs"][0]["status"], "ok");
  EXPECT_EQ(doc["runs"][1]["name"], "broken");
  EXPECT_EQ(doc["runs"][1]["status"], "failed");
  EXPECT_NE(doc["runs"][1]["reason"].get<std::string>().find("rank 1 was killed by signal 9"), std::string::npos);
  EXPECT_EQ(doc["summary"].size(), 2u);
  EXPECT_NE(r.out.find("| quick | 1 |"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "out/results.md"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out/results.html"));
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir / "gb.json"))["benchmarks"][0]["name"], "faithful/quick");
}

TEST(SweepCommand, AKilledSweepResumesWithoutLosingOrRepeatingARow) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  const auto rows = std::vector<std::string>{"--rows", "quick,ranks,slow"};
  {
    testing::SpawnedProcess sweep(sweep_args(dir, rows));
    // Wait until the reports hold the first two rows, then kill the sweep while "slow" runs.
    ASSERT_TRUE(wait_for_rows(dir, 2)) << "the first two rows never finished";
    ASSERT_EQ(rows_reported(dir), 2u);
    ::kill(sweep.pid(), SIGKILL);
    sweep.wait();
  }
  const std::string quick_before = testing::read_text(dir / "out/rows/faithful/quick.json");
  EXPECT_FALSE(std::filesystem::exists(dir / "out/rows/faithful/slow.json"));

  const auto resumed = testing::run_process(sweep_args(dir, {"--rows", "quick,ranks,slow", "--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("quick (faithful): done before, kept (--resume)"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("ranks (faithful): done before, kept (--resume)"), std::string::npos) << resumed.err;
  EXPECT_EQ(resumed.err.find("slow (faithful): done before"), std::string::npos);
  EXPECT_EQ(testing::read_text(dir / "out/rows/faithful/quick.json"), quick_before) << "quick ran again";
  const auto doc = results(dir);
  ASSERT_EQ(doc["runs"].size(), 3u);
  for (const auto& run : doc["runs"]) EXPECT_EQ(run["status"], "ok") << run["name"];

  // A changed configuration is not "done": the row runs again.
  const auto changed = testing::run_process(sweep_args(dir, {"--rows", "quick", "--resume", "--seed", "5"}));
  EXPECT_EQ(changed.exit_code, 0);
  EXPECT_EQ(changed.err.find("done before"), std::string::npos) << changed.err;
  // Nor is a row run under an injected slowdown the row run as it is, either way round.
  for (const bool slowed : {true, false}) {
    std::vector<std::string> args = {"--rows", "quick", "--resume", "--seed", "5"};
    if (slowed) args.insert(args.end(), {"--inject-slowdown", "0.5"});
    const auto r = testing::run_process(sweep_args(dir, args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("done before"), std::string::npos) << (slowed ? "slowed: " : "unslowed: ") << r.err;
  }
}

// A row stopped by a signal that the sweep was not sent (scancel of its srun step, a kill,
// srun's --kill-on-bad-exit) did not measure its row: the sweep goes on and exits 1.
TEST(SweepCommand, ARowStoppedByASignalTheSweepWasNotSentFailsTheSweep) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  testing::SpawnedProcess sweep(sweep_args(dir, {"--rows", "endless,quick"}));
  const std::string marker = (dir / "out/rows/faithful/endless.json").string();
  std::vector<pid_t> row;
  for (int i = 0; i < 600 && row.empty(); ++i) {
    row = testing::pids_with(marker);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(row.size(), 1u) << "the endless row never started";
  ASSERT_TRUE(sweep.when_said("] step 3/").has_value()) << sweep.err_so_far();
  ::kill(row.front(), SIGTERM);
  const auto r = sweep.wait(std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto doc = results(dir);
  ASSERT_EQ(doc["runs"].size(), 2u);  // in the sweep file's order: quick, then endless
  EXPECT_EQ(doc["runs"][0]["name"], "quick");
  EXPECT_EQ(doc["runs"][0]["status"], "ok");
  EXPECT_EQ(doc["runs"][1]["name"], "endless");
  EXPECT_EQ(doc["runs"][1]["status"], "interrupted") << doc["runs"][1]["reason"];
}

// SIGINT or SIGTERM: the finished rows stay, the row in flight is `interrupted` with its
// finished steps, the reports are written, and the exit status says which signal.
TEST(SweepCommand, ASignalKeepsEveryFinishedRowAndTheStepsOfTheRowInFlight) {
  for (const int signal : {SIGINT, SIGTERM}) {
    TempDir dir;
    write_sweep_file(dir / "s.json");
    testing::SpawnedProcess sweep(sweep_args(dir, {"--rows", "quick,endless,broken"}));
    ASSERT_TRUE(wait_for_rows(dir, 1));
    ASSERT_EQ(rows_reported(dir), 1u);
    // "endless" in flight, steps done
    ASSERT_TRUE(sweep.when_said("] step 3/").has_value()) << sweep.err_so_far();
    const auto start = std::chrono::steady_clock::now();
    ::kill(sweep.pid(), signal);
    const auto r = sweep.wait();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "the row in flight stops";
    EXPECT_EQ(r.exit_code, 128 + signal) << r.err;
    const auto doc = results(dir);
    std::string rows;
    for (const auto& run : doc["runs"]) rows += run["name"].get<std::string>() + " " + run["status"].get<std::string>() + "; ";
    ASSERT_EQ(doc["runs"].size(), 2u) << "the row after the interrupted one never started: " << rows;
    EXPECT_EQ(doc["runs"][0]["status"], "ok");
    EXPECT_EQ(doc["runs"][1]["name"], "endless");
    EXPECT_EQ(doc["runs"][1]["status"], "interrupted") << doc["runs"][1]["reason"];
    EXPECT_GT(doc["runs"][1]["step_records"].size(), 0u);
    // The row's status in its table, the reason as the note under it.
    const std::string md = testing::read_text(dir / "out/results.md");
    EXPECT_NE(md.find("| interrupted [1] |"), std::string::npos) << md;
    EXPECT_NE(md.find("- [1] interrupted by "), std::string::npos) << md;
    // The row in flight is stopped by the signal the sweep was sent, and its reason names it: a
    // SIGINT said "Terminated" (issue 55).
    const std::string reason = doc["runs"][1]["reason"].get<std::string>();
    EXPECT_NE(reason.find(signal == SIGINT ? "interrupted by Interrupt" : "interrupted by Terminated"),
              std::string::npos)
        << reason;
  }
}

// --reports-dir: the reports (and nothing else) go there, rewritten as each row ends, so a
// sweep killed outright (SIGKILL: no handler runs) still leaves the rows it finished there.
TEST(SweepCommand, ReportsDirHoldsTheReportsOfEachFinishedRow) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  const auto reports = dir / "reports";
  auto reported = [&] {
    try {
      return nlohmann::json::parse(testing::read_text(reports / "results.json"))["runs"].size();
    } catch (const std::exception&) {
      return std::size_t{0};
    }
  };
  {
    testing::SpawnedProcess sweep(sweep_args(dir, {"--rows", "quick,endless", "--reports-dir", reports.string()}));
    for (int i = 0; i < 600 && reported() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(reported(), 1u) << "the first row never reached --reports-dir";
    ::kill(sweep.pid(), SIGKILL);
    sweep.wait();
  }
  EXPECT_NE(testing::read_text(reports / "results.md").find("| quick |"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(reports / "results.html"));
  EXPECT_FALSE(std::filesystem::exists(reports / "rows"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out/rows/faithful/quick.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out/results.json"));
  const auto empty = testing::run_process(sweep_args(dir, {"--rows", "quick", "--reports-dir", ""}));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("--reports-dir must not be empty"), std::string::npos) << empty.err;
}

// A sweep into a folder that holds an earlier sweep's reports replaces them before its first row
// runs, each row not run yet: killed outright during that row, it leaves its own reports, never
// the earlier sweep's, unmarked, as if they were this one's (issue 55).
TEST(SweepCommand, ASweepKilledInItsFirstRowLeavesItsOwnReportsNotAnEarlierSweeps) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  ASSERT_EQ(testing::run_process(sweep_args(dir, {"--rows", "quick"})).exit_code, 0);
  ASSERT_NE(testing::read_text(dir / "out/results.md").find("| quick |"), std::string::npos);
  {
    testing::SpawnedProcess sweep(sweep_args(dir, {"--rows", "endless"}));
    ASSERT_TRUE(sweep.when_said("] step 3/").has_value()) << sweep.err_so_far();
    ::kill(sweep.pid(), SIGKILL);
    sweep.wait();
  }
  const std::string md = testing::read_text(dir / "out/results.md");
  EXPECT_EQ(md.find("| quick |"), std::string::npos) << "the earlier sweep's:\n" << md;
  EXPECT_NE(md.find("| endless | 1 | - | - |"), std::string::npos) << md;
  EXPECT_NE(md.find("| not run |"), std::string::npos) << md;
  const std::string html = testing::read_text(dir / "out/results.html");
  EXPECT_EQ(html.find("<td>quick</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>endless</td>"), std::string::npos) << html;
  const auto summary = results(dir)["summary"];
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]["name"], "endless");
  EXPECT_EQ(summary[0]["repetition_outcomes"][0]["status"], "not run");
}

// A second SIGINT does not wait for anything. After the first, the sweep waits for the row in
// flight to finish its step, which takes seconds (busy work the row cannot cut short) and then
// reports it: only a second, sent meanwhile, ends the sweep at once, with no report of the row.
// (Two SIGINTs sent back to back can merge into one: the second follows the first by 0.2 s.)
TEST(SweepCommand, ASecondInterruptEndsEverythingAtOnce) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  testing::SpawnedProcess sweep(sweep_args(dir, {"--rows", "stalling"}));
  ASSERT_TRUE(sweep.when_said("] step 1/").has_value()) << sweep.err_so_far();  // step 2, of seconds, begins
  ::kill(sweep.pid(), SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(sweep.pid(), SIGINT);
  const auto r = sweep.wait(std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(rows_reported(dir), 0u) << "it waited for the row in flight and reported it";
}

TEST(SweepCommand, DryRunPrintsEachRowsCommand) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  const auto r = testing::run_process(sweep_args(dir, {"--dry-run", "--rows", "quick,ranks"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("faithful\tquick\tddpbench run --name quick"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--strategy ddp"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

// --resume keeps a row only from this machine and this build: a row file measured on another
// CPU, LibTorch and revision was kept, and this machine's environment written over it.
TEST(SweepCommand, ResumeKeepsOnlyARowMeasuredOnThisMachineAndBuild) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  ASSERT_EQ(testing::run_process(sweep_args(dir, {"--rows", "quick"})).exit_code, 0);
  const auto row_file = dir / "out/rows/faithful/quick.json";
  auto row = nlohmann::json::parse(testing::read_text(row_file));
  const nlohmann::json here = row["environment"];
  row["environment"]["cpu_model"] = "Another CPU";
  row["environment"]["libtorch_version"] = "1.0.0";
  row["environment"]["git_revision"] = "0123456789ab";
  testing::write_text(row_file, row.dump());
  const auto resumed = testing::run_process(sweep_args(dir, {"--rows", "quick", "--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("quick (faithful): done before, not kept, run again (CPU model: "
                             "Another CPU vs " +
                             here["cpu_model"].get<std::string>() + "; LibTorch: 1.0.0 vs "),
            std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("git revision: 0123456789ab vs "), std::string::npos) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(row_file))["environment"], here) << "the row ran again, here";
  // Another compiler, which compare's environment leaves out (the sixth attack's row kept as this
  // build's).
  // Its step records emptied (the seventh attack): kept, and then compared by its figures alone.
  {
    auto emptied = nlohmann::json::parse(testing::read_text(row_file));
    emptied["runs"][0]["step_records"] = nlohmann::json::array();
    testing::write_text(row_file, emptied.dump());
    const auto rerun = testing::run_process(sweep_args(dir, {"--rows", "quick", "--resume"}));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
    EXPECT_NE(rerun.err.find("not kept, run again (it holds no step records, which this build records"),
              std::string::npos)
        << rerun.err;
  }
  for (const auto& [aspect, other] : {std::pair{"compiler", "Clang 17"}}) {
    auto moved = nlohmann::json::parse(testing::read_text(row_file));
    moved["environment"][aspect] = other;
    testing::write_text(row_file, moved.dump());
    const auto rerun = testing::run_process(sweep_args(dir, {"--rows", "quick", "--resume"}));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
    EXPECT_NE(rerun.err.find(std::string("not kept, run again (") + aspect + ": " + other + " vs "), std::string::npos)
        << rerun.err;
  }
  // Measured here, it is kept.
  const auto again = testing::run_process(sweep_args(dir, {"--rows", "quick", "--resume"}));
  EXPECT_NE(again.err.find("quick (faithful): done before, kept (--resume)"), std::string::npos) << again.err;
}

// One measurement kept as several: a row file copied over another repetition's (or a whole
// sweep's results.json copied there) was kept by --resume, relabelled as that repetition.
TEST(SweepCommand, ResumeKeepsOnlyTheSlotsOwnRun) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  ASSERT_EQ(testing::run_process(sweep_args(dir, {"--rows", "quick", "--repeat", "2"})).exit_code, 0);
  const auto rows = dir / "out/rows/faithful";
  std::filesystem::copy_file(rows / "quick.r0.json", rows / "quick.r1.json",
                             std::filesystem::copy_options::overwrite_existing);
  const auto copied = testing::run_process(sweep_args(dir, {"--rows", "quick", "--repeat", "2", "--resume"}));
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  EXPECT_NE(copied.err.find("quick (faithful, repetition 0 of 0-1): done before, kept (--resume)"), std::string::npos)
      << copied.err;
  EXPECT_NE(copied.err.find("quick (faithful, repetition 1 of 0-1): done before, not kept, run again (it was written as "),
            std::string::npos)
      << copied.err;
  // A whole sweep's results.json there is no row's result file: refused, untouched (the output rule).
  std::filesystem::copy_file(dir / "out/results.json", rows / "quick.r1.json",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string whole_file = testing::read_text(rows / "quick.r1.json");
  const auto whole = testing::run_process(sweep_args(dir, {"--rows", "quick", "--repeat", "2", "--resume"}));
  EXPECT_EQ(whole.exit_code, 2) << whole.err;
  EXPECT_NE(whole.err.find("exists and is not a row's result file"), std::string::npos) << whole.err;
  EXPECT_EQ(testing::read_text(rows / "quick.r1.json"), whole_file);
  std::filesystem::remove(rows / "quick.r1.json");
  auto row = nlohmann::json::parse(testing::read_text(rows / "quick.r0.json"));
  row["runs"][0].erase("threads_per_rank");
  testing::write_text(rows / "quick.r0.json", row.dump());
  const auto unthreaded = testing::run_process(sweep_args(dir, {"--rows", "quick", "--repeat", "2", "--resume"}));
  EXPECT_NE(unthreaded.err.find("repetition 0 of 0-1): done before, not kept, run again (it does not record its threads "
                                "per rank, which this build records)"),
            std::string::npos)
      << unthreaded.err;
}

// The output rule: the reports and --gbench-json never replace the sweep file, nor a file the
// sweep did not write; checked before any row runs.
TEST(SweepCommand, ItsOutputsNeverReplaceItsSweepFileOrAFileItDidNotWrite) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  const std::string sweep_file = testing::read_text(dir / "s.json");
  const auto over_file =
      testing::run_process(sweep_args(dir, {"--rows", "quick", "--gbench-json", (dir / "s.json").string()}));
  EXPECT_EQ(over_file.exit_code, 2) << over_file.err;
  EXPECT_NE(over_file.err.find("--gbench-json '" + (dir / "s.json").string() + "' is the file --file"),
            std::string::npos)
      << over_file.err;
  EXPECT_EQ(testing::read_text(dir / "s.json"), sweep_file);
  std::filesystem::create_directories(dir / "out");
  testing::write_text(dir / "out/results.md", "a user's notes");
  const auto over_notes = testing::run_process(sweep_args(dir, {"--rows", "quick"}));
  EXPECT_EQ(over_notes.exit_code, 2) << over_notes.err;
  EXPECT_NE(over_notes.err.find("--out-dir's results.md '" + (dir / "out/results.md").string() +
                                "' exists and is not the sweep's results.md"),
            std::string::npos)
      << over_notes.err;
  EXPECT_EQ(testing::read_text(dir / "out/results.md"), "a user's notes");
  EXPECT_FALSE(std::filesystem::exists(dir / "out/rows")) << "no row ran";
  // Nor notes that open with the heading a sweep's page opens with (they were replaced, exit 0).
  testing::write_text(dir / "out/results.md", "# ddpbench: notes on the A100 cluster runs\n");
  EXPECT_EQ(testing::run_process(sweep_args(dir, {"--rows", "quick"})).exit_code, 2);
  EXPECT_EQ(testing::read_text(dir / "out/results.md"), "# ddpbench: notes on the A100 cluster runs\n");
  // --dry-run refuses them as the sweep would (it printed the plan, exit 0).
  const auto dry = testing::run_process(sweep_args(dir, {"--rows", "quick", "--dry-run"}));
  EXPECT_EQ(dry.exit_code, 2) << dry.err;
  EXPECT_NE(dry.err.find("exists and is not the sweep's results.md"), std::string::npos) << dry.err;
  // Nor a file of the user's where a traced row's rank writes its trace (the row failed, exit 1,
  // after the rows before it had run).
  std::filesystem::remove(dir / "out/results.md");
  std::filesystem::create_directories(dir / "out/rows/faithful");
  testing::write_text(dir / "out/rows/faithful/ranks.rank1.trace.json", "{\"mine\": 1}");
  const auto traced = testing::run_process(
      sweep_args(dir, {"--rows", "quick,ranks", "--trace-steps", "1:1", "--max-steps", "3", "--dry-run"}));
  EXPECT_EQ(traced.exit_code, 2) << traced.err;
  EXPECT_NE(traced.err.find("row ranks (faithful)'s --trace-steps (rank 1's trace)"), std::string::npos) << traced.err;
  EXPECT_EQ(testing::read_text(dir / "out/rows/faithful/ranks.rank1.trace.json"), "{\"mine\": 1}");
}

// --dry-run checks each row as `run` will: a fault at step 5 of a row the CPU preset cut to 4 steps,
// and --nproc 2 on a one-process row, passed it and failed every repetition after the other rows.
TEST(SweepCommand, DryRunRefusesWhatEveryRepetitionWouldRefuse) {
  TempDir dir;
  testing::write_text(dir / "s.json", R"({"name": "cut", "defaults": {"model": "tiny", "dataset": "synthetic",
      "synthetic-train-images": 512, "synthetic-test-images": 128, "batch-size": 64, "workers": 0},
      "rows": [{"name": "one", "options": {"strategy": "single"}}]})");
  const auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {testing::ddpbench_binary(), "sweep", "--file", (dir / "s.json").string(), "--mode",
                                  "faithful", "--table", "cpu", "--dry-run", "--out-dir", (dir / "out").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ASSERT_EQ(testing::run_process(args({})).exit_code, 0);
  for (const auto& [extra, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--inject-fault-rank", "0", "--inject-fault-step", "5"},
            "row 'one' (faithful): --inject-fault-step 5: the row runs 4 steps (0-3) after --max-steps 4"},
           {{"--nproc", "2"}, "row 'one' (faithful): --nproc 2: strategy 'single' runs in one process"},
           // Found by a rank before: a failed row (exit 1) in every repetition, its folders made.
           {{"--init-from", (dir / "s.json").string()}, "row 'one' (faithful): --init-from '" + (dir / "s.json").string() +
                                                            "': not a PyTorch file of named tensors"},
           {{"--cache-dir", (dir / "s.json").string()}, "is a file, not a folder"}}) {
    const auto r = testing::run_process(args(extra));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "out")) << "nothing written";
  }
}

// The console said "repetition 1" of the run the reports and the result file call repetition 0.
TEST(SweepCommand, TheConsoleNumbersRepetitionsAsTheReportsDo) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  const auto r = testing::run_process(sweep_args(dir, {"--rows", "quick", "--repeat", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("quick (faithful, repetition 0 of 0-1)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("quick (faithful, repetition 1 of 0-1)"), std::string::npos) << r.err;
  std::vector<int> numbers;
  const nlohmann::json document = results(dir);
  for (const auto& run : document["runs"]) numbers.push_back(run["repetition"].get<int>());
  EXPECT_EQ(numbers, (std::vector<int>{0, 1}));
}

TEST(SweepCommand, BadInputExitsTwo) {
  TempDir dir;
  write_sweep_file(dir / "s.json");
  EXPECT_EQ(testing::run_process(sweep_args(dir, {"--rows", "nope"})).exit_code, 2);
  EXPECT_EQ(testing::run_process(sweep_args(dir, {"--repeat", "0"})).exit_code, 2);
  EXPECT_EQ(testing::run_process(sweep_args(dir, {"--out", "x.json"})).exit_code, 2);
  EXPECT_EQ(testing::run_process({testing::ddpbench_binary(), "sweep", "--file", (dir / "none.json").string()}).exit_code, 2);
}

}  // namespace
}  // namespace ddpbench
