#include "reports/markdown_report.hpp"

#include <sstream>

#include "harness/base/units.hpp"
#include "reports/report_sections.hpp"
#include "reports/reporter.hpp"
#include "reports/straggler_judgement.hpp"
#include "reports/table_notes.hpp"

namespace ddpbench {

// A cell must not break the table: pipes and newlines in free text are escaped.
std::string markdown_table_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// The notes a table's cells marked, as a list under it.
std::string notes_under(const TableNotes& notes) {
  std::string out;
  for (std::size_t i = 0; i < notes.texts().size(); ++i) {
    out += (i == 0 ? "\n" : "") + std::string("- [") + std::to_string(i + 1) + "] " +
           markdown_table_cell(notes.texts()[i]) + "\n";
  }
  return out;
}

// The straggler in words: which rank, how much longer than the fastest, and what held it.
std::string straggler_words(const RunResult& r) {
  std::string words = "rank " + std::to_string(r.slowest_rank) + " takes " + format_fixed(r.rank_spread, 2) +
                      "x the fastest rank's own time per step (compute and data), held by its " +
                      (r.straggler_cause == "data" ? std::string("loader") : std::string("own compute"));
  if (r.straggler_of_steps > 0) {
    words += ", the slowest in " + std::to_string(r.straggler_steps) + " of " + std::to_string(r.straggler_of_steps) +
             " steady steps";
  }
  return words + "; the others wait for it";
}

}  // namespace

std::string markdown_runs_table(const std::vector<RunResult>& runs) {
  std::ostringstream md;
  md << "| row | strategy | processes | device | data | status | train time | images/s"
        " | steady images/s | step p50 | step p90 | test accuracy | final loss | peak memory |\n"
     << "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  TableNotes reasons;
  for (const auto& r : runs) {
    const std::string placement = placement_text(r);
    md << "| " << markdown_table_cell(r.name) << " | " << markdown_table_cell(r.strategy) << " | " << r.world_size
       << (placement.empty() ? "" : " (" + placement + ")") << " | " << markdown_table_cell(r.device) << " | "
       << markdown_table_cell(r.dataset) << " | " << status_cell(r.status, r.reason, reasons) << " | "
       << format_seconds(r.train_time_s) << " | " << format_rate(r.images_per_s) << " | "
       << format_rate(r.steady_images_per_s) << " | " << format_seconds(r.step_time_s.p50) << " | "
       << format_seconds(r.step_time_s.p90) << " | " << format_percent(r.test_accuracy) << " | "
       << format_fixed(r.final_loss, 3) << " | " << format_bytes(r.peak_memory_bytes) << " |\n";
  }
  md << notes_under(reasons);
  std::ostringstream notes;
  for (const auto& r : runs) {
    if (r.status != RunStatus::ok) continue;
    if (r.epoch_cut) {
      notes << "- " << markdown_table_cell(r.name) << ": " << epoch_cut_note(r, true) << "\n";
    }
    if (r.eval_cut) notes << "- " << markdown_table_cell(r.name) << ": " << eval_cut_note(r) << "\n";
    if (r.steps > 0 && r.steps <= r.warmup_steps) {
      notes << "- " << markdown_table_cell(r.name) << ": " << no_steady_steps(r) << "\n";
    }
    if (r.straggler) {
      notes << "- " << markdown_table_cell(r.name) << ": straggler: " << straggler_words(r) << "\n";
    } else if (const std::string why = straggler_not_judged(r); !why.empty()) {
      notes << "- " << markdown_table_cell(r.name) << ": straggler: " << why << "\n";
    }
    for (const auto& note : strategy_notes(r)) {
      notes << "- " << markdown_table_cell(r.name) << ": " << markdown_table_cell(note) << "\n";
    }
    if (r.trace.traced()) {
      notes << "- " << markdown_table_cell(r.name) << ": " << markdown_table_cell(trace_note(r)) << "\n";
    }
  }
  if (!notes.str().empty()) md << "\n" << notes.str();
  return md.str();
}

namespace {

std::string environment_line(const Environment& e) {
  std::string hw;
  if (e.gpus.empty()) {
    hw = "no GPU; CPU " + e.cpu_model + " (" + std::to_string(e.cpu_cores) + " cores)";
  } else {
    hw = std::to_string(e.gpus.size()) + " x " + e.gpus.front().name;
    if (!e.driver_version.empty()) hw += ", driver " + e.driver_version;
  }
  std::string line = hw + "; CUDA " + (e.cuda_runtime_version.empty() ? "-" : e.cuda_runtime_version) + ", cuDNN " +
                     (e.cudnn_version.empty() ? "-" : e.cudnn_version) + ", NCCL " +
                     (e.nccl_version.empty() ? "-" : e.nccl_version) + ", LibTorch " + e.libtorch_version +
                     "; host " + e.host + "; ddpbench " + e.git_revision;
  return line;
}

std::string page_head(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  std::string md = "# ddpbench: " + doc.sweep->preset + "\n\n";
  if (!doc.sweep->note.empty()) md += "**" + markdown_table_cell(doc.sweep->note) + "**\n\n";
  md += environment_line(doc.environment) + "\n";
  if (!rows.empty() && !rows.front().dataset.empty()) md += "\nData: " + rows.front().dataset + ".\n";
  return md;
}

std::string markdown_cell(const Cell& c) {
  if (c.links.empty()) return markdown_table_cell(formatted(c) + c.suffix);
  std::string links;
  for (const auto& link : c.links) {
    links += (links.empty() ? "" : " ") + ("[" + markdown_table_cell(link.text) + "](" + link.href + ")");
  }
  return links;
}

std::string markdown_table(const Section& s) {
  if (s.columns.empty()) return "";
  std::string header = "|", rule = "|";
  for (const auto& column : s.columns) {
    header += " " + markdown_table_cell(column.header) + " |";
    rule += column.align == Align::right ? " ---: |" : " --- |";
  }
  std::string md = header + "\n" + rule + "\n";
  for (const auto& row : s.rows) {
    md += "|";
    for (const auto& c : row) md += " " + markdown_cell(c) + " |";
    md += "\n";
  }
  return md + notes_under(s.notes);
}

class MarkdownReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& doc, const std::vector<RowSummary>& rows) const override {
    if (!doc.sweep) return markdown_runs_table(doc.runs);
    std::string md = page_head(doc, rows);
    for (const Section& section : report_sections(doc, rows)) {
      if (section.in_markdown) md += markdown_section(section);
    }
    return md;
  }
  [[nodiscard]] std::string do_file_name() const override { return "results.md"; }
  [[nodiscard]] bool do_wrote(std::string_view text) const override { return text.starts_with(kSweepReportMarker); }
  [[nodiscard]] std::string do_file_text(std::string report) const override {
    return std::string(kSweepReportMarker) + report;
  }
};

}  // namespace

std::string markdown_section(const Section& s) {
  std::string md = "\n## " + markdown_table_cell(s.title) + "\n\n";
  const bool listed = !s.columns.empty() || !s.items.empty();
  if (!s.intro.empty()) md += s.intro + (listed ? "\n\n" : "\n");
  md += markdown_table(s);
  for (const auto& item : s.items) md += "- " + markdown_table_cell(item) + "\n";
  return md + s.markdown_text;
}

std::unique_ptr<Reporter> make_markdown_reporter() { return std::make_unique<MarkdownReporter>(); }

}  // namespace ddpbench
