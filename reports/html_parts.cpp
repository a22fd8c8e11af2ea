#include "reports/html_parts.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "harness/base/units.hpp"

namespace ddpbench {

// Well-formed XHTML, so a test can parse it as XML: every text goes through html_escape().
std::string html_escape(const std::string& text) {
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

namespace {

std::string px(double v) { return format_fixed(v, 1); }

}  // namespace

// A table scrolls sideways inside its own box where the window is narrower than it, so that
// the page never does; the notes its cells marked follow it.
std::string html_table_open() { return "<div class=\"wide\"><table>\n"; }
std::string html_table_close(const TableNotes& notes) {
  std::string out = "</table></div>\n";
  if (notes.empty()) return out;
  out += "<ul class=\"notes\">\n";
  for (std::size_t i = 0; i < notes.texts().size(); ++i) {
    out += "<li>[" + std::to_string(i + 1) + "] " + html_escape(notes.texts()[i]) + "</li>\n";
  }
  return out + "</ul>\n";
}

namespace {

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

// Charts are inline SVG, each with a title, axis labels and units; series differ by shape
// or pattern as well as colour, so they read in grey.
constexpr double kChartWidth = 720;
constexpr double kLabelWidth = 170;  // row labels at the left
constexpr double kPlotWidth = 430;   // bars and axes; values are written to their right

// An axis for positive values: linear from 0, or logarithmic (whole decades) where the
// values differ by more than 10x, so small rows do not lie flat on zero.
struct Axis {
  bool log = false;
  double low = 0, high = 1;
  [[nodiscard]] double at(double v) const {
    if (!log) return kPlotWidth * v / high;
    return kPlotWidth * (std::log10(std::max(v, low)) - std::log10(low)) / (std::log10(high) - std::log10(low));
  }
  [[nodiscard]] std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      for (double t = low; t <= high * 1.0001; t *= 10) out.push_back(t);
    } else {
      for (int i = 0; i <= 4; ++i) out.push_back(high * i / 4.0);
    }
    return out;
  }
};

Axis axis_for(const std::vector<double>& values) {
  double lo = 0, hi = 0;
  for (double v : values) {
    if (!std::isfinite(v) || v <= 0) continue;
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  }
  Axis axis;
  if (hi <= 0) return axis;
  if (hi / lo > 10) {
    axis.log = true;
    axis.low = std::pow(10.0, std::floor(std::log10(lo)));
    axis.high = std::pow(10.0, std::ceil(std::log10(hi)));
  } else {
    axis.high = hi * 1.05;
  }
  return axis;
}

std::string svg_open(double height, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(kChartWidth) + "\" height=\"" + px(height) +
         "\" viewBox=\"0 0 " + px(kChartWidth) + " " + px(height) + "\" role=\"img\">\n<title>" + html_escape(title) +
         "</title>\n"
         "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fdd835\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#5d4037\" stroke-width=\"2\"/></pattern>"
         "<pattern id=\"dots\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\"><rect width=\"5\" height=\"5\" "
         "fill=\"#ef9a9a\"/><circle cx=\"2.5\" cy=\"2.5\" r=\"1.2\" fill=\"#b71c1c\"/></pattern></defs>\n";
}

// The value axis below a plot, with ticks and its label (units included).
std::string value_axis(const Axis& axis, double y, const std::string& label,
                       const std::function<std::string(double)>& tick_text) {
  std::ostringstream svg;
  svg << "<line x1=\"" << px(kLabelWidth) << "\" y1=\"" << px(y) << "\" x2=\"" << px(kLabelWidth + kPlotWidth)
      << "\" y2=\"" << px(y) << "\" stroke=\"#444\"/>\n";
  for (double t : axis.ticks()) {
    const double x = kLabelWidth + axis.at(t);
    svg << "<line x1=\"" << px(x) << "\" y1=\"" << px(y) << "\" x2=\"" << px(x) << "\" y2=\"" << px(y + 4)
        << "\" stroke=\"#444\"/><text x=\"" << px(x) << "\" y=\"" << px(y + 16) << "\" text-anchor=\"middle\">"
        << html_escape(tick_text(t)) << "</text>\n";
  }
  svg << "<text x=\"" << px(kLabelWidth + kPlotWidth / 2) << "\" y=\"" << px(y + 34) << "\" text-anchor=\"middle\">"
      << html_escape(label + (axis.log ? " (log scale)" : "")) << "</text>\n";
  return svg.str();
}

std::string row_label(const RowSummary& r, bool with_mode) {
  return with_mode ? ddpbench::row_label(r.name, r.mode) : r.name;
}

}  // namespace

// Horizontal bars: per row, the tutorial's epoch time and this run's, one bar per mode; a
// log axis where the rows differ by more than 10x.
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
  std::vector<double> values;
  for (const auto& n : names) {
    for (const auto& s : series) values.push_back(value(n, s));
  }
  const Axis axis = axis_for(values);
  const double bar_h = 14, gap = 12, legend_h = 24;
  const double group_h = bar_h * static_cast<double>(series.size()) + gap;
  const double plot_h = group_h * static_cast<double>(names.size());
  std::ostringstream svg;
  svg << svg_open(legend_h + plot_h + 50, "Epoch time per row, seconds: the tutorial's beside this run's");
  for (std::size_t s = 0; s < series.size(); ++s) {
    const double x = kLabelWidth + 130.0 * static_cast<double>(s);
    svg << "<rect x=\"" << px(x) << "\" y=\"4\" width=\"12\" height=\"12\" fill=\"" << colour(series[s])
        << "\"/><text x=\"" << px(x + 16) << "\" y=\"14\">" << html_escape(series[s]) << " (bar " << s + 1
        << ")</text>\n";
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double top = legend_h + group_h * static_cast<double>(i);
    svg << "<text x=\"0\" y=\"" << px(top + group_h / 2) << "\">" << html_escape(names[i]) << "</text>\n";
    for (std::size_t s = 0; s < series.size(); ++s) {
      const double v = value(names[i], series[s]);
      if (!std::isfinite(v)) continue;
      const double y = top + bar_h * static_cast<double>(s);
      const double w = std::max(1.0, axis.at(v));
      svg << "<rect class=\"mark\" x=\"" << px(kLabelWidth) << "\" y=\"" << px(y) << "\" width=\"" << px(w)
          << "\" height=\"" << px(bar_h - 2) << "\" fill=\"" << colour(series[s]) << "\"><title>"
          << html_escape(names[i] + ", " + series[s] + ": " + format_fixed(v, 2) + " s") << "</title></rect>"
          << "<text x=\"" << px(kLabelWidth + w + 4) << "\" y=\"" << px(y + bar_h - 4) << "\">"
          << format_fixed(v, 2) << " s " << html_escape(series[s]) << "</text>\n";
    }
  }
  svg << value_axis(axis, legend_h + plot_h + 2, "epoch time, s", [](double t) { return format_fixed(t, t < 10 ? 1 : 0); })
      << "</svg>\n";
  return svg.str();
}

namespace {

// Where a step's time goes, per row: stacked bars of the mean data, forward, backward
// compute, communication hidden under backward (it ran while backward did), exposed
// communication and optimizer time per step.
struct PhasePart {
  const char* name;
  const char* fill;
  double seconds;
};

std::vector<PhasePart> phase_parts(const PhaseSeconds& p) {
  const double hidden = p.hidden_comm_s();
  return {{"data", "#90caf9", p.data_s},
          {"forward", "#1565c0", p.forward_s},
          {"backward compute", "#2e7d32", std::max(0.0, p.backward_s - hidden)},
          {"communication hidden under backward", "url(#hatch)", hidden},
          {"exposed communication", "url(#dots)", p.comm_s},
          {"optimizer", "#6a1b9a", p.optimizer_s}};
}

}  // namespace

std::string phase_chart(const std::vector<RowSummary>& rows) {
  std::vector<const RowSummary*> shown;
  for (const auto& r : rows) {
    if (r.has_figures() && r.phase_s.total_s() > 0) shown.push_back(&r);
  }
  std::vector<double> totals;
  for (const auto* r : shown) totals.push_back(r->phase_s.total_s());
  // Rows more than 10x apart are drawn as shares of their own step, their totals written out.
  const Axis fit = axis_for(totals);
  const bool shares = fit.log;
  Axis axis;
  axis.high = shares ? 1.0 : fit.high;
  const double bar_h = 16, gap = 8, legend_h = 70;
  const double plot_h = (bar_h + gap) * static_cast<double>(shown.size());
  std::ostringstream svg;
  svg << svg_open(legend_h + plot_h + 50, "Where a step's time goes: mean time per step after warm-up, by phase");
  const auto legend = phase_parts(PhaseSeconds{});
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double x = static_cast<double>(i % 2) * 340.0;
    const double y = 4 + 20.0 * static_cast<double>(i / 2);
    svg << "<rect x=\"" << px(x) << "\" y=\"" << px(y) << "\" width=\"14\" height=\"14\" fill=\"" << legend[i].fill
        << "\" stroke=\"#333\"/><text x=\"" << px(x + 18) << "\" y=\"" << px(y + 12) << "\">" << i + 1 << ". "
        << legend[i].name << "</text>\n";
  }
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const RowSummary& r = *shown[i];
    const double y = legend_h + (bar_h + gap) * static_cast<double>(i);
    const double total = r.phase_s.total_s();
    svg << "<text x=\"0\" y=\"" << px(y + bar_h - 4) << "\">" << html_escape(row_label(r, true)) << "</text>\n";
    double x = kLabelWidth;
    std::size_t part_number = 0;
    for (const auto& part : phase_parts(r.phase_s)) {
      ++part_number;
      if (part.seconds <= 0) continue;
      const double w = axis.at(shares ? part.seconds / total : part.seconds);
      svg << "<rect class=\"mark\" x=\"" << px(x) << "\" y=\"" << px(y) << "\" width=\"" << px(w) << "\" height=\""
          << px(bar_h) << "\" fill=\"" << part.fill << "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>"
          << html_escape(row_label(r, true) + ": " + part.name + " " + format_seconds(part.seconds) + " per step (" +
                    format_percent(part.seconds / total) + ")")
          << "</title></rect>\n";
      if (w > 18) {
        svg << "<text x=\"" << px(x + w / 2) << "\" y=\"" << px(y + bar_h - 4) << "\" text-anchor=\"middle\" "
            << "fill=\"#000\" stroke=\"#fff\" stroke-width=\"2\" paint-order=\"stroke\">" << part_number << "</text>\n";
      }
      x += w;
    }
    svg << "<text x=\"" << px(kLabelWidth + (shares ? kPlotWidth : axis.at(total)) + 4) << "\" y=\""
        << px(y + bar_h - 4) << "\">" << format_seconds(total) << " per step</text>\n";
  }
  svg << value_axis(axis, legend_h + plot_h + 2, shares ? "share of the row's step (rows differ by more than 10x)"
                                                        : "mean time per step, ms",
                    [&](double t) { return shares ? format_percent(t) : format_fixed(t * 1e3, t * 1e3 < 10 ? 1 : 0); })
      << "</svg>\n";
  return svg.str();
}

namespace {

struct ScalingPoint {
  double devices, speedup, efficiency;
  std::string series, label;
};

// Each row's speed-up and efficiency in its mode, and the tutorial's once per row name, from
// the tutorial's time of `baseline`.
std::vector<ScalingPoint> scaling_points(const std::vector<RowSummary>& rows, const std::string& baseline) {
  std::vector<ScalingPoint> points;
  double tutorial_base = kNotMeasured;
  for (const auto& r : rows) {
    if (r.name == baseline && std::isfinite(r.tutorial_seconds)) tutorial_base = r.tutorial_seconds;
  }
  std::vector<std::string> tutorial_seen;
  for (const auto& r : rows) {
    if (std::isfinite(tutorial_base) && std::isfinite(r.tutorial_seconds) &&
        std::find(tutorial_seen.begin(), tutorial_seen.end(), r.name) == tutorial_seen.end()) {
      tutorial_seen.push_back(r.name);
      const double speedup = tutorial_base / r.tutorial_seconds;
      points.push_back({static_cast<double>(r.devices), speedup, speedup / static_cast<double>(r.devices), "tutorial",
                        r.name});
    }
    if (std::isfinite(r.speedup)) {
      points.push_back({static_cast<double>(r.devices), r.speedup, r.scaling_efficiency, r.mode, r.name});
    }
  }
  return points;
}

// The tutorial a hollow circle, controlled a square, any other mode a triangle.
std::string scaling_marker(const std::string& series, double x, double y, const std::string& tip) {
  std::ostringstream m;
  const std::string c = colour(series);
  if (series == "tutorial") {
    m << "<circle class=\"mark\" cx=\"" << px(x) << "\" cy=\"" << px(y) << "\" r=\"6\" fill=\"none\" stroke=\"" << c
      << "\" stroke-width=\"2\">";
  } else if (series == "controlled") {
    m << "<rect class=\"mark\" x=\"" << px(x - 5) << "\" y=\"" << px(y - 5) << "\" width=\"10\" height=\"10\" fill=\""
      << c << "\">";
  } else {
    m << "<path class=\"mark\" d=\"M" << px(x) << " " << px(y - 6) << " L" << px(x + 6) << " " << px(y + 5) << " L"
      << px(x - 6) << " " << px(y + 5) << " Z\" fill=\"" << c << "\">";
  }
  m << "<title>" << html_escape(tip) << "</title>"
    << (series == "tutorial" ? "</circle>" : series == "controlled" ? "</rect>" : "</path>") << "\n";
  return m.str();
}

// One panel of the scaling chart: speed-up (up to `y_max`) or, not `speedup`, efficiency.
struct ScalingPanel {
  bool speedup;
  double left, y_max, max_devices;
  static constexpr double kWidth = 260, kHeight = 220, kTop = 50;
  [[nodiscard]] double x(double devices) const { return left + kWidth * (devices - 1) / std::max(1.0, max_devices - 1); }
  [[nodiscard]] double y(double v) const { return kTop + kHeight - kHeight * std::min(v, y_max) / y_max; }
  [[nodiscard]] std::string axes() const;
  [[nodiscard]] std::string marks(const std::vector<ScalingPoint>& points) const;
};

std::string ScalingPanel::axes() const {
  std::ostringstream svg;
  svg << "<text x=\"" << px(left) << "\" y=\"" << px(kTop - 12) << "\">"
      << (speedup ? "speed-up (x, vs one device)" : "scaling efficiency (%)") << "</text>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    const double v = y_max * tick / 4.0;
    svg << "<line x1=\"" << px(left) << "\" y1=\"" << px(y(v)) << "\" x2=\"" << px(left + kWidth) << "\" y2=\""
        << px(y(v)) << "\" stroke=\"#e0e0e0\"/><text x=\"" << px(left - 6) << "\" y=\"" << px(y(v) + 4)
        << "\" text-anchor=\"end\">" << (speedup ? format_fixed(v, 1) : format_fixed(v * 100, 0)) << "</text>\n";
  }
  svg << "<line x1=\"" << px(left) << "\" y1=\"" << px(kTop + kHeight) << "\" x2=\"" << px(left + kWidth)
      << "\" y2=\"" << px(kTop + kHeight) << "\" stroke=\"#444\"/>\n";
  for (int devices = 1; devices <= static_cast<int>(max_devices); ++devices) {
    svg << "<text x=\"" << px(x(devices)) << "\" y=\"" << px(kTop + kHeight + 16) << "\" text-anchor=\"middle\">"
        << devices << "</text>\n";
  }
  svg << "<text x=\"" << px(left + kWidth / 2) << "\" y=\"" << px(kTop + kHeight + 34)
      << "\" text-anchor=\"middle\">GPUs (devices)</text>\n";
  // The ideal: speed-up equal to the device count; efficiency 100 %.
  const double ideal = speedup ? max_devices : 1;
  svg << "<line x1=\"" << px(x(1)) << "\" y1=\"" << px(y(1)) << "\" x2=\"" << px(x(max_devices)) << "\" y2=\""
      << px(y(ideal)) << "\" stroke=\"#444\" stroke-dasharray=\"6 4\"/>"
      << "<text x=\"" << px(x(max_devices) - 4) << "\" y=\"" << px(y(ideal) + 14)
      << "\" text-anchor=\"end\">ideal (dashed)</text>\n";
  return svg.str();
}

std::string ScalingPanel::marks(const std::vector<ScalingPoint>& points) const {
  std::string svg;
  for (const auto& p : points) {
    const double v = speedup ? p.speedup : p.efficiency;
    if (!std::isfinite(v)) continue;
    svg += scaling_marker(p.series, x(p.devices), y(v),
                          p.label + " (" + p.series + "): " + (speedup ? format_fixed(v, 2) + "x" : format_percent(v)));
  }
  return svg;
}

}  // namespace

// Scaling on comparable axes: each series against its own single-device baseline, so the
// tutorial's A100s and this machine share one chart. Speed-up beside the ideal line, and
// scaling efficiency beside 100 %.
std::string scaling_chart(const std::vector<RowSummary>& rows, const std::string& baseline) {
  const std::vector<ScalingPoint> points = scaling_points(rows, baseline);
  double max_devices = 1, max_speedup = 1;
  for (const auto& r : rows) max_devices = std::max(max_devices, static_cast<double>(r.devices));
  for (const auto& p : points) max_speedup = std::max(max_speedup, p.speedup);
  max_speedup = std::max(max_speedup, max_devices);
  const double left1 = 50, left2 = 420;
  std::ostringstream svg;
  svg << svg_open(ScalingPanel::kTop + ScalingPanel::kHeight + 60,
                  "Speed-up and scaling efficiency against GPU count, each series against its own one-device baseline, "
                  "with the ideal");
  std::vector<std::string> legend{"tutorial"};
  for (const auto& mode : sweep_modes(rows)) legend.push_back(mode);
  for (std::size_t s = 0; s < legend.size(); ++s) {
    const double x = left1 + 150.0 * static_cast<double>(s);
    svg << scaling_marker(legend[s], x + 6, 12, legend[s]) << "<text x=\"" << px(x + 16) << "\" y=\"16\">"
        << html_escape(legend[s] == "tutorial"     ? "tutorial (circle)"
                       : legend[s] == "controlled" ? "controlled (square)"
                                                   : legend[s] + " (triangle)")
        << "</text>\n";
  }
  for (const ScalingPanel& panel : {ScalingPanel{true, left1, max_speedup, max_devices},
                                    ScalingPanel{false, left2, 1.2, max_devices}}) {
    svg << panel.axes() << panel.marks(points);
  }
  svg << "</svg>\n";
  return svg.str();
}

// Step-time distribution per row: p50, p90 and max of the steps after warm-up, and each
// warm-up step, which the steady figures leave out.
std::string step_chart(const std::vector<RowSummary>& rows) {
  std::vector<const RowSummary*> shown;
  std::vector<double> values;
  for (const auto& r : rows) {
    if (!r.has_figures() || !std::isfinite(r.step_time_p50_s)) continue;
    shown.push_back(&r);
    values.insert(values.end(), {r.step_time_p50_s, r.step_time_p90_s, r.step_time_max_s});
    values.insert(values.end(), r.warmup_step_s.begin(), r.warmup_step_s.end());
  }
  const Axis axis = axis_for(values);
  const double row_h = 22, legend_h = 26;
  const double plot_h = row_h * static_cast<double>(shown.size());
  std::ostringstream svg;
  svg << svg_open(legend_h + plot_h + 50, "Step-time distribution per row: p50, p90 and max after warm-up, and the "
                                          "warm-up steps");
  auto mark = [&](const std::string& kind, double x, double y, const std::string& tip) {
    std::ostringstream m;
    if (kind == "p50") {
      m << "<circle class=\"mark\" cx=\"" << px(x) << "\" cy=\"" << px(y) << "\" r=\"5\" fill=\"#1a73e8\">";
    } else if (kind == "p90") {
      m << "<path class=\"mark\" d=\"M" << px(x) << " " << px(y - 6) << " L" << px(x + 6) << " " << px(y) << " L"
        << px(x) << " " << px(y + 6) << " L" << px(x - 6) << " " << px(y) << " Z\" fill=\"#e8710a\">";
    } else if (kind == "max") {
      m << "<path class=\"mark\" d=\"M" << px(x - 5) << " " << px(y - 5) << " L" << px(x + 5) << " " << px(y + 5)
        << " M" << px(x - 5) << " " << px(y + 5) << " L" << px(x + 5) << " " << px(y - 5)
        << "\" stroke=\"#c62828\" stroke-width=\"2\" fill=\"none\">";
    } else {
      m << "<rect class=\"mark\" x=\"" << px(x - 4) << "\" y=\"" << px(y - 4) << "\" width=\"8\" height=\"8\" "
        << "fill=\"none\" stroke=\"#616161\" stroke-width=\"1.5\">";
    }
    m << "<title>" << html_escape(tip) << "</title>" << (kind == "p50" ? "</circle>" : kind == "warm-up" ? "</rect>" : "</path>")
      << "\n";
    return m.str();
  };
  const std::vector<std::pair<std::string, std::string>> legend = {
      {"p50", "p50 (dot)"}, {"p90", "p90 (diamond)"}, {"max", "max (cross)"}, {"warm-up", "warm-up step (hollow square)"}};
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double x = 10 + 160.0 * static_cast<double>(i);
    svg << mark(legend[i].first, x, 12, legend[i].second) << "<text x=\"" << px(x + 10) << "\" y=\"16\">"
        << html_escape(legend[i].second) << "</text>\n";
  }
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const RowSummary& r = *shown[i];
    const double y = legend_h + row_h * static_cast<double>(i) + row_h / 2;
    const std::string label = row_label(r, true);
    svg << "<text x=\"0\" y=\"" << px(y + 4) << "\">" << html_escape(label) << "</text>\n"
        << "<line x1=\"" << px(kLabelWidth) << "\" y1=\"" << px(y) << "\" x2=\"" << px(kLabelWidth + kPlotWidth)
        << "\" y2=\"" << px(y) << "\" stroke=\"#eee\"/>\n";
    for (double w : r.warmup_step_s) {
      svg << mark("warm-up", kLabelWidth + axis.at(w), y, label + ": warm-up step " + format_seconds(w));
    }
    svg << mark("p50", kLabelWidth + axis.at(r.step_time_p50_s), y, label + ": p50 " + format_seconds(r.step_time_p50_s))
        << mark("p90", kLabelWidth + axis.at(r.step_time_p90_s), y, label + ": p90 " + format_seconds(r.step_time_p90_s))
        << mark("max", kLabelWidth + axis.at(r.step_time_max_s), y, label + ": max " + format_seconds(r.step_time_max_s))
        << "<text x=\"" << px(kLabelWidth + kPlotWidth + 8) << "\" y=\"" << px(y + 4) << "\">p50 "
        << format_seconds(r.step_time_p50_s) << "</text>\n";
  }
  svg << value_axis(axis, legend_h + plot_h + 2, "step time, ms",
                    [](double t) { return format_fixed(t * 1e3, t * 1e3 < 10 ? 1 : 0); })
      << "</svg>\n";
  return svg.str();
}

// ddpbench against PyTorch per row: the epoch-time and steady-throughput ratios (above 1.00x
// ddpbench is faster), beside the parity line.
std::string pytorch_chart(const std::vector<RowSummary>& rows) {
  std::vector<const RowSummary*> shown;
  double largest = 1.0;
  for (const auto& r : rows) {
    if (!r.pytorch) continue;
    shown.push_back(&r);
    for (double v : {r.vs_pytorch_train_time, r.vs_pytorch_steady}) {
      if (std::isfinite(v)) largest = std::max(largest, v);
    }
  }
  Axis axis;
  axis.high = largest * 1.1;
  const double bar_h = 12, gap = 10, legend_h = 24;
  const double group_h = 2 * bar_h + gap;
  const double plot_h = group_h * static_cast<double>(shown.size());
  std::ostringstream svg;
  svg << svg_open(legend_h + plot_h + 50, "ddpbench against PyTorch's own implementation per row: ratios, above 1.00x "
                                          "ddpbench is faster");
  const std::pair<const char*, const char*> series[] = {{"#1a73e8", "epoch time ratio (solid)"},
                                                        {"url(#hatch)", "steady throughput ratio (hatched)"}};
  for (int s = 0; s < 2; ++s) {
    const double x = kLabelWidth + 220.0 * s;
    svg << "<rect x=\"" << px(x) << "\" y=\"4\" width=\"12\" height=\"12\" fill=\"" << series[s].first
        << "\" stroke=\"#333\"/><text x=\"" << px(x + 16) << "\" y=\"14\">" << series[s].second << "</text>\n";
  }
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const RowSummary& r = *shown[i];
    const double top = legend_h + group_h * static_cast<double>(i);
    svg << "<text x=\"0\" y=\"" << px(top + bar_h + 4) << "\">" << html_escape(row_label(r, true)) << "</text>\n";
    const double values[] = {r.vs_pytorch_train_time, r.vs_pytorch_steady};
    for (int s = 0; s < 2; ++s) {
      const double y = top + bar_h * s;
      if (!std::isfinite(values[s])) {
        svg << "<text x=\"" << px(kLabelWidth + 4) << "\" y=\"" << px(y + bar_h - 2) << "\">not measured</text>\n";
        continue;
      }
      const double w = axis.at(values[s]);
      svg << "<rect class=\"mark\" x=\"" << px(kLabelWidth) << "\" y=\"" << px(y) << "\" width=\"" << px(w)
          << "\" height=\"" << px(bar_h - 1) << "\" fill=\"" << series[s].first << "\" stroke=\"#333\" stroke-width=\"0.5\">"
          << "<title>" << html_escape(row_label(r, true) + ": " + series[s].second + " " + format_fixed(values[s], 2) + "x")
          << "</title></rect><text x=\"" << px(kLabelWidth + w + 4) << "\" y=\"" << px(y + bar_h - 2) << "\">"
          << format_fixed(values[s], 2) << "x</text>\n";
    }
  }
  const double parity = kLabelWidth + axis.at(1.0);
  svg << "<line x1=\"" << px(parity) << "\" y1=\"" << px(legend_h - 2) << "\" x2=\"" << px(parity) << "\" y2=\""
      << px(legend_h + plot_h) << "\" stroke=\"#000\" stroke-dasharray=\"4 3\"/>"
      << value_axis(axis, legend_h + plot_h + 2, "ratio to PyTorch, x (dashed: parity)",
                    [](double t) { return format_fixed(t, 2); })
      << "</svg>\n";
  return svg.str();
}

std::string advice_table(const std::vector<RowAdvice>& advice) {
  std::ostringstream html;
  html << html_table_open() << "<tr><th>row</th><th>ranks</th><th>advice</th>"
          "<th>flags</th><th>step</th><th>against PyTorch's defaults</th><th>ties</th></tr>\n";
  TableNotes notes;
  for (const RowAdvice& a : advice) {
    if (!a.not_advised.empty()) {
      html << "<tr><td>" << html_escape(ddpbench::row_label(a.row, a.mode)) << "</td><td colspan=\"6\">no advice "
           << notes.mark(a.not_advised) << "</td></tr>\n";
      continue;
    }
    const std::string warning =
        !advice_off(a)          ? ""
        : !a.unchecked.empty() ? " (not to be trusted " + notes.mark("not to be trusted: " + a.unchecked) + ")"
                               : " (not to be trusted " +
                                     notes.mark("not to be trusted: the model is " + format_fixed(100 * a.model_error, 1) +
                                                " % off the step it measured") +
                                     ")";
    for (const RankAdvice& k : a.ranks) {
      const SettingProjection& best = k.settings[k.advised];
      const std::string against = k.best == k.defaults ? "the fastest"
                                  : k.defaults_tie()   ? "a tie: keep the defaults"
                                                       : format_fixed(1 + k.gain_over_defaults, 2) + "x";
      html << "<tr><td>" << html_escape(ddpbench::row_label(a.row, a.mode) + warning) << "</td><td>" << k.ranks
           << "</td><td>" << html_escape(setting_label(best.setting)) << "</td><td><code>"
           << html_escape(setting_flags(best.setting)) << "</code></td><td>" << format_seconds(best.step_s)
           << "</td><td>" << html_escape(against) << "</td><td>" << k.ties.size() - 1 << "</td></tr>\n";
    }
  }
  html << html_table_close(notes);
  return html.str();
}

namespace {

// Images/s against rank count, both on log axes: each DDP row's projection as a line (its own
// dash pattern), and the rows measured here as points, so the curve can be read against them.
struct MeasuredPoint {
  double ranks, images_per_s;
  std::string label;
};

// The distributed rows measured here, at their rank count.
std::vector<MeasuredPoint> measured_points(const std::vector<RowSummary>& rows) {
  std::vector<MeasuredPoint> measured;
  for (const auto& r : rows) {
    if (r.world_size > 1 && std::isfinite(r.steady_images_per_s) && !r.ranks.empty()) {
      measured.push_back({static_cast<double>(r.world_size), r.steady_images_per_s, row_label(r, true)});
    }
  }
  return measured;
}

// How far the chart's axes reach: the most ranks (2 at least), the least and most images/s.
struct ProjectionExtent {
  double max_ranks = 2, lo = 0, hi = 0;
  void extend(double v) {
    if (!(v > 0) || !std::isfinite(v)) return;
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  }
};

ProjectionExtent projection_extent(const std::vector<RowProjection>& projections,
                                   const std::vector<MeasuredPoint>& measured) {
  ProjectionExtent e;
  for (const auto& p : projections) {
    for (const auto& q : p.points) {
      e.max_ranks = std::max(e.max_ranks, static_cast<double>(q.ranks));
      e.extend(q.images_per_s);
    }
  }
  for (const auto& m : measured) e.extend(m.images_per_s);
  return e;
}

std::string projection_chart(const std::vector<RowProjection>& projections, const std::vector<RowSummary>& rows) {
  const std::vector<MeasuredPoint> measured = measured_points(rows);
  const auto [max_ranks, lo, hi] = projection_extent(projections, measured);
  if (hi <= 0) return "";
  const double y_lo = std::pow(10.0, std::floor(std::log10(lo))), y_hi = std::pow(10.0, std::ceil(std::log10(hi)));
  const double left = 90, top = 40, width = 560, height = 260;
  const double x_top = std::ceil(std::log2(max_ranks));
  const auto sx = [&](double ranks) { return left + width * std::log2(std::max(1.0, ranks)) / std::max(1.0, x_top); };
  const auto sy = [&](double v) {
    return top + height -
           height * (std::log10(std::max(v, y_lo)) - std::log10(y_lo)) / std::max(1.0, std::log10(y_hi) - std::log10(y_lo));
  };
  std::size_t lines = 0;
  for (const auto& p : projections) lines += p.not_projected.empty() && !p.points.empty() ? 1 : 0;
  const double legend_y = top + height + 56;
  std::ostringstream svg;
  svg << svg_open(legend_y + 20.0 * static_cast<double>(lines + 1),
                  "Projected images per second against rank count, beside the rows measured here");
  for (double t = y_lo; t <= y_hi * 1.0001; t *= 10) {
    svg << "<line x1=\"" << px(left) << "\" y1=\"" << px(sy(t)) << "\" x2=\"" << px(left + width) << "\" y2=\""
        << px(sy(t)) << "\" stroke=\"#e0e0e0\"/><text x=\"" << px(left - 6) << "\" y=\"" << px(sy(t) + 4)
        << "\" text-anchor=\"end\">" << html_escape(format_rate(t)) << "</text>\n";
  }
  svg << "<text x=\"" << px(left) << "\" y=\"" << px(top - 14) << "\">images/s, all ranks (log scale)</text>\n"
      << "<line x1=\"" << px(left) << "\" y1=\"" << px(top + height) << "\" x2=\"" << px(left + width) << "\" y2=\""
      << px(top + height) << "\" stroke=\"#444\"/>\n";
  for (double n = 1; n <= std::pow(2.0, x_top) * 1.0001; n *= 2) {
    svg << "<text x=\"" << px(sx(n)) << "\" y=\"" << px(top + height + 16) << "\" text-anchor=\"middle\">"
        << static_cast<int64_t>(n) << "</text>\n";
  }
  svg << "<text x=\"" << px(left + width / 2) << "\" y=\"" << px(top + height + 34)
      << "\" text-anchor=\"middle\">ranks (GPUs), log scale</text>\n";
  static const char* const kDashes[] = {"", "8 4", "2 3", "10 3 2 3"};
  std::size_t series = 0;
  for (const auto& p : projections) {
    if (!p.not_projected.empty() || p.points.empty()) continue;
    const std::string dash = kDashes[series % 4];
    const std::string dashed = dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"";
    std::ostringstream points;
    for (const auto& q : p.points) points << px(sx(static_cast<double>(q.ranks))) << "," << px(sy(q.images_per_s)) << " ";
    const std::string label = ddpbench::row_label(p.row, p.mode) + " on " + p.fabric.name;
    svg << "<polyline class=\"mark\" points=\"" << points.str() << "\" fill=\"none\" stroke=\"#1a73e8\" stroke-width=\"2\""
        << dashed << "><title>" << html_escape(label) << "</title></polyline>\n";
    const double y = legend_y + 20.0 * static_cast<double>(series);
    svg << "<line x1=\"" << px(left) << "\" y1=\"" << px(y - 4) << "\" x2=\"" << px(left + 40) << "\" y2=\"" << px(y - 4)
        << "\" stroke=\"#1a73e8\" stroke-width=\"2\"" << dashed << "/><text x=\"" << px(left + 48) << "\" y=\"" << px(y)
        << "\">" << html_escape("projected: " + label) << "</text>\n";
    ++series;
  }
  for (const auto& m : measured) {
    svg << "<circle class=\"mark\" cx=\"" << px(sx(m.ranks)) << "\" cy=\"" << px(sy(m.images_per_s))
        << "\" r=\"5\" fill=\"#e8710a\"><title>"
        << html_escape(m.label + " measured: " + format_rate(m.images_per_s) + " images/s") << "</title></circle>\n";
  }
  const double y = legend_y + 20.0 * static_cast<double>(series);
  svg << "<circle cx=\"" << px(left + 20) << "\" cy=\"" << px(y - 4) << "\" r=\"5\" fill=\"#e8710a\"/><text x=\""
      << px(left + 48) << "\" y=\"" << px(y) << "\">measured here (filled circles)</text>\n</svg>\n";
  return svg.str();
}

}  // namespace

std::string projection_figure(const std::vector<RowProjection>& projections, const std::vector<RowSummary>& rows) {
  std::string html = projection_chart(projections, rows);
  for (const auto& p : projections) {
    if (!p.not_projected.empty()) html += "<p>" + html_escape(ddpbench::row_label(p.row, p.mode) + ": not projected: " + p.not_projected) + "</p>\n";
  }
  return html;
}

}  // namespace ddpbench
