// `ddpbench project` through the binary: its table, its files and its exit codes.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "harness/control/project_command.hpp"
#include "reports/result_file.hpp"
#include "support/process.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

testing::ProcessResult project(std::vector<std::string> args) {
  args.insert(args.begin(), {testing::ddpbench_binary(), "project"});
  return testing::run_process(args);
}

// A DDP row at 2 ranks with the timeline a projection reads (two buckets), its steady step
// `measured_step_s`: the model at its own point says 0.065 s (0.004 data + 0.018 forward + the
// second bucket done at 0.041 s + 0.002 optimizer).
ResultDocument ddp_document(double measured_step_s = 0.065) {
  ResultDocument doc = testing::sample_sweep_document();
  for (auto& r : doc.runs) {
    if (r.strategy != "ddp") continue;
    r.config["comm-hook"] = "allreduce";
    r.steady_images_per_s = static_cast<double>(r.global_batch) / measured_step_s;
    r.strategy_details = {
        {"backward_compute_s", 0.030},
        {"bucket_timeline", nlohmann::json::array({{{"bucket", 0}, {"bytes", 20e6}, {"ready_s", 0.010}, {"allreduce_s", 0.004}},
                                                   {{"bucket", 1}, {"bytes", 80e6}, {"ready_s", 0.025}, {"allreduce_s", 0.016}}})}};
  }
  return doc;
}

TEST(ProjectCommand, PrintsTheProjectionAndWritesItsFiles) {
  TempDir dir;
  write_result_file(dir / "r.json", ddp_document());
  const auto r = project({(dir / "r.json").string(), "--ranks", "2,64", "--fabric", "ethernet-100g", "--out-dir",
                          (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("### ddp-2gpu (faithful) on ethernet-100g"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 64 | "), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(testing::read_text(dir / "out" / "projection.json"));
  EXPECT_EQ(j["options"]["fabric"], "ethernet-100g");
  ASSERT_FALSE(j["projections"].empty());
  EXPECT_EQ(j["projections"][0]["points"].size(), 2u);
  // 80 MB across 8 nodes at 100 Gbit/s outlasts the 5 ms of backward left after the bucket is ready.
  EXPECT_GT(j["projections"][0]["points"][1]["step_s"].get<double>(), j["projections"][0]["points"][0]["step_s"].get<double>());
  EXPECT_EQ(testing::read_text(dir / "out" / "projection.md"), std::string(kProjectionFiles.marker) + r.out);
}

// A model that misses the step its own row measured projects nothing worth acting on: said at
// the top, and exit 1 unless --force.
TEST(ProjectCommand, AModelThatMissesItsOwnStepExitsOneUnlessForced) {
  TempDir dir;
  write_result_file(dir / "r.json", ddp_document(0.090));
  const auto r = project({(dir / "r.json").string(), "--ranks", "2,64", "--fabric", "ndr-ib"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out.find("**Not to be trusted: ddp-2gpu (faithful)'s model"), r.out.find("\n**") + 1) << r.out;
  EXPECT_NE(r.out.find("is -27.8 % off the step it measured"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("--force exits 0 anyway"), std::string::npos) << r.err;
  const auto forced = project({(dir / "r.json").string(), "--ranks", "2,64", "--fabric", "ndr-ib", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("Not to be trusted"), std::string::npos);
  write_result_file(dir / "close.json", ddp_document(0.070));  // the model 7 % off: trusted
  EXPECT_EQ(project({(dir / "close.json").string(), "--ranks", "2"}).exit_code, 0);
}

// The output rule: a result file named projection.json in --out-dir is the input, never replaced
// (it was, exit 0); a file there that project did not write is refused; its own it replaces.
TEST(ProjectCommand, ItsFilesNeverReplaceItsInputOrAFileItDidNotWrite) {
  TempDir dir;
  std::filesystem::create_directories(dir / "d");
  write_result_file(dir / "d" / "projection.json", ddp_document());
  const std::string before = testing::read_text(dir / "d" / "projection.json");
  const auto over_input = project({(dir / "d" / "projection.json").string(), "--ranks", "2", "--out-dir",
                                   (dir / "d").string()});
  EXPECT_EQ(over_input.exit_code, 2) << over_input.out;
  EXPECT_NE(over_input.err.find("--out-dir's projection.json '" + (dir / "d" / "projection.json").string() +
                                "' is the file RESULTS"),
            std::string::npos)
      << over_input.err;
  EXPECT_EQ(testing::read_text(dir / "d" / "projection.json"), before);
  EXPECT_FALSE(std::filesystem::exists(dir / "d" / "projection.md"));
  write_result_file(dir / "r.json", ddp_document());
  std::filesystem::create_directories(dir / "e");
  testing::write_text(dir / "e" / "projection.md", "a user's notes");
  const auto over_notes = project({(dir / "r.json").string(), "--ranks", "2", "--out-dir", (dir / "e").string()});
  EXPECT_EQ(over_notes.exit_code, 2) << over_notes.out;
  EXPECT_NE(over_notes.err.find("exists and is not the projection Markdown it wrote"), std::string::npos)
      << over_notes.err;
  EXPECT_EQ(testing::read_text(dir / "e" / "projection.md"), "a user's notes");
  EXPECT_FALSE(std::filesystem::exists(dir / "e" / "projection.json"));
  // Nor one that opens with the heading a person may write too (it was replaced, exit 0).
  testing::write_text(dir / "e" / "projection.md", "# ddpbench projection of our 512-GPU purchase\n");
  EXPECT_EQ(project({(dir / "r.json").string(), "--ranks", "2", "--out-dir", (dir / "e").string()}).exit_code, 2);
  EXPECT_EQ(testing::read_text(dir / "e" / "projection.md"), "# ddpbench projection of our 512-GPU purchase\n");
  for (int twice = 0; twice < 2; ++twice) {
    EXPECT_EQ(project({(dir / "r.json").string(), "--ranks", "2", "--out-dir", (dir / "f").string()}).exit_code, 0);
  }
}

// A DDP row whose file says half the steps an epoch has (a sampler that halves the epoch reads
// as twice the speed) did not do its configured work: it is not projected from.
TEST(ProjectCommand, ARowThatDidLessWorkThanItsDataAndConfigurationAskIsNotProjected) {
  TempDir dir;
  ResultDocument doc = ddp_document();
  for (auto& r : doc.runs) {
    if (r.strategy != "ddp") continue;
    r.steps_per_epoch /= 2;
    r.steps /= 2;
    r.images_trained /= 2;
  }
  write_result_file(dir / "r.json", doc);
  const auto r = project({(dir / "r.json").string(), "--ranks", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("did less work than configured: its file says an epoch has 49 steps where 50000 cifar10 "
                       "images over 2 ranks in batches of 256 make 98"),
            std::string::npos)
      << r.err;
}

TEST(ProjectCommand, BadInputExitsTwoNamingIt) {
  TempDir dir;
  write_result_file(dir / "r.json", ddp_document());
  auto single_only = testing::sample_sweep_document();
  std::erase_if(single_only.runs, [](const RunResult& r) { return r.strategy == "ddp"; });
  write_result_file(dir / "single.json", single_only);
  testing::write_text(dir / "mb.json", "{\"benchmarks\": []}");
  const std::string file = (dir / "r.json").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{(dir / "none.json").string()}, "none.json"},
      {{(dir / "single.json").string()}, "has no DDP row to project"},
      {{file, "--fabric", "carrier-pigeon"}, "--fabric carrier-pigeon: expected measured|hdr-ib|ndr-ib|ethernet-100g"},
      {{file, "--ranks", "0"}, "--ranks: 0 is not a rank count"},
      {{file, "--ranks-per-node", "0"}, "--ranks-per-node must be positive"},
      {{file, "--calibrate", (dir / "mb.json").string()}, "no BM_RankAllreduce entry with `bytes` and `ranks`"},
      {{file, "--nics-per-node", "0"}, "--nics-per-node must be positive"},
      {{file, "--calibrate", (dir / "absent.json").string()}, "--calibrate: cannot read"},
  };
  for (const auto& [args, says] : cases) {
    auto with_out_dir = args;
    with_out_dir.insert(with_out_dir.end(), {"--out-dir", (dir / "p/a/b").string()});
    const auto r = project(with_out_dir);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err << r.out;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    // Nothing made for the outputs of a command refused for its input (p/a/b was left behind).
    EXPECT_FALSE(std::filesystem::exists(dir / "p")) << args.back();
  }
}

}  // namespace
}  // namespace ddpbench
