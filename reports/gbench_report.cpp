#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/base/statistics.hpp"
#include "reports/reporter.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// Google Benchmark's JSON, field for field as its JSON reporter writes it, so that its
// tools/compare.py reads it as its own: per row and mode (the report's rows, twins beside them),
// one "iteration" entry per planned repetition, its iterations the optimizer steps and its
// real_time the time per step in ms (the epoch's training time / steps; wall time only, so
// cpu_time carries the same), a repetition that did not run written as Google Benchmark writes
// one (error_occurred and error_message; a skipped one skipped and skip_message), then with two
// or more that ran the aggregates Google Benchmark adds: _mean, _median, _stddev (in the time
// unit) and _cv (a fraction, aggregate_unit "percentage").
constexpr double kMsPerS = 1e3;

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

// A benchmark of Google Benchmark's: a row (or its twin, or ddpbench's run beside the twin) in a
// mode, with every planned repetition.
struct Family {
  std::string name;   // MODE/ROW
  std::string label;  // Google Benchmark's label: the ranks over nodes
  const std::vector<RepetitionOutcome>* outcomes;
};

// Each row of the report, then what its comparison with PyTorch ran beside it, in that order.
std::vector<Family> families(const std::vector<RowSummary>& rows) {
  std::vector<Family> out;
  for (const RowSummary& r : rows) {
    const std::string mode = r.mode.empty() ? "" : r.mode + "/";
    out.push_back({mode + r.name, r.placement, &r.outcomes});
    if (!r.pytorch) continue;
    if (r.pytorch->ddpbench_name != r.name) out.push_back({mode + r.pytorch->ddpbench_name, r.placement, &r.pytorch->ddpbench_outcomes});
    out.push_back({mode + r.pytorch->name, r.placement, &r.pytorch->outcomes});
  }
  return out;
}

// A repetition that ran no step as its reporter writes a benchmark that did not run: skipped
// with its message (SkipWithMessage), else an error (SkipWithError), no iterations, no time.
void mark_not_run(json& entry, const RepetitionOutcome& outcome) {
  if (outcome.status == RunStatus::skipped) {
    entry["skipped"] = true;
    entry["skip_message"] = outcome.reason;
  } else {
    entry["error_occurred"] = true;
    entry["error_message"] =
        !outcome.status ? "not run: the sweep has no result for this repetition (stopped before it, or still running)"
        : outcome.status == RunStatus::ok ? "says ok, but measured no time per step"
                                          : std::string(status_name(*outcome.status)) + ": " + outcome.reason;
  }
  entry["iterations"] = 0;
  entry["real_time"] = 0.0;
  entry["cpu_time"] = 0.0;
}

// One entry per planned repetition, then, over the ones that ran, the aggregates Google Benchmark
// adds where two or more did (its ComputeStats: their count is every repetition reported).
void add_family(json& benchmarks, const Family& family, std::size_t family_index) {
  const auto count = static_cast<int64_t>(family.outcomes->size());
  json common = {{"family_index", family_index}, {"per_family_instance_index", 0}, {"run_name", family.name},
                 {"repetitions", count}, {"threads", 1}, {"time_unit", "ms"}};
  if (!family.label.empty()) common["label"] = family.label;
  std::vector<double> times, rates;
  for (const RepetitionOutcome& outcome : *family.outcomes) {
    json b = common;
    b["name"] = family.name;
    b["run_type"] = "iteration";
    b["repetition_index"] = outcome.repetition;
    if (!outcome.ran_ok() || outcome.steps <= 0 || !std::isfinite(outcome.train_time_s)) {
      mark_not_run(b, outcome);
      benchmarks.push_back(std::move(b));
      continue;
    }
    const double step_ms = outcome.train_time_s * kMsPerS / static_cast<double>(outcome.steps);
    b["iterations"] = outcome.steps;
    b["real_time"] = step_ms;
    b["cpu_time"] = step_ms;
    if (std::isfinite(outcome.images_per_s)) b["items_per_second"] = outcome.images_per_s;
    benchmarks.push_back(std::move(b));
    times.push_back(step_ms);
    if (std::isfinite(outcome.images_per_s)) rates.push_back(outcome.images_per_s);
  }
  if (times.size() < 2) return;
  const double mean = mean_of(times);
  const std::vector<std::pair<std::string, std::pair<double, double>>> aggregates = {
      {"mean", {mean, mean_of(rates)}},
      {"median", {median(times), median(rates)}},
      {"stddev", {stddev_of(times), stddev_of(rates)}},
      {"cv", {mean > 0 ? stddev_of(times) / mean : 0.0, mean_of(rates) > 0 ? stddev_of(rates) / mean_of(rates) : 0.0}},
  };
  for (const auto& [aggregate, values] : aggregates) {
    json b = common;
    b["name"] = family.name + "_" + aggregate;
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

class GbenchReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& doc, const std::vector<RowSummary>& rows) const override {
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

    json benchmarks = json::array();
    const std::vector<Family> all = families(rows);
    for (std::size_t index = 0; index < all.size(); ++index) add_family(benchmarks, all[index], index);
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
