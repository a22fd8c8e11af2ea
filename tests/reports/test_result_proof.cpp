#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "harness/base/input_error.hpp"
#include "reports/compare.hpp"
#include "reports/paired_compare.hpp"
#include "reports/result_file.hpp"
#include "reports/result_proof.hpp"
#include "support/proven_documents.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

using testing::sample_run;
using testing::twin_document;

ResultDocument swept(std::vector<RunResult> runs, int64_t repeat) {
  ResultDocument doc;
  doc.environment.libtorch_version = "2.11.0";
  doc.environment.gpus = {{"NVIDIA A100-SXM4-40GB", 40LL << 30, "8.0"}};  // sample_run's rows are on cuda:0
  doc.runs = std::move(runs);
  doc.sweep = SweepInfo{};
  doc.sweep->repeat = repeat;
  return doc;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

// Half its configured steps, its times halved: it read "improved" and "2.00x PyTorch" in the
// stored gate. Less work is no speed: the proof fails the row, and the candidate's failure is
// a regression; on the baseline's side the gate cannot judge the row.
TEST(ResultProof, ARowThatTrainedHalfItsStepsIsFailedOnEitherSide) {
  const ResultDocument baseline = twin_document({100, 100, 100}, {100, 100, 100});
  ResultDocument halved = baseline;
  for (auto& r : halved.runs) {
    if (r.name != "ddp") continue;
    r.steps = 5;
    r.images_trained = 320;
    r.train_time_s /= 2;
    r.images_per_s *= 2;
    r.steady_images_per_s *= 2;
  }
  const ProvenResults proven_halved = proven(halved);
  EXPECT_EQ(proven_halved.failed_by_proof().size(), 3u);
  EXPECT_NE(proven_halved.document().runs[0].reason.find("trained 5 of the 10 steps"), std::string::npos)
      << proven_halved.document().runs[0].reason;
  CompareOptions options;
  options.min_vs_pytorch = 0.9;
  const Comparison now = compare_results(baseline, halved, options);
  EXPECT_TRUE(now.regression());
  EXPECT_TRUE(mentions(now.failed_rows, "did less work than configured"));
  EXPECT_TRUE(now.pytorch.empty());  // no "2.00x PyTorch" for a row that did half the work
  const Comparison before = compare_results(halved, baseline, options);
  EXPECT_FALSE(before.regression());
  EXPECT_TRUE(before.cannot_judge_any());
  EXPECT_EQ(before.exit_code(), 2);
  EXPECT_EQ(now.exit_code(), 1);
  EXPECT_EQ(compare_results(baseline, baseline, options).exit_code(), 0);
  EXPECT_TRUE(mentions(before.cannot_judge, "ddp (faithful): failed in every repetition of the baseline"));
  EXPECT_NE(markdown_comparison(before, options).find("\nCannot judge (threshold"), std::string::npos);
}

TEST(ResultProof, WorkIsTheConfiguredStepsBatchWorldImagesAndEvaluation) {
  const auto reason_for = [](const std::function<void(RunResult&)>& edit) {
    RunResult r = sample_run("ddp-2", "faithful", 2, 10, 5000);
    r.config["epochs"] = 1;
    r.config["max-steps"] = nullptr;
    r.config["max-eval-batches"] = nullptr;
    edit(r);
    testing::record_steps(r);  // its step records as a run of those steps writes them
    const ProvenResults p = proven(swept({r}, 1));
    return p.document().runs[0].status == RunStatus::ok ? std::string("ok") : p.document().runs[0].reason;
  };
  EXPECT_EQ(reason_for([](RunResult&) {}), "ok");
  EXPECT_NE(reason_for([](RunResult& r) { r.config["max-steps"] = 10; }).find("trained 98 of the 10"), std::string::npos);
  EXPECT_EQ(reason_for([](RunResult& r) {
    r.config["max-steps"] = 10;
    r.steps = 10;
    r.images_trained = 5120;
  }), "ok");
  EXPECT_NE(reason_for([](RunResult& r) { r.config["epochs"] = 2; }).find("trained 98 of the 196"), std::string::npos);
  EXPECT_NE(reason_for([](RunResult& r) { r.steps_per_epoch = 0; })
                .find("its file says an epoch has 0 steps where 50000 cifar10 images over 2 ranks in batches of 256 "
                      "make 98"),
            std::string::npos);
  EXPECT_NE(reason_for([](RunResult& r) { r.config["nproc"] = 4; }).find("ran 2 ranks where its configuration asks 4"),
            std::string::npos);
  EXPECT_NE(reason_for([](RunResult& r) { r.global_batch = 256; }).find("did other work than configured: its global batch is 256"),
            std::string::npos);
  EXPECT_NE(reason_for([](RunResult& r) { r.global_batch = 2048; }).find("did other work than configured"),
            std::string::npos)
      << "more work than configured is other work, not less";
  EXPECT_NE(reason_for([](RunResult& r) { r.images_trained = 25000; }).find("trained 25000 images"), std::string::npos);
  EXPECT_NE(reason_for([](RunResult& r) { r.eval_cut = true; }).find("whole test set"), std::string::npos);
  // A row that did not finish says so itself: the proof leaves its status and reason alone.
  EXPECT_EQ(reason_for([](RunResult& r) {
              r.status = RunStatus::interrupted;
              r.reason = "SIGINT";
              r.steps = 3;
            }),
            "SIGINT");
}

// The issue's row: a ddp-2 whose file says 8 steps an epoch, 8 steps and 512 images, where its
// configuration (4096 synthetic images, 32 a rank on 2 ranks, max-steps 16) asks 16 of a full
// epoch's 64. The proof compared the steps with the row's own steps_per_epoch: it passed, and the
// stored gate read it "improved", exit 0. A loader or sampler that halves an epoch is no speed-up.
RunResult issue_ddp2_row() {
  RunResult r = sample_run("ddp-2", "faithful", 2, 2.0, 512);
  r.dataset = "synthetic";
  r.config = {{"strategy", "ddp"},          {"batch-size", 32}, {"nproc", 2},  {"dataset", "synthetic"},
              {"synthetic-train-images", 4096}, {"max-steps", 16}, {"epochs", 1}, {"max-eval-batches", 2}};
  r.steps_per_epoch = 64;
  r.steps = 16;
  r.global_batch = 64;
  r.images_trained = 1024;
  r.eval_images = 64;
  r.eval_cut = true;
  testing::record_steps(r);
  return r;
}

TEST(ResultProof, AnEpochIsTheDataOverTheGlobalBatchNeverTheRowsOwnSteps) {
  RunResult honest = issue_ddp2_row();
  ASSERT_EQ(proven(swept({honest}, 1)).document().runs[0].status, RunStatus::ok)
      << proven(swept({honest}, 1)).document().runs[0].reason;
  RunResult halved = honest;
  halved.steps_per_epoch = 8;
  halved.steps = 8;
  halved.images_trained = 512;
  halved.train_time_s /= 2;
  halved.images_per_s *= 2;
  halved.steady_images_per_s *= 2;
  const ProvenResults p = proven(swept({halved}, 1));
  EXPECT_EQ(p.document().runs[0].status, RunStatus::failed);
  EXPECT_EQ(
      p.document().runs[0].reason,
      "did less work than configured: its file says an epoch has 8 steps where 4096 synthetic images over 2 ranks "
      "in batches of 32 make 64");
  // In the stored gate it is the candidate's failure, never "improved".
  const Comparison c = compare_results(swept({honest}, 1), swept({halved}, 1), {});
  EXPECT_TRUE(c.regression());
  EXPECT_TRUE(c.metrics.empty());
  // The loader's own count of the synthetic set is held to the configuration too.
  RunResult fewer = honest;
  fewer.train_images = 2048;
  EXPECT_NE(proven(swept({fewer}, 1)).document().runs[0].reason.find(
                "did other work than configured: its loader found 2048 training images where its configuration asks "
                "for a synthetic set of 4096"),
            std::string::npos);
  // Nor may the row's own record of its dataset stand in for the configuration's: relabelled
  // "cifar10", its 2048 images were the loader's count of a CIFAR-10 set and the row passed.
  RunResult relabelled = fewer;
  relabelled.dataset = "cifar10";
  EXPECT_EQ(proven(swept({relabelled}, 1)).document().runs[0].reason,
            "did other work than configured: it trained on cifar10 where its configuration asks synthetic");
  // Under "auto" the data found decides which set, but never its size: CIFAR-10 has 50,000
  // training images, so a CIFAR-10 row whose file says 25,000 (and half the steps, consistently)
  // read as a 2x speed-up in the stored mode.
  RunResult found = honest;
  found.config["dataset"] = "auto";
  found.dataset = "cifar10";
  found.train_images = 4096;
  EXPECT_EQ(configured_work(found).dataset, "cifar10");
  EXPECT_EQ(configured_work(found).train_images, 50000);
  RunResult half_cifar = honest;
  half_cifar.config["dataset"] = "cifar10";
  half_cifar.dataset = "cifar10";
  half_cifar.train_images = 25000;
  EXPECT_EQ(proven(swept({half_cifar}, 1)).document().runs[0].reason,
            "did other work than configured: its loader found 25000 training images where CIFAR-10's training set "
            "has 50000");
}

// configured_work's arithmetic: DistributedSampler's padded shard, whole batches but the last,
// max-steps per epoch, CIFAR-10's 50,000 whatever the row says.
TEST(ResultProof, ConfiguredWorkIsTheSamplersShardInBatchesCutByMaxSteps) {
  RunResult r;
  r.world_size = 3;
  r.dataset = "synthetic";
  r.config = {{"batch-size", 2}, {"synthetic-train-images", 10}, {"epochs", 2}, {"max-steps", nullptr}};
  ConfiguredWork w = configured_work(r);
  EXPECT_TRUE(w.unknown.empty()) << w.unknown;
  EXPECT_EQ(w.train_images, 10);
  EXPECT_EQ(w.steps_per_epoch, 2);  // 4 a rank (10 padded to 12), in batches of 2
  EXPECT_EQ(w.steps, 4);
  EXPECT_EQ(w.images, 24);  // every rank's padded shard, twice
  r.config["max-steps"] = 1;
  w = configured_work(r);
  EXPECT_EQ(w.steps, 2);
  EXPECT_EQ(w.images, 12);  // a cut epoch's batches are whole: 1 x 2 x 3 ranks, twice
  r.dataset = "cifar10";
  r.train_images = 300;
  EXPECT_EQ(configured_work(r).train_images, 50000) << "CIFAR-10's size is the loader's, never the row's own";
  r.train_images = 0;
  EXPECT_EQ(configured_work(r).train_images, 50000);
  r.dataset.clear();
  r.config.erase("dataset");
  EXPECT_NE(configured_work(r).unknown, "");
  r.dataset = "synthetic";
  r.config.erase("batch-size");
  EXPECT_NE(configured_work(r).unknown.find("batch-size 0"), std::string::npos) << configured_work(r).unknown;
}

// An edited file's numbers may be anything: the arithmetic that proves the work must neither
// overflow (the sanitized build and its fuzzer would say so) nor let the row through.
TEST(ResultProof, HugeNumbersInAnEditedFileFailTheRowWithoutOverflow) {
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  const auto status_after = [](const std::function<void(RunResult&)>& edit) {
    RunResult r = sample_run("ddp-2", "faithful", 2, 10, 5000);
    edit(r);
    return proven(swept({r}, 1)).document().runs[0].status;
  };
  EXPECT_EQ(status_after([&](RunResult& r) { r.config["epochs"] = huge; }), RunStatus::failed);
  EXPECT_EQ(status_after([&](RunResult& r) { r.config["batch-size"] = huge; }), RunStatus::failed);
  EXPECT_EQ(status_after([&](RunResult& r) { r.global_batch = huge; }), RunStatus::failed);
  EXPECT_EQ(status_after([&](RunResult& r) {
              r.steps_per_epoch = huge;
              r.steps = huge;
            }),
            RunStatus::failed);
  EXPECT_EQ(status_after([&](RunResult& r) {
              r.config["epochs"] = 1;  // the configuration rules
              r.epochs = -3;
            }),
            RunStatus::ok);
  EXPECT_EQ(status_after([&](RunResult& r) {
              r.config.erase("epochs");
              r.epochs = -3;
            }),
            RunStatus::failed);
}

// Merged files' extra repetitions would outvote the ones that ran.
TEST(ResultProof, RepetitionsAreUniqueAndWithinTheSweepsRepeat) {
  const auto two = std::vector<RunResult>{sample_run("single", "faithful", 1, 10, 5000, 0),
                                          sample_run("single", "faithful", 1, 10, 5000, 1)};
  EXPECT_NO_THROW(prove_results(swept(two, 2), "f"));
  EXPECT_NE(message_of([&] { prove_results(swept(two, 1), "f"); }).find("not one of the 1 repetition(s)"),
            std::string::npos);
  ResultDocument lone = swept(two, 2);
  lone.sweep.reset();
  EXPECT_NE(message_of([&] { prove_results(lone, "f"); }).find("a file without a sweep section"), std::string::npos);
  auto twice = two;
  twice[1].repetition = 0;
  EXPECT_NE(message_of([&] { prove_results(swept(twice, 2), "f"); }).find("more than once"), std::string::npos);
  auto negative = two;
  negative[0].repetition = -1;
  EXPECT_NE(message_of([&] { prove_results(swept(negative, 2), "f"); }).find("not one of"), std::string::npos);
}

// An option its file names nowhere (its configuration and its table of defaults both edited) is
// proven at the reader's default, as the comparison reads it (the ninth attack on the outputs:
// warm-up 8 and twice the epochs, edited out of both, were asked nothing of, and compared "the
// same", 2x faster), the whole table deleted too.
TEST(ResultProof, AnOptionTheFileNamesNowhereIsProvenAtTheReadersDefault) {
  RunResult r = sample_run("single", "faithful", 1, 10, 5000);
  r.config.erase("warmup-steps");
  r.warmup_steps = 8;
  testing::record_steps(r);
  ResultDocument doc = swept({r}, 1);
  doc.option_defaults = {{"epochs", 1}};  // a table, without warmup-steps
  const ProvenResults p = prove_results(doc, "f", {{"warmup-steps", 5}});
  EXPECT_EQ(p.document().runs[0].reason,
            "did other work than configured: its file says 8 warm-up steps where its configuration asks 5");
  // With the whole table deleted too (the tenth attack: 2 epochs compared "the same" as 1).
  doc.option_defaults = nlohmann::json::object();
  EXPECT_EQ(prove_results(doc, "f", {{"warmup-steps", 5}}).document().runs[0].reason,
            "did other work than configured: its file says 8 warm-up steps where its configuration asks 5");
}

// A value that is not a number is never a pass: a row that says ok measured every figure a
// verdict reads, or it is failed; a figure no run measures is a damaged file.
TEST(ResultProof, AnOkRowWithoutAFigureIsFailedUnlessNoStepRanPastWarmup) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto reason_for = [](const RunResult& r) {
    const ProvenResults p = proven(swept({r}, 1));
    return p.document().runs[0].status == RunStatus::ok ? std::string("ok") : p.document().runs[0].reason;
  };
  RunResult r = sample_run("single", "faithful", 1, 10, 5000);
  r.train_time_s = nan;
  EXPECT_EQ(reason_for(r), "says ok, but it measured no train_time_s (null, NaN or infinite)");
  r = sample_run("single", "faithful", 1, 10, 5000);
  r.images_per_s = std::numeric_limits<double>::infinity();
  EXPECT_EQ(reason_for(r), "says ok, but it measured no images_per_s (null, NaN or infinite)");
  r = sample_run("single", "faithful", 1, 10, 5000);
  r.steady_images_per_s = nan;
  EXPECT_EQ(reason_for(r), "says ok, but it measured no steady_images_per_s (null, NaN or infinite)");
  r.warmup_steps = r.steps;  // nothing ran past warm-up: unmeasured, and said so by the steps
  r.config["warmup-steps"] = r.steps;
  r.step_time_s = {nan, nan, nan};
  EXPECT_EQ(reason_for(r), "ok");
  r = sample_run("single", "faithful", 1, 10, 5000);
  r.test_accuracy = 1.5;
  EXPECT_NE(message_of([&] { prove_results(swept({r}, 1), "f"); }).find("test_accuracy 1.5000"), std::string::npos);
  r = sample_run("single", "faithful", 1, 10, 5000);
  r.train_time_s = -1;
  EXPECT_NE(message_of([&] { prove_results(swept({r}, 1), "f"); }).find("not a time or a rate"), std::string::npos);
}

// A result file's "null" is "not measured" wherever a figure may be absent: a step_time_s that
// is null, absent or missing a quantile fails a row that says ok (exit 1 on the candidate's
// side), never a reader's error that reads as bad input (exit 2, 125 under git bisect).
TEST(ResultProof, AStepTimeThatIsNullOrPartialIsUnmeasuredNotUnreadable) {
  ResultDocument doc = swept({sample_run("single", "faithful", 1, 10, 5000)}, 1);
  for (const nlohmann::json& edited : {nlohmann::json(nullptr), nlohmann::json{{"p50", nullptr}},
                                       nlohmann::json{{"p90", 0.2}}}) {
    nlohmann::json j = doc;
    j["runs"][0]["step_time_s"] = edited;
    const ProvenResults p = prove_results(parse_result_document(j.dump(), "f.json"), "f");
    EXPECT_EQ(p.document().runs[0].reason, "says ok, but it measured no step_time_s (null, NaN or infinite)")
        << edited.dump();
  }
  nlohmann::json absent = doc;
  absent["runs"][0].erase("step_time_s");
  EXPECT_EQ(prove_results(parse_result_document(absent.dump(), "f.json"), "f").document().runs[0].status,
            RunStatus::failed);
  nlohmann::json huge_repeat = doc;
  huge_repeat["sweep"]["repeat"] = 1e30;
  EXPECT_NE(message_of([&] { parse_result_document(huge_repeat.dump(), "f.json"); }).find("is not a whole number"),
            std::string::npos);
}

// A commit that adds a run option wrote it at its default on one side only; every later
// commit was "other settings" (exit 2, 125 under git bisect run).
TEST(ResultProof, AnOptionAbsentOnOneSideAtItsDefaultIsTheSameSetting) {
  ResultDocument before = swept({sample_run("single", "faithful", 1, 10, 5000)}, 1);
  ResultDocument after = before;
  after.option_defaults = {{"new-option", "off"}};
  after.runs[0].config["new-option"] = "off";
  EXPECT_EQ(settings_difference(before.runs[0], proven(before), after.runs[0], proven(after)), "");
  EXPECT_NO_THROW(compare_results(before, after, {}));
  after.runs[0].config["new-option"] = "on";
  EXPECT_EQ(settings_difference(before.runs[0], proven(before), after.runs[0], proven(after)),
            "new-option \"off\" vs \"on\"");
  // Neither file says its defaults: the reader's table completes both.
  ResultDocument older = before;
  older.runs[0].config.erase("tf32");
  const ProvenResults completed = prove_results(older, "f", nlohmann::json{{"tf32", false}});
  EXPECT_EQ(completed.document().runs[0].config.at("tf32"), false);
  EXPECT_EQ(settings_difference(completed.document().runs[0], completed, before.runs[0], proven(before)), "");
  // An option nobody's table knows, present on one side only, is a real difference.
  ResultDocument stranger = before;
  stranger.runs[0].config["unknown-option"] = 3;
  EXPECT_EQ(settings_difference(before.runs[0], proven(before), stranger.runs[0], proven(stranger)),
            "unknown-option unset vs 3");
}

// "Not judged" passed: a row the baseline build failed in 9 of 12 rounds, 3x slower on the
// candidate, read "within noise ... not judged" and the gate said "No regression.".
TEST(ResultProof, TooFewPairsAtTheCapCannotBeJudgedNeverAPass) {
  std::vector<RunResult> base, cand;
  for (int64_t round = 0; round < 12; ++round) {
    base.push_back(sample_run("ddp-2", "faithful", 2, 10, 5000, round));
    cand.push_back(sample_run("ddp-2", "faithful", 2, 30, 5000.0 / 3, round));
    if (round >= 3) {
      base.back().status = RunStatus::failed;
      base.back().reason = "a crash";
    }
  }
  const PairedResult r = compare_paired(swept(base, 12), swept(cand, 12), {});
  EXPECT_FALSE(r.regression());
  EXPECT_TRUE(r.cannot_judge_any());
  EXPECT_EQ(r.exit_code(), 2);
  ASSERT_EQ(r.comparisons.size(), 1u);
  EXPECT_EQ(r.comparisons[0].verdict, Verdict::cannot_judge);
  const std::string md = markdown_paired(r, {});
  EXPECT_NE(md.find("Cannot judge"), std::string::npos) << md;
  EXPECT_EQ(md.find("No regression"), std::string::npos) << md;
}

TEST(ResultProof, ARowTheBaselineBuildFailedInEveryRoundCannotBeJudged) {
  std::vector<RunResult> base, cand;
  for (int64_t round = 0; round < 4; ++round) {
    base.push_back(sample_run("single", "faithful", 1, 10, 5000, round));
    base.back().status = RunStatus::failed;
    base.back().reason = "a crash";
    base.push_back(sample_run("ddp-2", "faithful", 2, 10, 5000, round));
    cand.push_back(sample_run("single", "faithful", 1, 30, 5000.0 / 3, round));
    cand.push_back(sample_run("ddp-2", "faithful", 2, 10, 5000, round));
  }
  PairedOptions o;
  o.max_rounds = 4;
  const PairedResult r = compare_paired(swept(base, 4), swept(cand, 4), o);
  EXPECT_TRUE(r.cannot_judge_any());
  EXPECT_TRUE(mentions(r.cannot_judge, "single (faithful): failed on the baseline build in every round"));
  o.allow_missing = {"single"};
  EXPECT_FALSE(compare_paired(swept(base, 4), swept(cand, 4), o).cannot_judge_any());
}

// The named normaliser divided by itself reads 1 whatever it did: it was called "ok" twice as
// slow. It cannot be judged so (never a pass) unless the user says it may go unjudged.
TEST(ResultProof, TheNormalisingRowCannotBeJudgedAgainstItself) {
  const auto doc = [](double single_s) {
    return swept({sample_run("single", "faithful", 1, single_s, 50000 / single_s),
                  sample_run("ddp-2", "faithful", 2, 10, 5000)},
                 1);
  };
  CompareOptions o;
  o.normalize_by = "single";
  const Comparison c = compare_results(doc(10), doc(20), o);
  EXPECT_TRUE(c.cannot_judge_any());
  EXPECT_TRUE(mentions(c.cannot_judge, "single (faithful): the row every other is divided by"));
  o.allow_missing = {"single"};
  EXPECT_FALSE(compare_results(doc(10), doc(20), o).cannot_judge_any());
}

// Found by the second attack: an excused twin left its row "measured in the baseline, not now"
// (a regression with a false reason); the row measured its time, only its divisor is missing.
TEST(ResultProof, ARowWhoseTwinDidNotRunNowCannotBeJudgedByItsTwin) {
  const ResultDocument baseline = twin_document({100, 100}, {100, 100});
  ResultDocument current = baseline;
  for (auto& r : current.runs) {
    if (r.name == "ddp.torch") {
      r.status = RunStatus::skipped;
      r.reason = "torch not installed";
    }
  }
  CompareOptions o;
  o.normalize_by = "twin";
  o.metrics = {"train_time_s"};
  o.allow_missing = {"ddp.torch"};
  const Comparison c = compare_results(baseline, current, o);
  EXPECT_TRUE(c.cannot_judge_any());
  EXPECT_TRUE(mentions(c.cannot_judge, "ddp (faithful): train_time_s: the PyTorch twin ddp.torch ran no repetition now"));
  EXPECT_FALSE(mentions(c.missing_rows, "measured in the baseline, not now"));
}

// The second attack: a file's own defaults, a whole number written 16.0, and an evaluation
// that saw nothing are read as the configuration the row ran.
TEST(ResultProof, TheWorkIsReadFromTheRowsOwnFileDefaultsAndWholeFloats) {
  RunResult r = sample_run("ddp-2", "faithful", 2, 10, 5000);
  r.steps = 16;
  r.images_trained = 16 * 512;
  testing::record_steps(r);
  ResultDocument doc = swept({r}, 1);
  doc.option_defaults = {{"max-steps", 16}};
  EXPECT_EQ(proven(doc).document().runs[0].status, RunStatus::ok) << proven(doc).document().runs[0].reason;
  doc.option_defaults = nlohmann::json::object();
  doc.runs[0].config["max-steps"] = 16.0;
  EXPECT_EQ(proven(doc).document().runs[0].status, RunStatus::ok) << proven(doc).document().runs[0].reason;
  doc.runs[0].config["max-eval-batches"] = 2;
  doc.runs[0].eval_images = 0;
  EXPECT_NE(proven(doc).document().runs[0].reason.find("evaluated 0 test images where its configuration asks for 2 batches a rank: 1024"),
            std::string::npos)
      << proven(doc).document().runs[0].reason;
  // One image evaluated of the whole test set, its accuracy 100 %, was "improved": the count is
  // the configuration's (CIFAR-10's 10,000 over the ranks, or 2 batches of 256 on each of 2 ranks).
  doc.runs[0].config.erase("max-eval-batches");
  doc.runs[0].eval_images = 1;
  doc.runs[0].test_accuracy = 1.0;
  EXPECT_EQ(proven(doc).document().runs[0].reason,
            "did less work than configured: it evaluated 1 test images where its configuration asks for the whole "
            "test set: 10000");
  doc.runs[0].eval_images = 10000;
  EXPECT_EQ(proven(doc).document().runs[0].status, RunStatus::ok) << proven(doc).document().runs[0].reason;
  doc.runs[0].config["max-eval-batches"] = 2;
  doc.runs[0].eval_cut = true;
  doc.runs[0].eval_images = 2 * 256 * 2;
  EXPECT_EQ(proven(doc).document().runs[0].status, RunStatus::ok) << proven(doc).document().runs[0].reason;
}

// A row whose file says it reduced with NCCL on the CPU, or ran another strategy than its
// configuration's, passed (exit 0): no run does either.
TEST(ResultProof, AStrategyOrBackendNoRunOfItsConfigurationHasIsOtherWork) {
  RunResult r = sample_run("ddp-2", "faithful", 2, 10, 5000);
  r.device = "cpu";
  r.strategy_details["backend"] = "nccl";
  EXPECT_EQ(proven(swept({r}, 1)).document().runs[0].reason,
            "did other work than configured: it says it reduced with NCCL on cpu");
  r.strategy_details["backend"] = "gloo";
  EXPECT_EQ(proven(swept({r}, 1)).document().runs[0].status, RunStatus::ok);
  r.config["warmup-steps"] = 2;
  r.warmup_steps = 0;
  EXPECT_EQ(proven(swept({r}, 1)).document().runs[0].reason,
            "did other work than configured: its file says 0 warm-up steps where its configuration asks 2");
  r.warmup_steps = 2;
  r.threads_per_rank = 2;
  r.config["threads"] = 1;
  EXPECT_EQ(proven(swept({r}, 1)).document().runs[0].reason,
            "did other work than configured: it computed with 2 threads a rank where its configuration asks 1");
  r.config["threads"] = 0;  // LibTorch's choice: whatever it recorded
  EXPECT_EQ(proven(swept({r}, 1)).document().runs[0].status, RunStatus::ok);
  r.strategy = "single";
  EXPECT_EQ(proven(swept({r}, 1)).document().runs[0].reason,
            "did other work than configured: it ran strategy single where its configuration asks ddp");
}

// A row that says it trained on a GPU in a file whose environment found none (an edited
// device, or a file put together from two machines) was judged as the GPU run it claims.
TEST(ResultProof, AGpuRowOnAMachineWithoutGpusIsOtherWork) {
  RunResult r = sample_run("single", "faithful", 1, 10, 5000);
  r.device = "cuda:0";
  ResultDocument doc = swept({r}, 1);
  doc.environment.gpus.clear();
  EXPECT_EQ(proven(doc).document().runs[0].reason,
            "did other work than configured: it says it ran on cuda:0, but its file's environment found no GPU");
  doc.environment.gpus.push_back(GpuInfo{});
  EXPECT_EQ(proven(doc).document().runs[0].status, RunStatus::ok) << proven(doc).document().runs[0].reason;
  doc.runs[0].device = "cpu";
  doc.environment.gpus.clear();
  EXPECT_EQ(proven(doc).document().runs[0].status, RunStatus::ok) << proven(doc).document().runs[0].reason;
}

// The fifth attack on the outputs: a row that says it ran on another device or backend than its
// configuration asks, DataParallel over fewer devices than it lists, fewer ranks' records than
// ranks, or half its step records (or steps of half the images) passed, "improved", exit 0: the
// paired statistic reads the records one by one.
TEST(ResultProof, WhereAndHowARowRanIsItsConfigurationsAndItsRecordsAreItsSteps) {
  const auto reason_for = [](const std::function<void(RunResult&)>& edit) {
    RunResult r = sample_run("ddp-2", "faithful", 2, 10, 5000);
    edit(r);
    const ProvenResults p = proven(swept({r}, 1));
    return p.document().runs[0].status == RunStatus::ok ? std::string("ok") : p.document().runs[0].reason;
  };
  EXPECT_EQ(reason_for([](RunResult& r) { r.config["device"] = "cuda"; }), "ok");
  EXPECT_EQ(reason_for([](RunResult& r) { r.config["device"] = "auto"; }), "ok");
  EXPECT_EQ(reason_for([](RunResult& r) { r.config["device"] = "cpu"; }),
            "did other work than configured: it says it ran on cuda:0 where its configuration asks cpu");
  EXPECT_EQ(reason_for([](RunResult& r) { r.device = "cpu"; r.config["device"] = "cuda:1"; }),
            "did other work than configured: it says it ran on cpu where its configuration asks cuda");
  EXPECT_EQ(reason_for([](RunResult& r) { r.strategy_details["backend"] = "nccl"; r.config["backend"] = "auto"; }), "ok");
  EXPECT_EQ(reason_for([](RunResult& r) { r.strategy_details["backend"] = "nccl"; r.config["backend"] = "gloo"; }),
            "did other work than configured: it says it reduced with nccl where its configuration asks gloo");
  EXPECT_EQ(reason_for([](RunResult& r) { r.strategy_details["backend"] = "gloo"; r.config["backend"] = "auto"; }),
            "did other work than configured: it says it reduced with gloo where its configuration asks nccl");
  EXPECT_EQ(reason_for([](RunResult& r) { r.ranks.resize(2); }), "ok");
  EXPECT_EQ(reason_for([](RunResult& r) { r.ranks.resize(1); }),
            "did other work than configured: it records 1 ranks' timings where it ran 2 ranks");
  EXPECT_EQ(reason_for([](RunResult& r) { r.step_records.resize(r.step_records.size() / 2); }),
            "did other work than configured: it holds 49 step records where it trained 98 steps");
  EXPECT_EQ(reason_for([](RunResult& r) {
              for (auto& step : r.step_records) step.images /= 2;
            }),
            "did other work than configured: its step records hold 12500 images a rank where it trained 50000 over 2 "
            "ranks");
  RunResult dp = sample_run("dp-2", "faithful", 1, 10, 5000);
  dp.strategy = "dp";
  dp.config["strategy"] = "dp";
  dp.config["devices"] = "cpu,cpu";
  dp.device = "cpu";
  dp.strategy_details["devices"] = {"cpu", "cpu"};
  EXPECT_EQ(proven(swept({dp}, 1)).document().runs[0].status, RunStatus::ok) << proven(swept({dp}, 1)).document().runs[0].reason;
  dp.strategy_details["devices"] = {"cpu"};
  EXPECT_EQ(proven(swept({dp}, 1)).document().runs[0].reason,
            "did other work than configured: it scattered over 1 devices where its configuration lists 2 (cpu,cpu)");
  // `--devices all` (the default) is every GPU the environment found, never one (the sixth attack:
  // a right 2-GPU row failed, one on 1 of 2 GPUs passed).
  ResultDocument gpus = swept({dp}, 1);
  gpus.environment.gpus.resize(2);
  RunResult& all = gpus.runs[0];
  all.device = "cuda:0";
  all.config["devices"] = "all";
  all.strategy_details["devices"] = {"cuda:0", "cuda:1"};
  EXPECT_EQ(proven(gpus).document().runs[0].status, RunStatus::ok) << proven(gpus).document().runs[0].reason;
  all.strategy_details["devices"] = {"cuda:0"};
  EXPECT_EQ(proven(gpus).document().runs[0].reason,
            "did other work than configured: it scattered over 1 devices where its configuration asks every GPU its "
            "environment found: 2");
}

TEST(ResultProof, AFailedTwinLeavesTheFloorUnjudged) {
  const ResultDocument baseline = twin_document({100, 100}, {100, 100});
  ResultDocument current = baseline;
  for (auto& r : current.runs) {
    if (r.name == "ddp.torch") {
      r.status = RunStatus::failed;
      r.reason = "python died";
    }
  }
  CompareOptions o;
  o.min_vs_pytorch = 0.9;
  const Comparison c = compare_results(baseline, current, o);
  EXPECT_TRUE(mentions(c.cannot_judge, "its PyTorch twin ddp.torch is failed"));
  for (auto& r : current.runs) {
    if (r.name == "ddp.torch") {
      r.status = RunStatus::skipped;
      r.reason = "needs CUDA";
    }
  }
  const Comparison skipped = compare_results(baseline, current, o);
  EXPECT_TRUE(mentions(skipped.without_twin, "needs CUDA"));
}

}  // namespace
}  // namespace ddpbench
