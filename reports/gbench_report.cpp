#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "harness/base/statistics.hpp"
#include "reports/reporter.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// Google Benchmark's JSON, field for field as its JSON reporter writes it, so that its
// tools/compare.py reads it as its own: per row and mode, one "iteration" entry per
// repetition, its iterations the optimizer steps and its real_time the time per step in ms
// (the epoch's training time / steps; wall time only, so cpu_time carries the same), then
// with repetitions the aggregates Google Benchmark adds: _mean, _median, _stddev (in the
// time unit) and _cv (a fraction, aggregate_unit "percentage").
constexpr double kMsPerS = 1e3;

struct Repetition {
  int64_t index = 0;
  int64_t steps = 0;
  double step_ms = kNotMeasured;
  double items_per_second = kNotMeasured;
};

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? kNotMeasured : sum / static_cast<double>(v.size());
}

// The sample standard deviation, as Google Benchmark's StatisticsStdDev.
double stddev_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double squares = 0;
  for (double x : v) squares += (x - m) * (x - m);
  return std::sqrt(squares / static_cast<double>(v.size() - 1));
}

class GbenchReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& doc, const std::vector<RowSummary>&) const override {
    const Environment& e = doc.environment;
    json out;
    out["context"] = {{"date", doc.created_utc},
                      {"host_name", e.host},
                      {"executable", doc.argv.empty() ? "ddpbench" : doc.argv.front()},
                      {"num_cpus", e.cpu_cores},
                      {"mhz_per_cpu", 0},
                      {"cpu_scaling_enabled", false},
                      {"caches", json::array()},
                      {"load_avg", json::array()},
                      {"library_build_type", e.build_type == "Release" ? "release" : "debug"},
                      {"ddpbench_git_revision", e.git_revision},
                      {"libtorch_version", e.libtorch_version},
                      {"gpu", e.gpus.empty() ? "" : e.gpus.front().name}};

    // Families in order of first appearance, each with its repetitions that ran.
    std::vector<std::string> families;
    std::map<std::string, std::vector<Repetition>> repetitions;
    std::map<std::string, std::string> placements;  // Google Benchmark's label: the ranks over nodes
    for (const auto& r : doc.runs) {
      if (r.status != RunStatus::ok || r.steps <= 0 || !std::isfinite(r.train_time_s)) continue;
      const std::string name = (r.mode.empty() ? "" : r.mode + "/") + r.name;
      if (!repetitions.contains(name)) families.push_back(name);
      if (!repetitions.contains(name)) placements[name] = placement_text(r);
      repetitions[name].push_back(
          {r.repetition, r.steps, r.train_time_s * kMsPerS / static_cast<double>(r.steps), r.images_per_s});
    }

    json benchmarks = json::array();
    for (std::size_t family = 0; family < families.size(); ++family) {
      const std::string& name = families[family];
      const auto& reps = repetitions[name];
      const auto count = static_cast<int64_t>(reps.size());
      json common = {{"family_index", family}, {"per_family_instance_index", 0}, {"run_name", name},
                     {"repetitions", count},   {"threads", 1},                  {"time_unit", "ms"}};
      if (!placements[name].empty()) common["label"] = placements[name];
      std::vector<double> times, rates;
      for (const auto& rep : reps) {
        json b = common;
        b["name"] = name;
        b["run_type"] = "iteration";
        b["repetition_index"] = rep.index;
        b["iterations"] = rep.steps;
        b["real_time"] = rep.step_ms;
        b["cpu_time"] = rep.step_ms;
        if (std::isfinite(rep.items_per_second)) b["items_per_second"] = rep.items_per_second;
        benchmarks.push_back(std::move(b));
        times.push_back(rep.step_ms);
        if (std::isfinite(rep.items_per_second)) rates.push_back(rep.items_per_second);
      }
      if (count < 2) continue;
      const double mean = mean_of(times);
      const std::vector<std::pair<std::string, std::pair<double, double>>> aggregates = {
          {"mean", {mean, mean_of(rates)}},
          {"median", {median(times), median(rates)}},
          {"stddev", {stddev_of(times), stddev_of(rates)}},
          {"cv", {mean > 0 ? stddev_of(times) / mean : 0.0, mean_of(rates) > 0 ? stddev_of(rates) / mean_of(rates) : 0.0}},
      };
      for (const auto& [aggregate, values] : aggregates) {
        json b = common;
        b["name"] = name + "_" + aggregate;
        b["run_type"] = "aggregate";
        b["aggregate_name"] = aggregate;
        b["aggregate_unit"] = aggregate == "cv" ? "percentage" : "time";
        b["iterations"] = count;
        b["real_time"] = values.first;
        b["cpu_time"] = values.first;
        if (!rates.empty()) b["items_per_second"] = values.second;
        benchmarks.push_back(std::move(b));
      }
    }
    out["benchmarks"] = std::move(benchmarks);
    return out.dump(2) + "\n";
  }
  [[nodiscard]] std::string do_file_name() const override { return "results.gbench.json"; }
  // Google Benchmark's layout, with the context entry only ddpbench writes.
  [[nodiscard]] bool do_wrote(std::string_view text) const override {
    const json j = json::parse(text, nullptr, false);
    return j.is_object() && j.contains("benchmarks") && j.at("benchmarks").is_array() && j.contains("context") &&
           j.at("context").is_object() && j.at("context").contains("ddpbench_git_revision");
  }
};

}  // namespace

std::unique_ptr<Reporter> make_gbench_reporter() { return std::make_unique<GbenchReporter>(); }

}  // namespace ddpbench
