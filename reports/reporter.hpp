#pragma once
// Output formats as plugins behind one small interface (as nvbench's printers): a reporter
// turns a result document into one file's text. The public entry points are non-virtual;
// each format overrides the private hooks. Units are formatted here, never in the data.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "reports/run_result.hpp"
#include "reports/sweep_summary.hpp"

namespace ddpbench {

class Reporter {
 public:
  virtual ~Reporter() = default;
  /// The report's text for `document`.
  [[nodiscard]] std::string render(const ResultDocument& document) const {
    return do_render(document, summarize_sweep(document));
  }
  /// Its usual file name in a sweep's output folder (results.md, ...).
  [[nodiscard]] std::string file_name() const { return do_file_name(); }
  /// Renders and writes atomically to `path`.
  void write(const ResultDocument& document, const std::filesystem::path& path) const;

 private:
  [[nodiscard]] virtual std::string do_render(const ResultDocument& document,
                                              const std::vector<RowSummary>& rows) const = 0;
  [[nodiscard]] virtual std::string do_file_name() const = 0;
};

/// results.json: the document (schema ddpbench/result/v1) with a "summary" of every row.
std::unique_ptr<Reporter> make_json_reporter();
/// results.md: the tutorial's table beside this run's, per mode and side by side.
std::unique_ptr<Reporter> make_markdown_reporter();
/// results.html: the same tables and two inline SVG charts; no script, no network.
std::unique_ptr<Reporter> make_html_reporter();
/// Google Benchmark's JSON format, which its compare.py and CI dashboards read.
std::unique_ptr<Reporter> make_gbench_reporter();

/// The reporters a sweep writes by default, in the order it writes them: Markdown, HTML, JSON.
std::vector<std::unique_ptr<Reporter>> default_reporters();

nlohmann::json summary_json(const RowSummary& row);

}  // namespace ddpbench
