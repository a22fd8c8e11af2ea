#pragma once
// A sweep's report as a list of sections, each described once as data (its title, words,
// columns and rows of cells holding values in SI units, formatted only when printed, as
// nvbench's printers keep them), which the Markdown and the HTML renderers both print: the two
// formats cannot drift apart, and a section is added in one place (report_sections()).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reports/run_result.hpp"
#include "reports/sweep_summary.hpp"
#include "reports/table_notes.hpp"

namespace ddpbench {

enum class Align { left, right };

struct Column {
  std::string header;
  Align align = Align::right;
};

/// How a cell's value is printed.
enum class CellFormat { text, integer, seconds, rate, percent, bytes, ratio, flop, flop_per_s };

struct CellLink {
  std::string text;
  std::string href;
};

struct Cell {
  CellFormat format = CellFormat::text;
  double value = kNotMeasured;  // seconds, images/s, a fraction, bytes, FLOP, FLOP/s, a count
  std::string text;             // a text cell's words
  std::string suffix;           // after the value, in both formats: "(slowest, 1.88x, compute)"
  std::vector<CellLink> links;      // instead of a value: HTML links them, Markdown writes [text](href)
};

/// The cell's value (or text) as both formats print it, without its suffixes; unescaped.
std::string formatted(const Cell& cell);
Cell text_cell(std::string text, std::string suffix = "");
Cell value_cell(CellFormat format, double value, std::string suffix = "");

/// Where a section comes on the page when the HTML places it differently from the Markdown
/// (the list's order): the page grew its own order, which its golden file keeps.
inline constexpr int kLastInHtml = 100;

struct Section {
  std::string title;
  std::optional<std::string> html_title;  // the page's heading, where it words it differently
  std::string intro;                      // Markdown, printed as written; the page escapes it, `code` as code
  std::optional<std::string> html_intro;  // the page's own words, where they differ (empty: none)
  std::vector<Column> columns;            // none: no table
  std::vector<std::vector<Cell>> rows;
  TableNotes notes;                       // the texts the cells marked, listed under the table
  std::vector<std::string> items;         // a list, after the table
  std::string markdown_text;              // Markdown another module printed, after the intro
  std::function<std::string()> html_figure;  // markup only the page draws (a chart), after the intro
  bool in_markdown = true;
  bool in_html = true;
  bool table_in_html = true;  // false: the page draws its figure instead of the Markdown's table
  int html_place = kLastInHtml;
};

/// One table section per mode of `rows`: the tutorial's time beside this run's, under what the
/// mode promises and what its rows ran (their heads, loaders and global batches, from their records).
std::vector<Section> main_table_sections(const ResultDocument& doc, const std::vector<RowSummary>& rows);
/// What the CPU preset changed in each row (the sweep's rows' preset_changes), rows alike as one item.
Section preset_changes_section(const ResultDocument& doc);
Section side_by_side_section(const std::vector<RowSummary>& rows);
Section against_pytorch_section(const std::vector<RowSummary>& rows);
Section phases_section(const std::vector<RowSummary>& rows);
Section stragglers_section(const std::vector<RowSummary>& rows);
Section stragglers_not_judged_section(const ResultDocument& doc);
Section traces_section(const ResultDocument& doc);
Section compute_section(const std::vector<RowSummary>& rows);
Section differences_section(const ResultDocument& doc, const std::vector<RowSummary>& rows);
Section notes_section(const ResultDocument& doc, const std::vector<RowSummary>& rows);
/// The page's charts: epoch times, scaling, step times and the ratios to PyTorch.
Section epoch_time_section(const std::vector<RowSummary>& rows);
Section scaling_section(const ResultDocument& doc, const std::vector<RowSummary>& rows);
Section step_time_section(const std::vector<RowSummary>& rows);
Section pytorch_ratio_section(const std::vector<RowSummary>& rows);
/// Projection and advice (sweep --project): their Markdown from their own modules.
Section projection_section(const ResultDocument& doc, const std::vector<RowSummary>& rows);
Section advice_section(const ResultDocument& doc, const std::vector<RowSummary>& rows);

/// Every section of a sweep's report, in the Markdown's order (the page's: html_place), those
/// neither format shows left out. The sections' figures refer to `doc` and `rows`.
std::vector<Section> report_sections(const ResultDocument& doc, const std::vector<RowSummary>& rows);

/// The section in each format; markdown_report.cpp and html_report.cpp define them.
std::string markdown_section(const Section& section);
std::string html_section(const Section& section);

/// What a row's implementation and its phases say about how it ran, one note each.
std::vector<std::string> strategy_notes(const RunResult& run);
/// A traced row: which steps, where their traces are, and what the profiler cost them.
std::string trace_note(const RunResult& run);
/// A row whose epochs --max-steps cut: the steps each epoch ran (of its whole epoch's where
/// `of_whole_epoch`), each of its epochs named where it ran more than one.
std::string epoch_cut_note(const RunResult& run, bool of_whole_epoch);
/// A row evaluated on the first --max-eval-batches test batches only: how many of the test set's images.
std::string eval_cut_note(const RunResult& run);
/// A row whose every step was warm-up measured no steady figure, and so judged no straggler.
std::string no_steady_steps(const RunResult& run);

}  // namespace ddpbench
