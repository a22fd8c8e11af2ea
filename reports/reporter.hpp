#pragma once
// Output formats as plugins behind one small interface (as nvbench's printers): a reporter
// turns a result document into one file's text. The public entry points are non-virtual;
// each format overrides the private hooks. Units are formatted here, never in the data.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reports/run_result.hpp"
#include "reports/sweep_summary.hpp"
#include "reports/table_notes.hpp"

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
  /// Renders and writes atomically to `path`, as file_text makes the report a file.
  void write(const ResultDocument& document, const std::filesystem::path& path) const;
  /// The report as its file holds it: for Markdown and HTML, with a comment line that marks the
  /// file as the sweep's (what `wrote` recognises, where a heading or a title a person may write
  /// too would not), shown nowhere a page is rendered.
  [[nodiscard]] std::string file_text(std::string report) const { return do_file_text(std::move(report)); }
  /// Whether `text` is a report of this format, as this reporter writes it: an earlier one, which
  /// a sweep may replace (the output rule, harness/base/output_rule.hpp); any other file it may not.
  [[nodiscard]] bool wrote(std::string_view text) const { return do_wrote(text); }

 private:
  [[nodiscard]] virtual std::string do_render(const ResultDocument& document,
                                              const std::vector<RowSummary>& rows) const = 0;
  [[nodiscard]] virtual std::string do_file_name() const = 0;
  [[nodiscard]] virtual bool do_wrote(std::string_view text) const = 0;
  [[nodiscard]] virtual std::string do_file_text(std::string report) const { return report; }
};

/// The comment line that marks a Markdown or HTML report as a sweep's.
inline constexpr std::string_view kSweepReportMarker =
    "<!-- ddpbench sweep: replaced by the next sweep that writes its reports here -->\n";

/// results.json: the document (schema ddpbench/result/v1) with a "summary" of every row.
std::unique_ptr<Reporter> make_json_reporter();
/// results.md: the report's sections (reports/report_sections.hpp) in Markdown, the tutorial's
/// table beside this run's first.
std::unique_ptr<Reporter> make_markdown_reporter();
/// results.html: the same sections with the page's inline SVG charts; no script, no network.
std::unique_ptr<Reporter> make_html_reporter();
/// Google Benchmark's JSON format, which its compare.py and CI dashboards read.
std::unique_ptr<Reporter> make_gbench_reporter();

/// The reporters a sweep writes by default, in the order it writes them: Markdown, HTML, JSON.
std::vector<std::unique_ptr<Reporter>> default_reporters();

nlohmann::json summary_json(const RowSummary& row);

/// Whether the comparison left something out and either side ran to show it.
bool compared_without_shown(const RowSummary::PyTorchTwin& twin);
/// What a row's comparison with its twin left out on both sides (row.pytorch->compared_without),
/// as the note the tables mark.
std::string compared_without_note(const RowSummary& row);
/// A status as a table shows it: the word, and where the row did not run, the mark of its
/// reason in `notes` ("skipped [1]").
std::string status_cell(RunStatus status, const std::string& reason, TableNotes& notes);
/// A row's status over its planned repetitions (`outcomes`) as its tables show it: "ok"; where
/// every repetition ended alike, as one run's ("skipped [1]"); else each status but ok with how
/// many of the planned repetitions it holds and the mark of each reason ("failed in 1 of 3 [1]",
/// the note naming the repetition: "repetition 2: killed by signal 9"), a repetition with no
/// result "not run". Without outcomes (a row built by hand), `status` and `reason` as one run's.
std::string repetitions_status_cell(RunStatus status, const std::string& reason,
                                    const std::vector<RepetitionOutcome>& outcomes, TableNotes& notes);
/// The comparison's status as its table shows it: "ok", or which side did not run and the
/// mark of its reason in `notes` ("PyTorch skipped [1]").
std::string twin_status(const RowSummary::PyTorchTwin& twin, TableNotes& notes);

/// The compute table's account of a row's peak: what it is the peak of ("2 cores, AVX-512
/// FMA", "4 x NVIDIA H100 80GB HBM3"), with the mark of its sources (or of why there is none).
std::string peak_of_cell(const RowSummary& row, TableNotes& notes);
/// The utilisation, "≥" before it where the peak is an upper bound (a turbo clock).
std::string utilisation_cell(const RowSummary& row);
/// What the compute table's peak is, for the text above it.
inline constexpr const char* kComputeTableIntro =
    "Training FLOPs per image (forward and backward, 3x the forward pass's convolutions and matrix products), the "
    "FLOP/s achieved at the steady images/s, and that against the dense peak of what the row computed on for its "
    "precision: its GPUs' from NVIDIA's data sheets, or the CPU cores its ranks' threads could use (at most the "
    "physical cores) from the vector width, FMA units and clock the CPU reports (a turbo clock makes the peak an upper "
    "bound, so the utilisation reads at least as shown: ≥). Each peak's sources are the note its row marks.";

}  // namespace ddpbench
