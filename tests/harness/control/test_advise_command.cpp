// `ddpbench advise` through the binary: its table, its files, its grid and its exit codes.
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

testing::ProcessResult advise(std::vector<std::string> args) {
  args.insert(args.begin(), {testing::ddpbench_binary(), "advise"});
  return testing::run_process(args);
}

// DDP rows at 2 ranks: twenty 4 MB gradients made ready one after another over backward's
// 30 ms, in the default layout's buckets (1 + 7 + 7 + 5 gradients) on a 1 GB/s link; the model
// at its own point says 0.112 s (0.004 data + 0.018 forward + the last bucket done at 0.088 s +
// 0.002 optimizer), and the row measured `measured_step_s`.
ResultDocument ddp_document(double measured_step_s = 0.112) {
  ResultDocument doc = testing::sample_sweep_document();
  for (auto& r : doc.runs) {
    if (r.strategy != "ddp") continue;
    r.config["comm-hook"] = "allreduce";
    r.steady_images_per_s = static_cast<double>(r.global_batch) / measured_step_s;
    r.mean_phase_s = PhaseSeconds{0.004, 0.018, 0.030, 0, 0.002, 0, 0, 0};
    nlohmann::json gradients = nlohmann::json::array();
    for (int i = 0; i < 20; ++i) {
      gradients.push_back({{"parameter", 19 - i}, {"name", "layer" + std::to_string(19 - i)}, {"bytes", 4'000'000},
                           {"dtype", "Float"}, {"ready_s", 0.0015 * (i + 1)}});
    }
    nlohmann::json buckets = nlohmann::json::array();
    const std::vector<std::pair<int, int>> layout = {{0, 1}, {1, 8}, {8, 15}, {15, 20}};
    for (const auto& [first, end] : layout) {
      const double bytes = 4e6 * (end - first);
      buckets.push_back({{"bucket", buckets.size()}, {"bytes", bytes}, {"ready_s", 0.0015 * end},
                         {"allreduce_s", bytes / 1e9}, {"wire_s", bytes / 1e9}});
    }
    r.strategy_details = {{"backward_compute_s", 0.030}, {"bucket_timeline", buckets}, {"gradient_timeline", gradients},
                          {"compression_s_per_byte", {{"fp16", 1e-10}, {"bf16", 1e-10}}}};
  }
  return doc;
}

TEST(AdviseCommand, PrintsTheAdviceAndEverySettingAndWritesItsFiles) {
  TempDir dir;
  write_result_file(dir / "r.json", ddp_document());
  const auto r = advise({(dir / "r.json").string(), "--ranks", "8,64", "--fabric", "ethernet-100g", "--out-dir",
                         (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("### ddp-2gpu (faithful) on ethernet-100g"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Measured at 2 ranks with 25 MB, no hook, overlap"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 64 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 100 MB, bf16, no overlap |"), std::string::npos) << "every setting listed: " << r.out;
  EXPECT_NE(r.out.find("Not modelled: compression's effect on accuracy"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(testing::read_text(dir / "out" / "advice.json"));
  EXPECT_EQ(j["options"]["fabric"], "ethernet-100g");
  ASSERT_FALSE(j["advice"].empty());
  EXPECT_EQ(j["advice"][0]["ranks"].size(), 2u);
  EXPECT_EQ(j["advice"][0]["ranks"][0]["settings"].size(), 36u);
  EXPECT_EQ(testing::read_text(dir / "out" / "advice.md"), std::string(kAdviceFiles.marker) + r.out);
}

// --bucket-mb, --comm-hook and --overlap narrow the grid; PyTorch's defaults stay in it, the
// advice weighed against them.
TEST(AdviseCommand, TheGridCanBeNarrowedAndKeepsTheDefaults) {
  TempDir dir;
  write_result_file(dir / "r.json", ddp_document());
  const auto r = advise({(dir / "r.json").string(), "--ranks", "4", "--ranks-per-node", "1", "--bucket-mb", "1,5,100",
                         "--comm-hook", "fp16", "--overlap", "on", "--out-dir", (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(testing::read_text(dir / "out" / "advice.json"));
  std::vector<std::string> labels;
  for (const auto& s : j["advice"][0]["ranks"][0]["settings"]) labels.push_back(s["setting"]["label"]);
  EXPECT_EQ(labels, (std::vector<std::string>{"1 MB, fp16, overlap", "5 MB, fp16, overlap", "100 MB, fp16, overlap",
                                              "25 MB, no hook, overlap"}));
}

// Advice from a model that misses the step its own row measured is not worth acting on: said,
// and exit 1 unless --force.
TEST(AdviseCommand, AModelThatMissesItsOwnStepExitsOneUnlessForced) {
  TempDir dir;
  write_result_file(dir / "r.json", ddp_document(0.150));
  const auto r = advise({(dir / "r.json").string(), "--fabric", "ndr-ib"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("Not to be trusted"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("--force exits 0 anyway"), std::string::npos) << r.err;
  EXPECT_EQ(advise({(dir / "r.json").string(), "--fabric", "ndr-ib", "--force"}).exit_code, 0);
  write_result_file(dir / "close.json", ddp_document(0.120));
  EXPECT_EQ(advise({(dir / "close.json").string()}).exit_code, 0);
}

// The output rule: a result file named advice.json in --out-dir is the input, never replaced
// (it was, exit 1); its own earlier files it replaces.
TEST(AdviseCommand, ItsFilesNeverReplaceItsInput) {
  TempDir dir;
  std::filesystem::create_directories(dir / "d");
  write_result_file(dir / "d" / "advice.json", ddp_document());
  const std::string before = testing::read_text(dir / "d" / "advice.json");
  const auto r = advise({(dir / "d" / "advice.json").string(), "--out-dir", (dir / "d").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("--out-dir's advice.json '" + (dir / "d" / "advice.json").string() + "' is the file RESULTS"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(testing::read_text(dir / "d" / "advice.json"), before);
  write_result_file(dir / "r.json", ddp_document());
  for (int twice = 0; twice < 2; ++twice) {
    EXPECT_EQ(advise({(dir / "r.json").string(), "--out-dir", (dir / "e").string()}).exit_code, 0);
  }
}

TEST(AdviseCommand, BadInputExitsTwoNamingIt) {
  TempDir dir;
  write_result_file(dir / "r.json", ddp_document());
  auto single_only = testing::sample_sweep_document();
  std::erase_if(single_only.runs, [](const RunResult& r) { return r.strategy == "ddp"; });
  write_result_file(dir / "single.json", single_only);
  write_result_file(dir / "untimed.json", testing::sample_sweep_document());  // DDP rows with no gradient timeline
  const std::string file = (dir / "r.json").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{(dir / "none.json").string()}, "none.json"},
      {{(dir / "single.json").string()}, "has no DDP row to advise on"},
      {{(dir / "untimed.json").string()}, "has no DDP row to advise on; ddp-2gpu (faithful): no gradient timeline"},
      {{file, "--ranks", "1"}, "--ranks: 1: one rank has no communication to tune"},
      {{file, "--ranks", "0"}, "--ranks: 0 is not a rank count"},
      {{file, "--fabric", "carrier-pigeon"}, "--fabric carrier-pigeon: expected measured|hdr-ib"},
      {{file, "--comm-hook", "int8"}, "--comm-hook: int8 not in {allreduce,fp16,bf16}"},
      {{file, "--overlap", "maybe"}, "--overlap: maybe not in {on,off}"},
      {{file, "--bucket-mb", "0"}, "--bucket-mb: 0.000000 is not a bucket cap"},
      {{file, "--bucket-mb", "-5"}, "is not a bucket cap"},
      {{file, "--bucket-mb", "1e-7"}, "is not a bucket cap (0.001 to 1000000 MiB)"},
      {{file, "--bucket-mb", "1e13"}, "is not a bucket cap"},
      {{file, "--ranks", "9223372036854775807"}, "is not a rank count (1 to 10000000)"},
      {{file, "--latency-us", "-100"}, "--latency-us must be from 0 to 1000000 us"},
      {{file, "--latency-us", "1e300"}, "--latency-us must be from 0 to 1000000 us"},
      {{file, "--intra-node-gbps", "0"}, "--intra-node-gbps must be from 0.000001 to 1000000 Gbit/s"},
      {{file, "--inter-node-gbps", "1e-300"}, "--inter-node-gbps must be from 0.000001"},
  };
  for (const auto& [args, says] : cases) {
    const auto r = advise(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err << r.out;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace ddpbench
