#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "reports/reporter.hpp"
#include "support/sample_results.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

std::filesystem::path golden(const std::string& name) {
  const char* source = std::getenv("DDPBENCH_SOURCE_DIR");
  return std::filesystem::path(source != nullptr ? source : ".") / "tests/reports/golden" / name;
}

// Compares with the golden file. DDPBENCH_UPDATE_GOLDEN=1 rewrites a file that differs and
// still fails, so an update is always a reviewed second run; under CI (CI set) it refuses to
// rewrite anything.
void expect_golden(const std::string& text, const std::string& name) {
  if (std::getenv("DDPBENCH_SOURCE_DIR") == nullptr) GTEST_SKIP() << "DDPBENCH_SOURCE_DIR not set";
  const std::string expected = testing::read_text(golden(name));
  const char* update = std::getenv("DDPBENCH_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    const char* ci = std::getenv("CI");
    ASSERT_TRUE(ci == nullptr || *ci == '\0') << "DDPBENCH_UPDATE_GOLDEN is set under CI: golden files are never "
                                                  "rewritten there";
    if (text != expected) {
      testing::write_text(golden(name), text);
      ADD_FAILURE() << "rewrote tests/reports/golden/" << name << ": review the change and run again without "
                    << "DDPBENCH_UPDATE_GOLDEN";
    }
    return;
  }
  EXPECT_EQ(text, expected) << "rendered output differs from tests/reports/golden/" << name;
}

TEST(Reporters, MarkdownMatchesItsGoldenFile) {
  const auto md = make_markdown_reporter()->render(testing::sample_sweep_document());
  EXPECT_NE(md.find("| single | 1 | 13.20 s | 13.20 s (13.00–13.40) | 1.00x |"), std::string::npos) << md;
  EXPECT_NE(md.find("## side by side"), std::string::npos);
  // The reason is a note under the row's table, marked in its status.
  EXPECT_NE(md.find("| skipped [1] |\n\n- [1] needs 4 CUDA devices, 2 visible\n"), std::string::npos) << md;
  // Where a step's time goes: 15 ms of ddp-2gpu's 40 ms backward hid its allreduce.
  EXPECT_NE(md.find("| ddp-2gpu | faithful | 4.0 ms | 18.0 ms | 40.0 ms | 15.0 ms | 3.0 ms | 2.0 ms | 67.0 ms | "
                    "64.0 ms | 70.0 ms | 200.0 ms |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| single | faithful | 4.0 ms | 18.0 ms | 40.0 ms | 0.0 us | 0.0 us |"), std::string::npos) << md;
  // Compute: single runs fp32 on an A100 (19.5 TFLOP/s), ddp-2gpu fp16 on two (312 each):
  // 1 GFLOP per image at the steady images/s.
  EXPECT_NE(md.find("| single | faithful | fp32 | 1.00 GFLOP | 4.17 TFLOP/s | 19.5 TFLOP/s | 21.4 % |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| ddp-2gpu | faithful | fp16 | 1.00 GFLOP | 5.61 TFLOP/s | 624 TFLOP/s | 0.9 % | 2 x NVIDIA A100-SXM4-40GB [2] |"),
            std::string::npos)
      << md;
  expect_golden(md, "sweep.md");
}

// A row whose forward re-made its replicas (LibTorch's data_parallel) shows that part of
// forward in its own column and says in a note what it cost; rows without it show neither.
TEST(Reporters, MarkdownShowsTheReplicatePartOfForward) {
  ResultDocument doc = testing::sample_sweep_document();
  for (auto& r : doc.runs) {
    if (r.name == "single" && r.mode == "controlled") r.mean_phase_s.replicate_s = 0.012;
  }
  const std::string md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("| row | mode | data | forward | replicate (in forward) | backward |"), std::string::npos) << md;
  EXPECT_NE(md.find("| single | controlled | 4.0 ms | 18.0 ms | 12.0 ms | 40.0 ms |"), std::string::npos) << md;
  EXPECT_NE(md.find("| single | faithful | 4.0 ms | 18.0 ms | 0.0 us | 40.0 ms |"), std::string::npos) << md;
  EXPECT_NE(md.find("- single (controlled): forward re-made the replicas every step: 12.0 ms of each 64.0 ms step "
                    "(18.8 %)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("- single (faithful): forward re-made"), std::string::npos) << md;
  const std::string plain = make_markdown_reporter()->render(testing::sample_sweep_document());
  EXPECT_EQ(plain.find("replicate"), std::string::npos) << plain;
}

// A straggler is shown, rank by rank, where the slowest rank computes more than 10 % longer
// than the fastest; an even row shows nothing.
TEST(Reporters, MarkdownAndHtmlShowAStragglersRanks) {
  ResultDocument doc = testing::sample_sweep_document();
  for (auto& r : doc.runs) {
    if (r.name != "ddp-2gpu" || r.mode != "faithful") continue;
    r.ranks = {RankTiming{0, 9.7, {0.064, 0.07, 0.2}, 1LL << 30, 0.030, 0.004, 0.030},
               RankTiming{1, 9.7, {0.064, 0.07, 0.2}, 1LL << 30, 0.060, 0.004, 0.001}};
    r.slowest_rank = 1;
    r.rank_spread = 64.0 / 34.0;
    r.straggler_cause = "compute";
    r.straggler = true;
  }
  const std::string md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("## stragglers"), std::string::npos) << md;
  EXPECT_NE(md.find("| ddp-2gpu | faithful | 1 (slowest, 1.88x, compute) | 60.0 ms | 4.0 ms | 1.0 ms | 64.0 ms |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| ddp-2gpu | faithful | 0 | 30.0 ms | 4.0 ms | 30.0 ms | 64.0 ms |"), std::string::npos) << md;
  EXPECT_EQ(md.find("| ddp-2gpu | controlled | 0 |"), std::string::npos) << "an even row shows no ranks";
  const std::string html = make_html_reporter()->render(doc);
  EXPECT_NE(html.find("<h2>Stragglers</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>1 (slowest, 1.88x, compute)</td><td>60.0 ms</td>"), std::string::npos) << html;
  const auto summary = nlohmann::json::parse(make_json_reporter()->render(doc))["summary"];
  bool found = false;
  for (const auto& row : summary) {
    if (row["name"] == "ddp-2gpu" && row["mode"] == "faithful") {
      found = true;
      EXPECT_EQ(row["slowest_rank"], 1);
      EXPECT_EQ(row["straggler"], true);
      EXPECT_EQ(row["straggler_cause"], "compute");
    }
  }
  EXPECT_TRUE(found);
  for (auto& r : doc.runs) r.straggler = false;
  EXPECT_EQ(make_markdown_reporter()->render(doc).find("## stragglers"), std::string::npos);
}

// A sweep's DDP row of 3 steady steps on 2 ranks (the CPU preset's) could not have been flagged:
// both reports say its straggler was not judged; rows whose test could reach alpha are not listed.
TEST(Reporters, MarkdownAndHtmlSayAStragglerOnTooFewStepsWasNotJudged) {
  ResultDocument doc = testing::sample_sweep_document();
  bool set = false;
  for (auto& r : doc.runs) {
    r.straggler_of_steps = 0;
    if (r.name != "ddp-2gpu" || r.mode != "faithful" || r.status != RunStatus::ok) continue;
    r.world_size = 2;
    r.straggler = false;
    r.straggler_steps = 2;
    r.straggler_of_steps = 3;
    set = true;
  }
  ASSERT_TRUE(set);
  const std::string md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("## stragglers not judged\n\n- ddp-2gpu (faithful): a straggler could not be judged: 3 steady "
                    "steps of 2 ranks"),
            std::string::npos)
      << md;
  const std::string html = make_html_reporter()->render(doc);
  EXPECT_NE(html.find("<h2>Stragglers not judged</h2>\n<ul>\n<li>ddp-2gpu (faithful): a straggler could not be "
                      "judged: 3 steady steps of 2 ranks"),
            std::string::npos)
      << html;
  for (auto& r : doc.runs) r.straggler_of_steps = r.straggler_of_steps > 0 ? 6 : 0;
  EXPECT_EQ(make_markdown_reporter()->render(doc).find("not judged"), std::string::npos);
  EXPECT_EQ(make_html_reporter()->render(doc).find("Stragglers not judged"), std::string::npos);
}

// A sweep under the CPU preset whose DDP row (no "devices" in its file) lost one repetition of
// three to SIGKILL: every report says so where its figures stand, and its figures say how many
// repetitions they are over; its devices and scaling are its 2 ranks'; what the preset changed
// is listed row by row; the test accuracy's 4 of 1,024 images are noted once (issue 55).
TEST(Reporters, AFailedRepetitionAPresetsChangesAndARowWithoutDevicesMatchTheirGoldenFiles) {
  const ResultDocument doc = testing::cpu_sweep_document();
  const std::string md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("| ddp-2 | 2 | - | 2.60 s (2 of 3) (2.50–2.70) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| failed in 1 of 3 [1] |"), std::string::npos) << md;
  EXPECT_NE(md.find("- [1] repetition 1: rank 1: killed by signal 9 (SIGKILL)"), std::string::npos) << md;
  EXPECT_NE(md.find("- single (faithful), ddp-2 (faithful): batch-size 256 → 32; device cuda → cpu;"), std::string::npos)
      << md;
  EXPECT_NE(md.find("test accuracy over the first 64 of 1,024 test images only (--max-eval-batches 2)"), std::string::npos)
      << md;
  const auto rows = summarize_sweep(doc);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].devices, 2);
  EXPECT_EQ(rows[1].status, RunStatus::failed);
  EXPECT_EQ(rows[1].repetitions, 2);
  EXPECT_NEAR(rows[1].scaling_efficiency, rows[1].speedup / 2, 1e-12);
  expect_golden(md, "sweep-cpu.md");
  const std::string html = make_html_reporter()->render(doc);
  EXPECT_NE(html.find("<td>failed in 1 of 3 [1]</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("test accuracy over the first 64 of 1,024 test images only"), std::string::npos) << html;
  expect_golden(html, "sweep-cpu.html");
  expect_golden(make_gbench_reporter()->render(doc), "sweep-cpu.gbench.json");
  const auto summary = nlohmann::json::parse(make_json_reporter()->render(doc))["summary"][1];
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["planned_repetitions"], 3);
  EXPECT_EQ(summary["repetition_outcomes"][1]["status"], "failed");
}

// With --reference, Markdown, HTML and JSON put each row against its PyTorch twin, and the
// twin is not a row of the main tables.
TEST(Reporters, EveryFormatPutsARowAgainstItsPyTorchTwin) {
  const ResultDocument doc = testing::twin_document({100, 300, 200}, {90, 280, 210});
  const auto md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("## ddpbench against PyTorch"), std::string::npos) << md;
  EXPECT_NE(md.find("| ddp | faithful | 5.00 s | 4.76 s | 1.07x | 200 | 210 | 1.07x | ok |"), std::string::npos) << md;
  EXPECT_EQ(md.find("| ddp.torch |"), std::string::npos) << "the twin is not a row of its own: " << md;
  const auto html = make_html_reporter()->render(doc);
  EXPECT_NE(html.find("<h2>ddpbench against PyTorch</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>1.07x</td>"), std::string::npos);
  const auto json = nlohmann::json::parse(make_json_reporter()->render(doc));
  ASSERT_EQ(json["summary"].size(), 1u);
  EXPECT_EQ(json["summary"][0]["pytorch"]["name"], "ddp.torch");
  EXPECT_NEAR(json["summary"][0]["pytorch"]["vs_pytorch_steady"].get<double>(), 300.0 / 280.0, 1e-12);
}

// A twin that ran without SyncBatchNorm is put against ddpbench's row without it, and the
// tables say so once, in a note; a twin that could not run says why in a note, its status short.
TEST(Reporters, ATwinComparedWithoutSyncBnAndASkippedTwinAreNotesUnderTheTable) {
  ResultDocument doc = testing::twin_document({100, 300, 200}, {90, 280, 210});
  doc.sweep->rows = {{"ddp", "faithful", kNotMeasured, 2, ""},
                     {"ddp.no-sync-bn", "faithful", kNotMeasured, 2, ""},
                     {"ddp.torch", "faithful", kNotMeasured, 2, "ddp", "ddp.no-sync-bn",
                      "SyncBatchNorm: PyTorch's runs on CUDA only"},
                     {"dp", "faithful", kNotMeasured, 2, ""},
                     {"dp.torch", "faithful", kNotMeasured, 2, "dp"}};
  for (int64_t i = 0; i < 3; ++i) {
    RunResult r;
    r.mode = "faithful";
    r.repetition = i;
    r.strategy = "ddp";
    r.name = "ddp.no-sync-bn";
    r.steady_images_per_s = 250;
    r.train_time_s = 4;
    doc.runs.push_back(r);
    r.name = "dp";
    r.strategy = "dp";
    doc.runs.push_back(r);
    r.name = "dp.torch";
    r.status = RunStatus::skipped;
    r.reason = "no PyTorch twin for this row: torch.nn.DataParallel scatters over CUDA devices only";
    doc.runs.push_back(r);
  }
  const auto md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("| ddp [1] | faithful | 4.00 s | 4.76 s | 1.19x | 250 | 210 | 1.19x | ok |"), std::string::npos)
      << "ddpbench's side is the run without SyncBatchNorm (median pair 250 / 210): " << md;
  EXPECT_NE(md.find("| dp | faithful | 4.00 s | - | - | 250 | - | - | PyTorch skipped [2] |"), std::string::npos) << md;
  EXPECT_NE(md.find("- [1] compared without SyncBatchNorm: PyTorch's runs on CUDA only: both sides ran without it"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- [2] no PyTorch twin for this row: torch.nn.DataParallel scatters over CUDA devices only\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("| ddp.no-sync-bn |"), std::string::npos) << "not a row of the table: " << md;
  const auto html = make_html_reporter()->render(doc);
  EXPECT_NE(html.find("<td>ddp [1]</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>PyTorch skipped [2]</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<li>[2] no PyTorch twin for this row: torch.nn.DataParallel"), std::string::npos) << html;
  const auto json = nlohmann::json::parse(make_json_reporter()->render(doc));
  EXPECT_EQ(json["summary"][0]["pytorch"]["ddpbench"]["name"], "ddp.no-sync-bn");
  EXPECT_EQ(json["summary"][0]["pytorch"]["ddpbench"]["compared_without"], "SyncBatchNorm: PyTorch's runs on CUDA only");

  // Neither side ran (the row could not run here): nothing was compared without anything.
  for (auto& r : doc.runs) {
    if (r.name == "ddp.no-sync-bn" || r.name == "ddp.torch") {
      r.status = RunStatus::skipped;
      r.reason = "needs 2 nodes";
    }
  }
  const auto neither = make_markdown_reporter()->render(doc);
  EXPECT_EQ(neither.find("compared without"), std::string::npos) << neither;
  EXPECT_NE(neither.find("| ddpbench skipped [1], PyTorch skipped [1] |"), std::string::npos) << neither;
}

// What a sweep may replace of its reports (the output rule): a page it wrote, known by its first
// comment line, never a user's notes that open with the heading or title a sweep's page opens with.
TEST(Reporters, ASweepsReportIsKnownByItsMarkerLine) {
  const ResultDocument doc = testing::sample_sweep_document();
  for (const auto& reporter : {make_markdown_reporter(), make_html_reporter()}) {
    const std::string ours = reporter->file_text(reporter->render(doc));
    EXPECT_TRUE(reporter->wrote(ours)) << reporter->file_name();
    EXPECT_FALSE(reporter->wrote(reporter->render(doc))) << reporter->file_name() << ": the page without its marker";
  }
  EXPECT_FALSE(make_markdown_reporter()->wrote("# ddpbench: notes on the A100 cluster runs\n"));
  EXPECT_FALSE(make_html_reporter()->wrote("<!DOCTYPE html>\n<html><head><title>ddpbench notes</title></head></html>\n"));
}

TEST(Reporters, HtmlIsWellFormedXmlWithItsChartsAndMatchesItsGoldenFile) {
  testing::TempDir dir;
  const auto reporter = make_html_reporter();
  reporter->write(testing::sample_sweep_document(), dir / "results.html");
  const std::string html = testing::read_text(dir / "results.html");
  EXPECT_EQ(reporter->file_name(), "results.html");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::size_t charts = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  // Epoch time, phases, scaling and the step-time distribution (no PyTorch twins here).
  EXPECT_EQ(charts, 4u);
  // The phase bars of ddp-2gpu show the communication hidden under backward, as a pattern.
  EXPECT_NE(html.find("ddp-2gpu (faithful): communication hidden under backward 15.0 ms per step (22.4 %)"),
            std::string::npos);
  // The warm-up steps are marked: 900 ms and 120 ms, beside p50 64 ms.
  EXPECT_NE(html.find("single (faithful): warm-up step 900.0 ms"), std::string::npos);
  // Parsed as XML by Python's parser, where one is installed.
  if (std::system("python3 -c 'import xml.etree.ElementTree' 2>/dev/null") == 0) {
    const std::string check =
        "python3 -c \"import sys, xml.etree.ElementTree as ET; root = ET.parse(sys.argv[1]).getroot(); "
        "svg = root.findall('.//{http://www.w3.org/2000/svg}svg'); "
        "assert len(svg) == 4 and svg[3].findall('{http://www.w3.org/2000/svg}circle'), svg\" " +
        (dir / "results.html").string();
    EXPECT_EQ(std::system(check.c_str()), 0) << "not well-formed XML with the two charts";
  }
  expect_golden(html, "sweep.html");
}

// The fields Google Benchmark's JSON reporter writes, and their types, for an iteration entry
// and an aggregate entry (benchmark 1.7's src/json_reporter.cc).
void expect_gbench_schema(const nlohmann::json& b) {
  for (const char* key : {"name", "run_name", "run_type", "time_unit"}) {
    EXPECT_TRUE(b.contains(key) && b[key].is_string()) << key << " in " << b.dump();
  }
  for (const char* key : {"family_index", "per_family_instance_index", "repetitions", "threads", "iterations"}) {
    EXPECT_TRUE(b.contains(key) && b[key].is_number_integer()) << key << " in " << b.dump();
  }
  for (const char* key : {"real_time", "cpu_time"}) {
    EXPECT_TRUE(b.contains(key) && b[key].is_number()) << key << " in " << b.dump();
  }
  EXPECT_TRUE(b["time_unit"] == "ns" || b["time_unit"] == "us" || b["time_unit"] == "ms") << b.dump();
  if (b["run_type"] == "iteration") {
    EXPECT_TRUE(b.contains("repetition_index") && b["repetition_index"].is_number_integer()) << b.dump();
    EXPECT_FALSE(b.contains("aggregate_name"));
  } else {
    EXPECT_EQ(b["run_type"], "aggregate");
    EXPECT_TRUE(b["aggregate_name"].is_string() && b["aggregate_unit"].is_string()) << b.dump();
    EXPECT_EQ(b["name"], b["run_name"].get<std::string>() + "_" + b["aggregate_name"].get<std::string>());
    EXPECT_FALSE(b.contains("repetition_index"));
  }
}

TEST(Reporters, GoogleBenchmarkExportIsGoogleBenchmarksOwnSchema) {
  const auto doc = testing::sample_sweep_document();
  const auto j = nlohmann::json::parse(make_gbench_reporter()->render(doc));
  EXPECT_EQ(j["context"]["host_name"], "gpu-host");
  EXPECT_EQ(j["context"]["library_build_type"], "debug");
  const auto& benchmarks = j["benchmarks"];
  for (const auto& b : benchmarks) expect_gbench_schema(b);
  // faithful/single: 2 repetitions and 4 aggregates; faithful/ddp-2gpu the same; faithful/ddp-4gpu
  // skipped in both (as Google Benchmark writes a skipped run, no aggregates); the controlled rows
  // as the faithful ones.
  ASSERT_EQ(benchmarks.size(), 6u + 6u + 2u + 6u + 6u);
  const auto& first = benchmarks[0];
  EXPECT_EQ(first["name"], "faithful/single");
  EXPECT_EQ(first["run_name"], "faithful/single");
  EXPECT_EQ(first["run_type"], "iteration");
  EXPECT_EQ(first["repetitions"], 2);
  EXPECT_EQ(first["repetition_index"], 0);
  EXPECT_EQ(first["iterations"], 196);
  EXPECT_EQ(first["time_unit"], "ms");
  // Per iteration (a step): 13.0 s over 196 steps, in ms, not the epoch in seconds.
  EXPECT_DOUBLE_EQ(first["real_time"].get<double>(), 13.0 * 1e3 / 196);
  EXPECT_DOUBLE_EQ(first["cpu_time"].get<double>(), first["real_time"].get<double>());
  EXPECT_DOUBLE_EQ(first["items_per_second"].get<double>(), 3846.0);
  EXPECT_EQ(benchmarks[1]["repetition_index"], 1);
  EXPECT_EQ(benchmarks[1]["family_index"], first["family_index"]);
  const double a = 13.0e3 / 196, b = 13.4e3 / 196;
  const std::vector<std::pair<std::string, double>> aggregates = {
      {"mean", (a + b) / 2}, {"median", (a + b) / 2}, {"stddev", std::abs(a - b) / std::sqrt(2.0)},
      {"cv", std::abs(a - b) / std::sqrt(2.0) / ((a + b) / 2)}};
  for (std::size_t i = 0; i < aggregates.size(); ++i) {
    const auto& entry = benchmarks[2 + i];
    EXPECT_EQ(entry["name"], "faithful/single_" + aggregates[i].first);
    EXPECT_EQ(entry["aggregate_name"], aggregates[i].first);
    EXPECT_EQ(entry["aggregate_unit"], aggregates[i].first == "cv" ? "percentage" : "time");
    EXPECT_EQ(entry["iterations"], 2);
    EXPECT_NEAR(entry["real_time"].get<double>(), aggregates[i].second, 1e-9) << aggregates[i].first;
  }
  EXPECT_EQ(benchmarks[6]["name"], "faithful/ddp-2gpu");
  EXPECT_NE(benchmarks[6]["family_index"], first["family_index"]);
  for (const std::size_t skipped : {12u, 13u}) {
    const auto& entry = benchmarks[skipped];
    EXPECT_EQ(entry["name"], "faithful/ddp-4gpu");
    EXPECT_EQ(entry["repetitions"], 2);
    EXPECT_EQ(entry["repetition_index"], skipped - 12);
    EXPECT_EQ(entry["skipped"], true);
    EXPECT_EQ(entry["skip_message"], "needs 4 CUDA devices, 2 visible");
    EXPECT_EQ(entry["iterations"], 0);
  }
  EXPECT_EQ(benchmarks[14]["name"], "controlled/single");
  EXPECT_EQ(benchmarks[14]["repetitions"], 2);
}

// A repetition that failed is in Google Benchmark's export as its reporter writes a failed run
// (error_occurred, error_message, no iterations), every planned repetition counted, and the
// aggregates over the ones that ran; a sweep stopped before a repetition names it not run.
TEST(Reporters, GoogleBenchmarkExportWritesEveryPlannedRepetitionAsItsReporterDoes) {
  auto doc = testing::sample_sweep_document();
  doc.sweep->repeat = 3;
  RunResult killed = doc.runs[2];  // faithful ddp-2gpu, a third repetition: killed
  killed.repetition = 2;
  killed.status = RunStatus::failed;
  killed.reason = "rank 1: killed by signal 9 (SIGKILL)";
  doc.runs.push_back(killed);
  const auto j = nlohmann::json::parse(make_gbench_reporter()->render(doc));
  std::vector<nlohmann::json> ddp, single;
  for (const auto& b : j["benchmarks"]) {
    expect_gbench_schema(b);
    if (b["run_name"] == "faithful/ddp-2gpu") ddp.push_back(b);
    if (b["run_name"] == "faithful/single") single.push_back(b);
  }
  ASSERT_EQ(ddp.size(), 3u + 4u);
  EXPECT_EQ(ddp[2]["repetition_index"], 2);
  EXPECT_EQ(ddp[2]["error_occurred"], true);
  EXPECT_EQ(ddp[2]["error_message"], "failed: rank 1: killed by signal 9 (SIGKILL)");
  EXPECT_EQ(ddp[2]["iterations"], 0);
  for (const auto& b : ddp) EXPECT_EQ(b["repetitions"], 3) << b.dump();
  EXPECT_EQ(ddp[3]["name"], "faithful/ddp-2gpu_mean");
  EXPECT_EQ(ddp[3]["iterations"], 3) << "Google Benchmark counts every repetition reported";
  EXPECT_NEAR(ddp[3]["real_time"].get<double>(), (9.7e3 / 98 + 9.9e3 / 98) / 2, 1e-9) << "over the two that ran";
  // The single row's third repetition has no result: not run.
  ASSERT_EQ(single.size(), 3u + 4u);
  EXPECT_EQ(single[2]["error_occurred"], true);
  EXPECT_NE(single[2]["error_message"].get<std::string>().find("not run"), std::string::npos);
}

// A row whose ranks ran on several nodes says how, in every report; rows on one node do not.
TEST(Reporters, ARowAcrossNodesSaysItsPlacementInEveryReport) {
  auto doc = testing::sample_sweep_document();
  for (auto& r : doc.runs) {
    if (r.name != "ddp-2gpu") continue;
    r.nodes = {"node1", "node2"};
    r.ranks_per_node = {1, 1};
  }
  const std::string md = make_markdown_reporter()->render(doc);
  EXPECT_NE(md.find("| ddp-2gpu | 2 (2 nodes x 1 rank) |"), std::string::npos) << md;
  EXPECT_NE(md.find("- ddp-2gpu (faithful): strategy ddp; 2 processes; 2 nodes x 1 rank"), std::string::npos) << md;
  EXPECT_NE(md.find("| single | 1 |"), std::string::npos) << md;
  const std::string html = make_html_reporter()->render(doc);
  EXPECT_NE(html.find("<td>ddp-2gpu</td><td>2 (2 nodes x 1 rank)</td>"), std::string::npos);
  const auto j = nlohmann::json::parse(make_json_reporter()->render(doc));
  EXPECT_EQ(j["summary"][1]["placement"], "2 nodes x 1 rank");
  EXPECT_EQ(j["summary"][0]["placement"], "");
  EXPECT_EQ(j["runs"][2]["nodes"], nlohmann::json({"node1", "node2"}));
  const auto gbench = nlohmann::json::parse(make_gbench_reporter()->render(doc));
  for (const auto& b : gbench["benchmarks"]) {
    const bool across = b["run_name"] == "faithful/ddp-2gpu" || b["run_name"] == "controlled/ddp-2gpu";
    EXPECT_EQ(b.value("label", ""), across ? "2 nodes x 1 rank" : "") << b.dump();
  }
}

TEST(Reporters, JsonCarriesTheDocumentAndItsSummary) {
  const auto j = nlohmann::json::parse(make_json_reporter()->render(testing::sample_sweep_document()));
  EXPECT_EQ(j["schema"], "ddpbench/result/v1");
  EXPECT_EQ(j["sweep"]["baseline_row"], "single");
  ASSERT_EQ(j["summary"].size(), 5u);
  EXPECT_EQ(j["summary"][1]["name"], "ddp-2gpu");
  EXPECT_EQ(j["summary"][2]["status"], "skipped");
  const auto back = j.get<ResultDocument>();
  EXPECT_EQ(back.sweep->rows.size(), 5u);
  EXPECT_DOUBLE_EQ(back.sweep->rows[1].tutorial_seconds, 9.8);
}

}  // namespace
}  // namespace ddpbench
