#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "reports/report_sections.hpp"
#include "reports/reporter.hpp"
#include "support/sample_results.hpp"

namespace ddpbench {
namespace {

// The cells of a Markdown table's rows, header first, in order (no escaped pipes in them here).
std::vector<std::string> markdown_cells(const std::string& md) {
  std::vector<std::string> cells;
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0 || line.find("---") != std::string::npos) continue;
    for (std::size_t at = 2; at < line.size();) {
      const std::size_t bar = line.find(" |", at);
      cells.push_back(line.substr(at, bar - at));
      at = bar + 3;
    }
  }
  return cells;
}

// The text of every <th> and <td> of an HTML table, tags inside them dropped.
std::vector<std::string> html_cells(const std::string& html, const char* tag) {
  std::vector<std::string> cells;
  const std::regex cell(std::string("<") + tag + ">(.*?)</" + tag + ">");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), cell); it != std::sregex_iterator(); ++it) {
    cells.push_back(std::regex_replace((*it)[1].str(), std::regex("<[^>]*>"), ""));
  }
  return cells;
}

Section sample_section() {
  Section s;
  s.title = "timings";
  s.intro = "Two rows; `code` in the intro.";
  s.columns = {{"row", Align::left}, {"time", Align::right}, {"rate", Align::right}, {"ratio", Align::right},
               {"status", Align::left}};
  Cell spread = value_cell(CellFormat::seconds, 0.0123);
  spread.suffix = " (12.00–12.60)";
  s.rows.push_back({text_cell("first"), spread, value_cell(CellFormat::rate, 3846.0),
                    value_cell(CellFormat::ratio, 1.0714), text_cell("skipped " + s.notes.mark("needs 4 GPUs"))});
  s.rows.push_back({text_cell("second", " (2 nodes)"), value_cell(CellFormat::seconds, 13.2),
                    value_cell(CellFormat::rate, kNotMeasured), value_cell(CellFormat::ratio, kNotMeasured),
                    text_cell("ok")});
  return s;
}

// One description, two formats: the same cells, in the same order, formatted from the values
// only when printed; a suffix (a median's range) in both.
TEST(ReportSections, ASectionRendersTheSameCellsInTheSameOrderInBothFormats) {
  const Section s = sample_section();
  const std::string md = markdown_section(s);
  const std::string html = html_section(s);
  const std::vector<std::string> expected = {"first", "12.3 ms (12.00–12.60)", "3,846", "1.07x", "skipped [1]",
                                             "second (2 nodes)", "13.20 s", "-", "-", "ok"};
  std::vector<std::string> from_md = markdown_cells(md);
  ASSERT_GE(from_md.size(), 5u) << md;
  from_md.erase(from_md.begin(), from_md.begin() + 5);  // the header row
  ASSERT_EQ(from_md.size(), expected.size()) << md;
  EXPECT_EQ(from_md, expected) << md;
  EXPECT_EQ(html_cells(html, "td"), expected) << html;
  EXPECT_EQ(html_cells(html, "th"), (std::vector<std::string>{"row", "time", "rate", "ratio", "status"})) << html;
  EXPECT_NE(md.find("| 12.3 ms (12.00–12.60) |"), std::string::npos) << md;
  EXPECT_NE(html.find("<td>12.3 ms (12.00–12.60)</td>"), std::string::npos) << html;
  // Alignment is the Markdown's rule row; the notes the cells marked follow the table in both.
  EXPECT_NE(md.find("| --- | ---: | ---: | ---: | --- |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\n- [1] needs 4 GPUs\n"), std::string::npos) << md;
  EXPECT_NE(html.find("<li>[1] needs 4 GPUs</li>"), std::string::npos) << html;
  EXPECT_NE(md.find("\n## timings\n\nTwo rows; `code` in the intro.\n\n| row |"), std::string::npos) << md;
  EXPECT_NE(html.find("<h2>timings</h2>\n<p>Two rows; <code>code</code> in the intro.</p>\n"), std::string::npos)
      << html;
}

// Free text is escaped for each format; a link is a link in both.
TEST(ReportSections, CellsAreEscapedForEachFormatAndLinksLinkInBoth) {
  Section s;
  s.title = "escapes";
  s.columns = {{"text", Align::left}, {"files", Align::left}};
  Cell files;
  files.links = {{"a.json", "rows/faithful/a.json"}, {"b.json", "rows/faithful/b.json"}};
  s.rows.push_back({text_cell("a|b <c> & \"d\""), files});
  s.items = {"one | two"};
  const std::string md = markdown_section(s);
  const std::string html = html_section(s);
  EXPECT_NE(md.find("| a\\|b <c> & \"d\" | [a.json](rows/faithful/a.json) [b.json](rows/faithful/b.json) |"),
            std::string::npos)
      << md;
  EXPECT_NE(html.find("<td>a|b &lt;c&gt; &amp; &quot;d&quot;</td><td><a href=\"rows/faithful/a.json\">a.json</a> "
                      "<a href=\"rows/faithful/b.json\">b.json</a></td>"),
            std::string::npos)
      << html;
  EXPECT_NE(md.find("- one \\| two\n"), std::string::npos) << md;
  EXPECT_NE(html.find("<ul>\n<li>one | two</li>\n</ul>\n"), std::string::npos) << html;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The reporters print the section list and nothing else: every section a format shows is a
// heading of its report, in the list's order (the page's by html_place), so a section added
// to the list is in both.
TEST(ReportSections, EachReportIsTheSectionListInItsOrder) {
  const ResultDocument doc = testing::sample_sweep_document();
  const auto rows = summarize_sweep(doc);
  std::vector<Section> sections = report_sections(doc, rows);
  const std::string md = make_markdown_reporter()->render(doc);
  const std::string html = make_html_reporter()->render(doc);
  std::size_t in_md = 0, in_html = 0, md_at = 0;
  for (const Section& s : sections) {
    if (!s.in_markdown) continue;
    ++in_md;
    const std::size_t at = md.find("\n## " + s.title + "\n");
    ASSERT_NE(at, std::string::npos) << s.title;
    EXPECT_GT(at, md_at) << s.title << " out of the list's order";
    md_at = at;
  }
  std::stable_sort(sections.begin(), sections.end(),
                   [](const Section& a, const Section& b) { return a.html_place < b.html_place; });
  std::size_t html_at = 0;
  for (const Section& s : sections) {
    if (!s.in_html) continue;
    ++in_html;
    const std::size_t at = html.find("<h2>" + s.html_title.value_or(s.title) + "</h2>");
    ASSERT_NE(at, std::string::npos) << s.title;
    EXPECT_GT(at, html_at) << s.title << " out of the page's order";
    html_at = at;
  }
  EXPECT_EQ(occurrences(md, "\n## "), in_md) << md;
  EXPECT_EQ(occurrences(html, "<h2>"), in_html);
  // Both formats show the mode tables and the compute table; each has its own parts.
  EXPECT_GE(in_md, 5u);
  EXPECT_GE(in_html, 7u);
  const auto compute = std::find_if(sections.begin(), sections.end(), [](const Section& s) { return s.title == "compute"; });
  ASSERT_NE(compute, sections.end());
  EXPECT_TRUE(compute->in_markdown && compute->in_html);
  ASSERT_EQ(compute->rows.size(), 4u);
  EXPECT_EQ(compute->rows[0][3].format, CellFormat::flop);
  EXPECT_DOUBLE_EQ(compute->rows[0][3].value, 1.0e9) << "the value kept as data, in FLOP";
}

}  // namespace
}  // namespace ddpbench
