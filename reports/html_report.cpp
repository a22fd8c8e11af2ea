#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "harness/base/units.hpp"
#include "reports/reporter.hpp"

namespace ddpbench {
namespace {

// Well-formed XHTML, so a test can parse it as XML: every text goes through escape().
std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string px(double v) { return format_fixed(v, 1); }

const char* colour(const std::string& series) {
  if (series == "tutorial") return "#9e9e9e";
  if (series == "controlled") return "#e8710a";
  return "#1a73e8";
}

std::vector<std::string> row_names(const std::vector<RowSummary>& rows) {
  std::vector<std::string> names;
  for (const auto& r : rows) {
    if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
  }
  return names;
}

// Horizontal bars: per row, the tutorial's epoch time and this run's, one bar per mode.
std::string time_chart(const std::vector<RowSummary>& rows) {
  const auto names = row_names(rows);
  const auto modes = sweep_modes(rows);
  std::vector<std::string> series{"tutorial"};
  series.insert(series.end(), modes.begin(), modes.end());
  auto value = [&](const std::string& name, const std::string& s) {
    for (const auto& r : rows) {
      if (r.name != name) continue;
      if (s == "tutorial") return r.tutorial_seconds;
      if (r.mode == s) return r.train_time_s;
    }
    return kNotMeasured;
  };
  double largest = 0;
  for (const auto& n : names) {
    for (const auto& s : series) largest = std::max(largest, std::isfinite(value(n, s)) ? value(n, s) : 0.0);
  }
  if (largest <= 0) largest = 1;
  const double label_w = 150, bar_w = 470, bar_h = 14, gap = 12, legend_h = 24;
  const double group_h = bar_h * static_cast<double>(series.size()) + gap;
  const double height = legend_h + group_h * static_cast<double>(names.size()) + 10;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"" << px(height) << "\" role=\"img\">\n"
      << "<title>Epoch time per row, seconds: the tutorial's beside this run's</title>\n";
  for (std::size_t s = 0; s < series.size(); ++s) {
    const double x = label_w + 130.0 * static_cast<double>(s);
    svg << "<rect x=\"" << px(x) << "\" y=\"4\" width=\"12\" height=\"12\" fill=\"" << colour(series[s]) << "\"/>"
        << "<text x=\"" << px(x + 16) << "\" y=\"14\">" << escape(series[s]) << "</text>\n";
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double top = legend_h + group_h * static_cast<double>(i);
    svg << "<text x=\"0\" y=\"" << px(top + group_h / 2) << "\">" << escape(names[i]) << "</text>\n";
    for (std::size_t s = 0; s < series.size(); ++s) {
      const double v = value(names[i], series[s]);
      if (!std::isfinite(v)) continue;
      const double y = top + bar_h * static_cast<double>(s);
      const double w = bar_w * v / largest;
      svg << "<rect x=\"" << px(label_w) << "\" y=\"" << px(y) << "\" width=\"" << px(w) << "\" height=\""
          << px(bar_h - 2) << "\" fill=\"" << colour(series[s]) << "\"/>"
          << "<text x=\"" << px(label_w + w + 4) << "\" y=\"" << px(y + bar_h - 4) << "\">" << format_fixed(v, 2)
          << " s</text>\n";
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

// Throughput against GPU count: one point per row and mode, and per mode the ideal line
// (the baseline's throughput times the GPU count); the tutorial's points, hollow, as
// 50,000 images over its seconds.
std::string scaling_chart(const std::vector<RowSummary>& rows, const std::string& baseline) {
  struct Point { double x, y; std::string series, label; };
  std::vector<Point> points;
  std::map<std::string, double> base;
  double max_x = 1, max_y = 0;
  for (const auto& r : rows) {
    max_x = std::max(max_x, static_cast<double>(r.devices));
    if (r.mode == rows.front().mode && std::isfinite(r.tutorial_seconds)) {
      points.push_back({static_cast<double>(r.devices), 50000.0 / r.tutorial_seconds, "tutorial", r.name});
    }
  }
  for (const auto& r : rows) {
    const double y = r.headline_images_per_s();
    if (std::isfinite(y)) points.push_back({static_cast<double>(r.devices), y, r.mode, r.name});
    if (r.name == baseline && std::isfinite(y)) base[r.mode] = y;
  }
  for (const auto& p : points) max_y = std::max(max_y, p.y);
  for (const auto& [mode, y] : base) max_y = std::max(max_y, y * max_x);
  if (max_y <= 0) max_y = 1;
  const double left = 80, top = 40, w = 560, h = 260;
  auto sx = [&](double x) { return left + w * (x - 1) / std::max(1.0, max_x - 1); };
  auto sy = [&](double y) { return top + h - h * y / max_y; };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"" << px(top + h + 50) << "\" role=\"img\">\n"
      << "<title>Images per second against GPU count, with the ideal line</title>\n";
  std::vector<std::string> legend{"tutorial"};
  for (const auto& mode : sweep_modes(rows)) legend.push_back(mode);
  for (std::size_t s = 0; s < legend.size(); ++s) {
    const double x = left + 130.0 * static_cast<double>(s);
    svg << "<circle cx=\"" << px(x + 6) << "\" cy=\"10\" r=\"5\" " << (legend[s] == "tutorial" ? "fill=\"none\" stroke" : "fill")
        << "=\"" << colour(legend[s]) << "\"/><text x=\"" << px(x + 16) << "\" y=\"14\">" << escape(legend[s]) << "</text>\n";
  }
  for (int tick = 0; tick <= 4; ++tick) {
    const double y = max_y * tick / 4.0;
    svg << "<line x1=\"" << px(left) << "\" y1=\"" << px(sy(y)) << "\" x2=\"" << px(left + w) << "\" y2=\"" << px(sy(y))
        << "\" stroke=\"#e0e0e0\"/><text x=\"" << px(left - 8) << "\" y=\"" << px(sy(y) + 4)
        << "\" text-anchor=\"end\">" << format_rate(y) << "</text>\n";
  }
  svg << "<line x1=\"" << px(left) << "\" y1=\"" << px(top + h) << "\" x2=\"" << px(left + w) << "\" y2=\"" << px(top + h)
      << "\" stroke=\"#444\"/><line x1=\"" << px(left) << "\" y1=\"" << px(top) << "\" x2=\"" << px(left) << "\" y2=\""
      << px(top + h) << "\" stroke=\"#444\"/>\n";
  for (int gpus = 1; gpus <= static_cast<int>(max_x); ++gpus) {
    svg << "<text x=\"" << px(sx(gpus)) << "\" y=\"" << px(top + h + 16) << "\" text-anchor=\"middle\">" << gpus << "</text>\n";
  }
  svg << "<text x=\"" << px(left + w / 2) << "\" y=\"" << px(top + h + 36) << "\" text-anchor=\"middle\">GPUs</text>\n"
      << "<text x=\"" << px(left - 8) << "\" y=\"" << px(top - 12) << "\" text-anchor=\"end\">images/s</text>\n";
  for (const auto& [mode, y] : base) {
    svg << "<line x1=\"" << px(sx(1)) << "\" y1=\"" << px(sy(y)) << "\" x2=\"" << px(sx(max_x)) << "\" y2=\""
        << px(sy(y * max_x)) << "\" stroke=\"" << colour(mode) << "\" stroke-dasharray=\"6 4\"/>"
        << "<text x=\"" << px(sx(max_x)) << "\" y=\"" << px(sy(y * max_x) - 6) << "\" text-anchor=\"end\">ideal ("
        << escape(mode) << ")</text>\n";
  }
  for (const auto& p : points) {
    const bool hollow = p.series == "tutorial";
    svg << "<circle cx=\"" << px(sx(p.x)) << "\" cy=\"" << px(sy(p.y)) << "\" r=\"" << (hollow ? "7" : "5") << "\" "
        << (hollow ? "fill=\"none\" stroke-width=\"2\" stroke" : "fill") << "=\"" << colour(p.series) << "\"><title>"
        << escape(p.label + " (" + p.series + "): " + format_rate(p.y) + " images/s") << "</title></circle>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

class HtmlReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& doc, const std::vector<RowSummary>& rows) const override {
    std::ostringstream html;
    const std::string title = doc.sweep ? "ddpbench: " + doc.sweep->preset : "ddpbench results";
    html << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
         << "<meta charset=\"utf-8\"/>\n<title>" << escape(title) << "</title>\n"
         << "<style>body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}td:first-child,th:first-child{text-align:left}"
            "svg text{font-size:12px;font-family:sans-serif}.note{font-weight:bold}</style>\n</head>\n<body>\n"
         << "<h1>" << escape(title) << "</h1>\n";
    if (doc.sweep && !doc.sweep->note.empty()) html << "<p class=\"note\">" << escape(doc.sweep->note) << "</p>\n";
    const Environment& e = doc.environment;
    html << "<p>" << escape(e.gpus.empty() ? "no GPU; " + e.cpu_model : e.gpus.front().name) << "; LibTorch "
         << escape(e.libtorch_version) << "; CUDA " << escape(e.cuda_runtime_version) << "; ddpbench "
         << escape(e.git_revision) << "</p>\n";

    for (const auto& mode : sweep_modes(rows)) {
      html << "<h2>" << escape(mode.empty() ? "rows" : mode + " mode") << "</h2>\n<table>\n<tr><th>row</th><th>GPUs</th>"
              "<th>tutorial</th><th>this run</th><th>speed-up</th><th>scaling efficiency</th><th>images/s</th>"
              "<th>steady images/s</th><th>test accuracy</th><th>peak memory</th><th>status</th></tr>\n";
      for (const auto& r : rows) {
        if (r.mode != mode) continue;
        html << "<tr><td>" << escape(r.name) << "</td><td>" << r.devices << "</td><td>"
             << format_seconds(r.tutorial_seconds) << "</td><td>" << format_seconds(r.train_time_s) << "</td><td>"
             << (std::isfinite(r.speedup) ? format_fixed(r.speedup, 2) + "x" : "-") << "</td><td>"
             << format_percent(r.scaling_efficiency) << "</td><td>" << format_rate(r.images_per_s) << "</td><td>"
             << format_rate(r.steady_images_per_s) << "</td><td>" << format_percent(r.test_accuracy) << "</td><td>"
             << format_bytes(r.peak_memory_bytes) << "</td><td>" << status_name(r.status)
             << (r.status == RunStatus::ok ? "" : ": " + escape(r.reason)) << "</td></tr>\n";
      }
      html << "</table>\n";
    }
    if (std::any_of(rows.begin(), rows.end(), [](const RowSummary& r) { return r.pytorch.has_value(); })) {
      html << "<h2>ddpbench against PyTorch</h2>\n<p>Each row beside PyTorch's own implementation of it on the same "
              "data, initial weights and clock; a ratio above 1.00x means ddpbench is faster.</p>\n<table>\n"
              "<tr><th>row</th><th>mode</th><th>ddpbench</th><th>PyTorch</th><th>time ratio</th>"
              "<th>ddpbench steady images/s</th><th>PyTorch steady images/s</th><th>throughput ratio</th>"
              "<th>PyTorch status</th></tr>\n";
      auto ratio = [](double v) { return std::isfinite(v) ? format_fixed(v, 2) + "x" : std::string("-"); };
      for (const auto& r : rows) {
        if (!r.pytorch) continue;
        const auto& t = *r.pytorch;
        html << "<tr><td>" << escape(r.name) << "</td><td>" << escape(r.mode) << "</td><td>"
             << format_seconds(r.train_time_s) << "</td><td>" << format_seconds(t.train_time_s) << "</td><td>"
             << ratio(r.vs_pytorch_train_time) << "</td><td>" << format_rate(r.steady_images_per_s) << "</td><td>"
             << format_rate(t.steady_images_per_s) << "</td><td>" << ratio(r.vs_pytorch_steady) << "</td><td>"
             << status_name(t.status) << (t.status == RunStatus::ok ? "" : ": " + escape(t.reason)) << "</td></tr>\n";
      }
      html << "</table>\n";
    }
    if (!rows.empty()) {
      html << "<h2>Epoch time per row</h2>\n" << time_chart(rows)
           << "<h2>Throughput against GPU count</h2>\n"
           << scaling_chart(rows, doc.sweep ? doc.sweep->baseline_row : rows.front().name);
    }
    html << "</body>\n</html>\n";
    return html.str();
  }
  [[nodiscard]] std::string do_file_name() const override { return "results.html"; }
};

}  // namespace

std::unique_ptr<Reporter> make_html_reporter() { return std::make_unique<HtmlReporter>(); }

}  // namespace ddpbench
