// `ddpbench compare` through the binary: its table and its exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "reports/compare.hpp"
#include "reports/paired_compare.hpp"
#include "reports/result_file.hpp"
#include "support/process.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

testing::ProcessResult compare(std::vector<std::string> args) {
  args.insert(args.begin(), {testing::ddpbench_binary(), "compare"});
  return testing::run_process(args);
}

TEST(CompareCommand, ExitCodesForEachOutcome) {
  TempDir dir;
  const auto base = testing::sample_sweep_document();
  auto slower = base;
  for (auto& r : slower.runs) {
    r.train_time_s *= 1.2;
    r.images_per_s /= 1.2;
    r.steady_images_per_s /= 1.2;
  }
  auto other_gpu = base;
  other_gpu.environment.gpus = {{"NVIDIA H200", 141LL << 30, "9.0"}};
  write_result_file(dir / "base.json", base);
  write_result_file(dir / "slower.json", slower);
  write_result_file(dir / "h200.json", other_gpu);
  testing::write_text(dir / "broken.json", "{\"schema\": ");

  const auto same = compare({(dir / "base.json").string(), (dir / "base.json").string()});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("No regression"), std::string::npos) << same.out;

  const auto regression = compare({(dir / "base.json").string(), (dir / "slower.json").string(), "--out",
                                   (dir / "table.md").string()});
  EXPECT_EQ(regression.exit_code, 1) << regression.err;
  EXPECT_NE(regression.out.find("REGRESSION"), std::string::npos) << regression.out;
  EXPECT_EQ(testing::read_text(dir / "table.md"), comparison_file(regression.out));

  const auto loose = compare({(dir / "base.json").string(), (dir / "slower.json").string(), "--threshold", "0.25"});
  EXPECT_EQ(loose.exit_code, 0) << loose.out;

  const auto accuracy_only = compare({(dir / "base.json").string(), (dir / "slower.json").string(), "--metric",
                                      "test_accuracy"});
  EXPECT_EQ(accuracy_only.exit_code, 0) << accuracy_only.out;

  const auto mismatch = compare({(dir / "base.json").string(), (dir / "h200.json").string()});
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.out.find("- CANNOT JUDGE: measured in another environment: GPU 0: NVIDIA A100-SXM4-40GB vs "
                              "NVIDIA H200 (--allow-env-mismatch gpu compares them anyway)"),
            std::string::npos)
      << mismatch.out;
  EXPECT_EQ(
      compare({(dir / "base.json").string(), (dir / "h200.json").string(), "--allow-env-mismatch", "gpu"}).exit_code,
      0);
  EXPECT_EQ(
      compare({(dir / "base.json").string(), (dir / "h200.json").string(), "--allow-env-mismatch", "all"}).exit_code,
      0);
  const auto unknown_aspect =
      compare({(dir / "base.json").string(), (dir / "h200.json").string(), "--allow-env-mismatch", "weather"});
  EXPECT_EQ(unknown_aspect.exit_code, 2);
  EXPECT_NE(unknown_aspect.err.find("--allow-env-mismatch: 'weather' is no aspect of the environment"),
            std::string::npos)
      << unknown_aspect.err;

  const auto broken = compare({(dir / "base.json").string(), (dir / "broken.json").string()});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.err.find("broken.json' is not valid JSON"), std::string::npos) << broken.err;
  EXPECT_EQ(compare({(dir / "base.json").string(), (dir / "absent.json").string()}).exit_code, 2);
  EXPECT_EQ(compare({(dir / "base.json").string()}).exit_code, 2);
  EXPECT_EQ(compare({(dir / "base.json").string(), (dir / "base.json").string(), "--metric", "speed"}).exit_code, 2);
}

// Every way a user can hand the gate something it cannot judge returns (not a hang), with
// the exit code and a line naming the problem: never a hang (a missing normalising row once
// looped at full speed for the 51 minutes before it was killed), never exit 0.
TEST(CompareCommand, EveryBadInputReturnsWithinAMinuteNamingIt) {
  TempDir dir;
  const auto base = testing::sample_sweep_document();
  auto without_single = base;
  std::erase_if(without_single.runs, [](const RunResult& r) { return r.name == "single"; });
  auto single_failed = base;
  for (auto& r : single_failed.runs) {
    if (r.name == "single") r.status = RunStatus::failed;
  }
  auto not_measured = base;
  for (auto& r : not_measured.runs) r.train_time_s = r.steady_images_per_s = kNotMeasured;
  auto ddp_lost = base;
  std::erase_if(ddp_lost.runs, [](const RunResult& r) { return r.name == "ddp-2gpu"; });
  // 2,000 repetitions against 2: the rank test's exact path must stay cheap.
  auto many = base;
  for (int i = 0; i < 2000; ++i) {
    many.runs.push_back(testing::sample_run("ddp-2gpu", "faithful", 2, 9.8 + 1e-5 * i, 5100.0, 2 + i));
  }
  many.sweep->repeat = 2002;
  const std::vector<std::pair<std::string, const ResultDocument*>> files = {
      {"base", &base},         {"without-single", &without_single}, {"single-failed", &single_failed},
      {"not-measured", &not_measured}, {"ddp-lost", &ddp_lost},     {"many", &many}};
  for (const auto& [name, doc] : files) write_result_file(dir / (name + ".json"), *doc);
  testing::write_text(dir / "nan.json", "{\"schema\": NaN}");
  const auto file = [&](const char* name) { return (dir / (std::string(name) + ".json")).string(); };
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{file("base"), file("without-single"), "--normalize-by", "single"}, 2,
       "--normalize-by single: the current file has no row single (faithful)"},
      {{file("without-single"), file("base"), "--normalize-by", "single"}, 2,
       "--normalize-by single: the baseline has no row single (faithful)"},
      {{file("base"), file("single-failed"), "--normalize-by", "single"}, 2, "did not run in the current file"},
      {{file("base"), file("not-measured"), "--normalize-by", "single"}, 2,
       "single (faithful) did not run in the current file (failed: says ok, but it measured no train_time_s"},
      {{file("base"), file("not-measured")}, 1, "ddp-2gpu (faithful): failed: says ok, but it measured no train_time_s"},
      {{file("base"), file("ddp-lost")}, 1, "ddp-2gpu (faithful): ran in the baseline, absent now"},
      {{file("base"), file("ddp-lost"), "--allow-missing", "nope"}, 2, "--allow-missing: the baseline has no row 'nope'"},
      {{file("base"), file("base"), "--min-vs-pytorch", "0.9"}, 2, "has no PyTorch twin rows"},
      {{file("base"), file("nan")}, 2, "nan.json' is not valid JSON"},
      {{file("base"), file("base"), "--alpha", "nan"}, 2, "--alpha"},
      {{file("base"), file("base"), "--threshold", "inf"}, 2, "--threshold"},
      {{file("base"), file("many")}, 0, "No regression"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{testing::ddpbench_binary(), "compare"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    // The hang this guards against ran 51 minutes; a minute is far past a loaded machine's start-up.
    const auto r = testing::SpawnedProcess(args).wait(std::chrono::seconds(60));
    std::string shown;
    for (const auto& a : c.args) shown += " " + a.substr(a.find_last_of('/') + 1);
    EXPECT_FALSE(r.timed_out) << "compare" << shown << " ran past 60 s";
    EXPECT_EQ(r.exit_code, c.exit_code) << shown << "\n" << r.err << r.out;
    EXPECT_NE((r.err + r.out).find(c.says), std::string::npos) << shown << ": " << r.err << r.out;
    if (c.exit_code == 2) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
    }
  }
}

// --paired through the binary: rounds of two builds, one row 20 % slower: exit 1, the estimate
// and its interval printed, the table written; with too few rounds the rows still undecided
// are written for the next rounds; its flags without it, and the stored mode's with it, are
// bad input.
TEST(CompareCommand, PairedRoundsOfTwoBuilds) {
  TempDir dir;
  ResultDocument base = testing::sample_sweep_document(), cand = base;
  base.runs.clear();
  cand.runs.clear();
  const double drift[] = {1.0, 1.2, 0.9, 1.1, 1.05, 0.95};
  for (int64_t round = 0; round < 6; ++round) {
    for (const auto& run : testing::sample_sweep_document().runs) {
      if (run.repetition != 0) continue;
      RunResult b = run, c = run;
      b.repetition = c.repetition = round;
      b.train_time_s *= drift[round];
      c.train_time_s *= drift[round] * (run.name == "ddp-2gpu" ? 1.2 : 1.0) * (round % 2 == 0 ? 1.003 : 0.997);
      base.runs.push_back(b);
      cand.runs.push_back(c);
    }
  }
  base.sweep->repeat = cand.sweep->repeat = 6;  // a rounds file: repetition r is round r
  write_result_file(dir / "base.json", base);
  write_result_file(dir / "cand.json", cand);
  const auto paired = compare({(dir / "base.json").string(), (dir / "cand.json").string(), "--paired", "--out",
                               (dir / "paired.md").string(), "--undecided-out", (dir / "undecided.txt").string()});
  EXPECT_EQ(paired.exit_code, 1) << paired.out << paired.err;
  EXPECT_NE(paired.out.find("- ddp-2gpu (faithful) train_time_s: 20.0 % slower, 95 % CI +"), std::string::npos)
      << paired.out;
  EXPECT_EQ(testing::read_text(dir / "paired.md"), comparison_file(paired.out));
  EXPECT_EQ(testing::read_text(dir / "undecided.txt"), kUndecidedRowsMarker);

  const auto early = compare({(dir / "base.json").string(), (dir / "cand.json").string(), "--paired", "--min-rounds",
                              "8", "--max-rounds", "10", "--undecided-out", (dir / "undecided.txt").string()});
  EXPECT_EQ(early.exit_code, 2) << early.out << early.err;  // no verdict yet: never a pass
  EXPECT_NE(early.out.find("Undecided below the cap: no verdict yet"), std::string::npos) << early.out;
  EXPECT_NE(testing::read_text(dir / "undecided.txt").find("ddp-2gpu\n"), std::string::npos);

  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--min-rounds", "3"},
                                              std::vector<std::string>{"--paired", "--normalize-by", "twin"},
                                              std::vector<std::string>{"--paired", "--min-rounds", "1"}}) {
    std::vector<std::string> args = {(dir / "base.json").string(), (dir / "cand.json").string()};
    args.insert(args.end(), bad.begin(), bad.end());
    const auto r = compare(args);
    EXPECT_EQ(r.exit_code, 2) << bad[0] << " " << bad[1] << ": " << r.out;
    EXPECT_NE(r.err.find(bad[0] == "--paired" ? bad[1] : bad[0]), std::string::npos) << r.err;
  }
}

// Three answers through the binary, never two: what the gate has nothing to judge by exits 2
// with its table and the reason (never "No regression."); a row that did half its configured
// work is the candidate's failure (1); an option the baseline's build did not have, at its
// default on the candidate, is the same setting (0, not "other settings").
TEST(CompareCommand, CannotJudgeLessWorkAndANewOptionAtItsDefault) {
  TempDir dir;
  const auto base = testing::sample_sweep_document();
  auto failed_base = base;
  for (auto& r : failed_base.runs) {
    if (r.name == "single" && r.mode == "faithful") {
      r.status = RunStatus::failed;
      r.reason = "out of memory";
    }
  }
  auto halved = base;
  for (auto& r : halved.runs) {
    if (r.name != "ddp-2gpu" || r.mode != "faithful") continue;
    r.steps /= 2;
    r.images_trained /= 2;
    r.train_time_s /= 2;
  }
  auto newer = base;
  newer.option_defaults = {{"a-new-option", 0}};
  for (auto& r : newer.runs) {
    if (!r.config.empty()) r.config["a-new-option"] = 0;
  }
  write_result_file(dir / "base.json", base);
  write_result_file(dir / "failed-base.json", failed_base);
  write_result_file(dir / "halved.json", halved);
  write_result_file(dir / "newer.json", newer);

  const auto unjudged = compare({(dir / "failed-base.json").string(), (dir / "base.json").string()});
  EXPECT_EQ(unjudged.exit_code, 2) << unjudged.out << unjudged.err;
  EXPECT_NE(unjudged.out.find("- CANNOT JUDGE: single (faithful): failed in every repetition of the baseline (out of "
                              "memory)"),
            std::string::npos)
      << unjudged.out;
  EXPECT_NE(unjudged.out.find("\nCannot judge (threshold"), std::string::npos) << unjudged.out;
  EXPECT_EQ(unjudged.out.find("No regression"), std::string::npos) << unjudged.out;
  EXPECT_EQ(compare({(dir / "failed-base.json").string(), (dir / "base.json").string(), "--allow-missing", "single"})
                .exit_code,
            0);

  const auto less = compare({(dir / "base.json").string(), (dir / "halved.json").string()});
  EXPECT_EQ(less.exit_code, 1) << less.out << less.err;
  EXPECT_NE(less.out.find("REGRESSION: ddp-2gpu (faithful): failed: did less work than configured: it trained 49 of "
                          "the 98 steps"),
            std::string::npos)
      << less.out;

  const auto added = compare({(dir / "base.json").string(), (dir / "newer.json").string()});
  EXPECT_EQ(added.exit_code, 0) << added.out << added.err;
  newer.runs[0].config["a-new-option"] = 1;
  newer.runs[1].config["a-new-option"] = 1;
  write_result_file(dir / "newer.json", newer);
  const auto changed = compare({(dir / "base.json").string(), (dir / "newer.json").string()});
  EXPECT_EQ(changed.exit_code, 1) << changed.out << changed.err;
  EXPECT_NE(changed.out.find("configured differently now, so not the same measurement (a-new-option 0 vs 1)"),
            std::string::npos)
      << changed.out;
}

// The output rule (harness/base/output_rule.hpp): --out and --undecided-out never replace a file
// compare reads (the current file overwritten by the table, the baseline truncated to 0 bytes, both
// exit 0 before) nor a file compare did not write; an earlier table or list of its own they do.
TEST(CompareCommand, ItsOutputsNeverReplaceAnInputOrAFileItDidNotWrite) {
  TempDir dir;
  const auto base = testing::sample_sweep_document();
  write_result_file(dir / "base.json", base);
  write_result_file(dir / "cur.json", base);
  testing::write_text(dir / "notes.md", "a user's notes");
  // Files that end as a table does or hold one name a line: not compare's without its first line.
  const std::map<std::string, std::string> users = {
      {"verdict.md", "My notes on the run.\n\nNo regression (threshold 5 %).\n"},
      {"requirements.txt", "torch\nnumpy\n"},
      {"VERSION", "1.2.3\n"},
      {"empty", ""}};
  for (const auto& [name, text] : users) testing::write_text(dir / name, text);
  const std::string before = testing::read_text(dir / "base.json");
  std::vector<std::vector<std::string>> refused = {
      {"--out", (dir / "cur.json").string()},
      {"--out", (dir / "." / "base.json").string()},
      {"--paired", "--undecided-out", (dir / "base.json").string()},
      {"--out", (dir / "notes.md").string()},
      {"--paired", "--out", (dir / "t.md").string(), "--undecided-out", (dir / "t.md").string()}};
  for (const auto& [name, text] : users) {
    refused.push_back({"--out", (dir / name).string()});
    refused.push_back({"--paired", "--undecided-out", (dir / name).string()});
  }
  for (const auto& outputs : refused) {
    std::vector<std::string> args = {(dir / "base.json").string(), (dir / "cur.json").string()};
    args.insert(args.end(), outputs.begin(), outputs.end());
    const auto r = compare(args);
    EXPECT_EQ(r.exit_code, 2) << outputs[1] << ": " << r.out << r.err;
    EXPECT_TRUE(r.out.empty()) << "nothing judged before the outputs are checked: " << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_NE(compare({(dir / "base.json").string(), (dir / "cur.json").string(), "--out", (dir / "cur.json").string()})
                .err.find("--out '" + (dir / "cur.json").string() + "' is the file CURRENT '" +
                          (dir / "cur.json").string() + "' reads"),
            std::string::npos);
  EXPECT_EQ(testing::read_text(dir / "base.json"), before);
  EXPECT_EQ(testing::read_text(dir / "cur.json"), before);
  EXPECT_EQ(testing::read_text(dir / "notes.md"), "a user's notes");
  for (const auto& [name, text] : users) EXPECT_EQ(testing::read_text(dir / name), text) << name;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.md"));
  // Its own earlier table and list it replaces, stored and paired alike.
  for (int twice = 0; twice < 2; ++twice) {
    EXPECT_EQ(compare({(dir / "base.json").string(), (dir / "cur.json").string(), "--out", (dir / "t.md").string()})
                  .exit_code,
              0);
    const auto paired = compare({(dir / "base.json").string(), (dir / "cur.json").string(), "--paired", "--min-rounds",
                                 "2", "--out", (dir / "t.md").string(), "--undecided-out", (dir / "u.txt").string()});
    EXPECT_TRUE(paired.err.empty()) << "a verdict, not a refusal: " << paired.err;
    EXPECT_EQ(testing::read_text(dir / "t.md"), comparison_file(paired.out));
  }
  // Every output found writable before any is written (the ninth attack: --out written, then
  // exit 2 for an --undecided-out that could not be).
  const auto unwritable = compare({(dir / "base.json").string(), (dir / "cur.json").string(), "--paired", "--min-rounds",
                                   "2", "--out", (dir / "w.md").string(), "--undecided-out", "/proc/nope/u.txt"});
  EXPECT_EQ(unwritable.exit_code, 2) << unwritable.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "w.md")) << "written before the other output was found unwritable";
}

// One rule for environments in both modes: the same code run with OMP_NUM_THREADS=1 against =2
// (each rank's threads 1 and 2) read as a regression, exit 1; a Debug build against a Release
// baseline as no regression. Both are cannot judge (2), naming the difference, until
// --allow-env-mismatch names it. Nothing timed is cannot judge too, never "No regression".
TEST(CompareCommand, ThreadsAffinityAndBuildTypeAreCannotJudgeInBothModes) {
  TempDir dir;
  auto base = testing::sample_sweep_document();
  base.environment.build_type = "Release";
  base.environment.omp_num_threads = "2";
  base.environment.cpu_affinity = "0-1";
  for (auto& r : base.runs) r.threads_per_rank = 2;
  auto one_thread = base;
  one_thread.environment.omp_num_threads = "1";
  for (auto& r : one_thread.runs) {
    r.threads_per_rank = 1;
    r.train_time_s *= 1.8;
    r.images_per_s /= 1.8;
    r.steady_images_per_s /= 1.8;
  }
  auto pinned = base;
  pinned.environment.cpu_affinity = "0";
  auto debug = base;
  debug.environment.build_type = "Debug";
  for (const auto& [name, doc] : {std::pair{"base", &base}, std::pair{"one-thread", &one_thread},
                                  std::pair{"pinned", &pinned}, std::pair{"debug", &debug}}) {
    write_result_file(dir / (std::string(name) + ".json"), *doc);
  }
  const auto file = [&](const char* name) { return (dir / (std::string(name) + ".json")).string(); };
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"one-thread", "threads per rank of ddp-2gpu (faithful): 2 vs 1 (--allow-env-mismatch threads"},
      {"one-thread", "OMP_NUM_THREADS: 2 vs 1 (--allow-env-mismatch threads"},
      {"pinned", "CPUs the process could use: 0-1 vs 0 (--allow-env-mismatch cpu-affinity"},
      {"debug", "build type: Release vs Debug (--allow-env-mismatch build-type"}};
  for (const auto& [other, says] : cases) {
    for (const bool paired : {false, true}) {
      std::vector<std::string> args = {file("base"), file(other)};
      if (paired) args.insert(args.end(), {"--paired", "--min-rounds", "2"});
      const auto r = compare(args);
      EXPECT_EQ(r.exit_code, 2) << other << (paired ? " --paired" : "") << ": " << r.out << r.err;
      EXPECT_NE(r.out.find("- CANNOT JUDGE: measured in another environment: " + says), std::string::npos)
          << (paired ? "--paired: " : "") << r.out << r.err;
      EXPECT_EQ(r.out.find("REGRESSION"), std::string::npos) << r.out;
    }
  }
  const auto allowed = compare({file("base"), file("one-thread"), "--allow-env-mismatch", "threads"});
  EXPECT_EQ(allowed.exit_code, 1) << "judged once allowed: 1.8x slower" << allowed.out;
  EXPECT_NE(allowed.out.find("environment differs (allowed): OMP_NUM_THREADS: 2 vs 1"), std::string::npos)
      << allowed.out;
  // Every row allowed missing and nothing timed: no pass.
  auto empty = base;
  empty.runs.clear();
  auto single = testing::sample_run("single", "faithful", 1, 13.0, 3846.0);
  single.status = RunStatus::skipped;
  single.reason = "not here";
  empty.runs.push_back(single);
  write_result_file(dir / "empty.json", empty);
  const auto nothing = compare({file("base"), file("empty"), "--allow-missing", "single,ddp-2gpu"});
  EXPECT_EQ(nothing.exit_code, 2) << nothing.out << nothing.err;
  EXPECT_NE(nothing.out.find("- CANNOT JUDGE: nothing was timed"), std::string::npos) << nothing.out;
}

// Every command reads a row's configuration as this build's option table does: a value of the
// wrong type, or a graphed row of a strategy no graph captures that says it ran, is bad input
// naming the option, never a difference or a match. A row skipped for want of a GPU ran nothing.
TEST(CompareCommand, AConfigurationNoRunHasIsBadInput) {
  TempDir dir;
  const auto base = testing::sample_sweep_document();
  write_result_file(dir / "base.json", base);
  const auto edited = [&](const std::string& row, const nlohmann::json& value, RunStatus status = RunStatus::ok,
                          const std::string& key = "cuda-graphs") {
    auto doc = base;
    for (auto& r : doc.runs) {
      if (r.name == row) {
        r.config[key] = value;
        if (key == "cuda-graphs" && value == true) {  // graphs capture after three eager warm-up steps
          r.config["warmup-steps"] = 5;
          r.warmup_steps = 5;
        }
        r.status = status;
        if (status == RunStatus::skipped) r.reason = "--cuda-graphs captures the step on a GPU, and none is visible";
      }
    }
    write_result_file(dir / "edited.json", doc);
    return compare({(dir / "base.json").string(), (dir / "edited.json").string()});
  };
  const auto yes = edited("single", "yes");
  EXPECT_EQ(yes.exit_code, 2) << yes.out << yes.err;
  EXPECT_NE(yes.err.find("has a configuration no run has: --cuda-graphs: \"yes\" is not a value of its type"),
            std::string::npos)
      << yes.err;
  // Text that would parse is still not what a run writes; nor is a value out of range.
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"cuda-graphs", 1}, {"nproc", "2"}, {"strategy", 5}, {"lr", "0.1"}, {"lr", -1}, {"max-steps", 1.5}}) {
    const auto wrong = edited("single", value, RunStatus::ok, key);
    EXPECT_EQ(wrong.exit_code, 2) << key << " " << value.dump() << ": " << wrong.out << wrong.err;
    EXPECT_NE(wrong.err.find("--" + key), std::string::npos) << wrong.err;
  }
  const auto ddp = edited("ddp-2gpu", true);
  EXPECT_EQ(ddp.exit_code, 2) << ddp.out << ddp.err;
  EXPECT_NE(ddp.err.find("--cuda-graphs captures the one-device step of --strategy single"), std::string::npos)
      << ddp.err;
  // Graphed rows that ran are proven like any other; one skipped on a CPU is read as it is.
  const auto graphed = edited("single", true);
  EXPECT_EQ(graphed.exit_code, 1) << graphed.out << graphed.err;  // configured differently: not the same row
  auto cpu_table = base;  // a graphed single row as a sweep on CPUs skips it: the CPU table's device and warm-up
  for (auto& r : cpu_table.runs) {
    if (r.name != "single") continue;
    r.config["cuda-graphs"] = true;
    r.config["device"] = "cpu";
    r.config["warmup-steps"] = 1;
    r.status = RunStatus::skipped;
    r.reason = "--cuda-graphs captures the step on a GPU, and none is visible";
  }
  write_result_file(dir / "skipped.json", cpu_table);
  const auto skipped = compare({(dir / "skipped.json").string(), (dir / "skipped.json").string()});
  EXPECT_NE(skipped.exit_code, 2) << skipped.out << skipped.err;
  // The same reader for `project`, `advise` and `trace` (read_results_here), and `sweep --resume`.
}

}  // namespace
}  // namespace ddpbench
