#include <algorithm>
#include <sstream>
#include <string_view>

#include "reports/html_parts.hpp"
#include "reports/report_sections.hpp"
#include "reports/reporter.hpp"

namespace ddpbench {
namespace {

// An intro's `code` spans as <code>, in text already escaped.
std::string with_code(const std::string& text) {
  std::string out;
  bool open = false;
  for (char c : text) {
    if (c == '`') {
      out += open ? "</code>" : "<code>";
      open = !open;
    } else {
      out += c;
    }
  }
  return out;
}

std::string html_cell(const Cell& cell) {
  if (cell.links.empty()) return html_escape(formatted(cell) + cell.suffix);
  std::string links;
  for (const auto& link : cell.links) {
    links += (links.empty() ? "" : " ") + std::string("<a href=\"") + html_escape(link.href) + "\">" +
             html_escape(link.text) + "</a>";
  }
  return links;
}

std::string html_table(const Section& s) {
  std::string html = html_table_open() + "<tr>";
  for (const auto& column : s.columns) html += "<th>" + html_escape(column.header) + "</th>";
  html += "</tr>\n";
  for (const auto& row : s.rows) {
    html += "<tr>";
    for (const auto& cell : row) html += "<td>" + html_cell(cell) + "</td>";
    html += "</tr>\n";
  }
  return html + html_table_close(s.notes);
}

// How every page opens, to its title.
constexpr std::string_view kDoctype = "<!DOCTYPE html>\n";
constexpr std::string_view kPageOpening =
    "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
    "<title>";

std::string page_head(const ResultDocument& doc) {
  const std::string title = doc.sweep ? "ddpbench: " + doc.sweep->preset : "ddpbench results";
  std::ostringstream html;
  html << kPageOpening << html_escape(title) << "</title>\n"
       // The window's width, not a fixed column: tables as wide as their content, numbers never
       // wrapped (a wide table scrolls in its own box), prose held to a readable measure.
       << "<style>body{font-family:sans-serif;margin:1em 2em}p,ul{max-width:60em}"
          ".wide{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:1em 0}"
          "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}td{white-space:nowrap}"
          "td:first-child,th:first-child{text-align:left}ul.notes{font-size:.9em;margin-top:0}"
          "p,li{overflow-wrap:anywhere}"
          "svg text{font-size:12px;font-family:sans-serif}svg{display:block;max-width:100%;margin:1em 0}"
          ".note{font-weight:bold}</style>\n</head>\n<body>\n"
       << "<h1>" << html_escape(title) << "</h1>\n";
  if (doc.sweep && !doc.sweep->note.empty()) html << "<p class=\"note\">" << html_escape(doc.sweep->note) << "</p>\n";
  const Environment& e = doc.environment;
  html << "<p>" << html_escape(e.gpus.empty() ? "no GPU; " + e.cpu_model : e.gpus.front().name) << "; LibTorch "
       << html_escape(e.libtorch_version) << "; CUDA " << html_escape(e.cuda_runtime_version) << "; ddpbench "
       << html_escape(e.git_revision) << "</p>\n";
  return html.str();
}

class HtmlReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& doc, const std::vector<RowSummary>& rows) const override {
    std::vector<Section> sections = report_sections(doc, rows);
    std::stable_sort(sections.begin(), sections.end(),
                     [](const Section& a, const Section& b) { return a.html_place < b.html_place; });
    std::string html = page_head(doc);
    for (const Section& section : sections) {
      if (section.in_html) html += html_section(section);
    }
    return html + "</body>\n</html>\n";
  }
  [[nodiscard]] std::string do_file_name() const override { return "results.html"; }
  // The marker after the doctype (a comment before it is a quirk some browsers read as such).
  [[nodiscard]] bool do_wrote(std::string_view text) const override {
    return text.starts_with(kDoctype) && text.substr(kDoctype.size()).starts_with(kSweepReportMarker);
  }
  [[nodiscard]] std::string do_file_text(std::string report) const override {
    return report.insert(kDoctype.size(), kSweepReportMarker);
  }
};

}  // namespace

std::string html_section(const Section& s) {
  std::string html = "<h2>" + html_escape(s.html_title.value_or(s.title)) + "</h2>\n";
  if (const std::string intro = s.html_intro.value_or(s.intro); !intro.empty()) {
    html += "<p>" + with_code(html_escape(intro)) + "</p>\n";
  }
  if (s.html_figure) html += s.html_figure();
  if (s.table_in_html && !s.columns.empty()) html += html_table(s);
  if (s.items.empty()) return html;
  html += "<ul>\n";
  for (const auto& item : s.items) html += "<li>" + html_escape(item) + "</li>\n";
  return html + "</ul>\n";
}

std::unique_ptr<Reporter> make_html_reporter() { return std::make_unique<HtmlReporter>(); }

}  // namespace ddpbench
