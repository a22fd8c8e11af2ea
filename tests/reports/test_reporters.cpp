#include <gtest/gtest.h>

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

// Compares with the golden file; DDPBENCH_UPDATE_GOLDEN=1 rewrites it instead.
void expect_golden(const std::string& text, const std::string& name) {
  if (std::getenv("DDPBENCH_SOURCE_DIR") == nullptr) GTEST_SKIP() << "DDPBENCH_SOURCE_DIR not set";
  if (const char* update = std::getenv("DDPBENCH_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    testing::write_text(golden(name), text);
  }
  EXPECT_EQ(text, testing::read_text(golden(name))) << "rendered output differs from tests/reports/golden/" << name;
}

TEST(Reporters, MarkdownMatchesItsGoldenFile) {
  const auto md = make_markdown_reporter()->render(testing::sample_sweep_document());
  EXPECT_NE(md.find("| single | 1 | 13.20 s | 13.20 s (13.00–13.40) | 1.00x |"), std::string::npos) << md;
  EXPECT_NE(md.find("## side by side"), std::string::npos);
  EXPECT_NE(md.find("- ddp-4gpu (faithful): skipped: needs 4 CUDA devices, 2 visible"), std::string::npos);
  expect_golden(md, "sweep.md");
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

TEST(Reporters, HtmlIsWellFormedXmlWithTwoChartsAndMatchesItsGoldenFile) {
  testing::TempDir dir;
  const auto reporter = make_html_reporter();
  reporter->write(testing::sample_sweep_document(), dir / "results.html");
  const std::string html = testing::read_text(dir / "results.html");
  EXPECT_EQ(reporter->file_name(), "results.html");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::size_t charts = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  EXPECT_EQ(charts, 2u);
  // Parsed as XML by Python's parser, where one is installed.
  if (std::system("python3 -c 'import xml.etree.ElementTree' 2>/dev/null") == 0) {
    const std::string check =
        "python3 -c \"import sys, xml.etree.ElementTree as ET; root = ET.parse(sys.argv[1]).getroot(); "
        "svg = root.findall('.//{http://www.w3.org/2000/svg}svg'); "
        "assert len(svg) == 2 and svg[1].findall('{http://www.w3.org/2000/svg}circle'), svg\" " +
        (dir / "results.html").string();
    EXPECT_EQ(std::system(check.c_str()), 0) << "not well-formed XML with the two charts";
  }
  expect_golden(html, "sweep.html");
}

TEST(Reporters, GoogleBenchmarkExportReadsBack) {
  const auto doc = testing::sample_sweep_document();
  const auto j = nlohmann::json::parse(make_gbench_reporter()->render(doc));
  EXPECT_EQ(j["context"]["host_name"], "gpu-host");
  EXPECT_EQ(j["context"]["library_build_type"], "debug");
  const auto& benchmarks = j["benchmarks"];
  // Six runs that ran, each with an epoch entry and a step entry.
  ASSERT_EQ(benchmarks.size(), 12u);
  EXPECT_EQ(benchmarks[0]["name"], "faithful/single");
  EXPECT_EQ(benchmarks[0]["run_type"], "iteration");
  EXPECT_EQ(benchmarks[0]["time_unit"], "s");
  EXPECT_DOUBLE_EQ(benchmarks[0]["real_time"].get<double>(), 13.0);
  EXPECT_DOUBLE_EQ(benchmarks[0]["cpu_time"].get<double>(), 13.0);
  EXPECT_EQ(benchmarks[0]["repetitions"], 2);
  EXPECT_EQ(benchmarks[1]["name"], "faithful/single/step");
  EXPECT_EQ(benchmarks[2]["name"], "faithful/single");
  EXPECT_EQ(benchmarks[2]["repetition_index"], 1);
  EXPECT_EQ(benchmarks[2]["family_index"], benchmarks[0]["family_index"]);
  EXPECT_DOUBLE_EQ(benchmarks[4]["items_per_second"].get<double>(), 5154.0);
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
