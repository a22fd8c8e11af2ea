#include "reports/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>

#include "harness/base/enum_names.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/statistics.hpp"
#include "harness/base/units.hpp"
#include "reports/sweep_summary.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// Keys of a row's config that do not change what is measured.
const char* const kIgnoredConfigKeys[] = {"out", "save-checkpoint", "log-interval-steps", "data-dir", "cache-dir", "name"};

}  // namespace

std::string config_difference(const json& a, const json& b) {
  std::string out;
  for (const auto& [key, value] : a.items()) {
    const json other = b.contains(key) ? b.at(key) : json(nullptr);
    if (value != other) out += (out.empty() ? "" : ", ") + key + " " + value.dump() + " vs " + other.dump();
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) out += (out.empty() ? "" : ", ") + key + " unset vs " + value.dump();
  }
  return out;
}

namespace {

double metric_of(const RunResult& r, const std::string& metric) {
  if (metric == "train_time_s") return r.train_time_s;
  if (metric == "images_per_s") return r.images_per_s;
  if (metric == "steady_images_per_s") return r.steady_images_per_s;
  if (metric == "step_time_s") return r.step_time_s.p50;
  if (metric == "test_accuracy") return r.test_accuracy;
  return kNotMeasured;
}

using RowKey = std::pair<std::string, std::string>;  // name, mode

std::map<RowKey, std::vector<const RunResult*>> rows_of(const ResultDocument& doc) {
  std::map<RowKey, std::vector<const RunResult*>> rows;
  for (const auto& r : doc.runs) rows[{r.name, r.mode}].push_back(&r);
  return rows;
}

std::vector<double> values(const std::vector<const RunResult*>& runs, const std::string& metric, double divisor) {
  std::vector<double> out;
  for (const RunResult* r : runs) {
    const double v = metric_of(*r, metric);
    if (r->status == RunStatus::ok && std::isfinite(v)) out.push_back(v / divisor);
  }
  return out;
}

std::string gpu_of(const Environment& e) { return e.gpus.empty() ? "no GPU" : e.gpus.front().name; }

std::string label(const std::string& name, const std::string& mode) {
  return mode.empty() ? name : name + " (" + mode + ")";
}

}  // namespace

json comparable_config(const json& config) {
  json c = config;
  for (const char* key : kIgnoredConfigKeys) c.erase(key);
  return c;
}

const std::vector<MetricInfo>& comparable_metrics() {
  static const std::vector<MetricInfo> metrics = {{"train_time_s", false},
                                                  {"images_per_s", true},
                                                  {"steady_images_per_s", true},
                                                  {"step_time_s", false},
                                                  {"test_accuracy", true}};
  return metrics;
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::unchanged: return "ok";
    case Verdict::improved: return "improved";
    case Verdict::regression: return "REGRESSION";
    case Verdict::within_noise: return "within noise";
  }
  return "?";
}

bool Comparison::regression() const {
  return !failed_rows.empty() || !below_pytorch.empty() ||
         std::any_of(metrics.begin(), metrics.end(), [](const MetricComparison& m) { return m.verdict == Verdict::regression; });
}

Comparison compare_results(const ResultDocument& baseline, const ResultDocument& current, const CompareOptions& options) {
  std::vector<const MetricInfo*> metrics;
  for (const auto& m : options.metrics) {
    metrics.push_back(&find_named(std::span<const MetricInfo>(comparable_metrics()), m, "--metric", "metric"));
  }
  Comparison result;
  std::vector<std::string> env;
  if (gpu_of(baseline.environment) != gpu_of(current.environment)) {
    env.push_back("GPU: " + gpu_of(baseline.environment) + " vs " + gpu_of(current.environment));
  }
  if (baseline.environment.libtorch_version != current.environment.libtorch_version) {
    env.push_back("LibTorch: " + baseline.environment.libtorch_version + " vs " + current.environment.libtorch_version);
  }

  const auto base_rows = rows_of(baseline);
  const auto cur_rows = rows_of(current);
  // Per file and mode, the divisor of every metric: 1, or the normalising row's median.
  auto divisor = [&](const std::map<RowKey, std::vector<const RunResult*>>& rows, const std::string& mode,
                     const std::string& metric) -> double {
    if (!options.normalize_by) return 1.0;
    auto it = rows.find({*options.normalize_by, mode});
    if (it == rows.end()) return kNotMeasured;
    return median(values(it->second, metric, 1.0));
  };

  int64_t matched = 0;
  for (const auto& [key, base_runs] : base_rows) {
    const std::string row = label(key.first, key.second);
    auto it = cur_rows.find(key);
    if (it == cur_rows.end()) {
      result.not_compared.push_back(row + ": only in the baseline");
      continue;
    }
    const auto& cur_runs = it->second;
    const std::string difference = config_difference(comparable_config(base_runs.front()->config), comparable_config(cur_runs.front()->config));
    if (!difference.empty()) {
      result.not_compared.push_back(row + ": configuration differs (" + difference + ")");
      continue;
    }
    if (base_runs.front()->dataset != cur_runs.front()->dataset && !base_runs.front()->dataset.empty() &&
        !cur_runs.front()->dataset.empty()) {
      env.push_back("dataset of " + row + ": " + base_runs.front()->dataset + " vs " + cur_runs.front()->dataset);
    }
    const bool base_ok = std::any_of(base_runs.begin(), base_runs.end(), [](auto* r) { return r->status == RunStatus::ok; });
    const bool cur_ok = std::any_of(cur_runs.begin(), cur_runs.end(), [](auto* r) { return r->status == RunStatus::ok; });
    ++matched;
    if (base_ok && !cur_ok) {
      if (cur_runs.front()->status == RunStatus::failed) {
        result.failed_rows.push_back(row + ": failed: " + cur_runs.front()->reason);
      } else {
        result.not_compared.push_back(row + ": " + std::string(status_name(cur_runs.front()->status)) + " now: " +
                                      cur_runs.front()->reason);
      }
      continue;
    }
    if (!base_ok || !cur_ok) {
      result.not_compared.push_back(row + ": did not run in the baseline");
      continue;
    }
    // A repetition that fails now, where none did in the baseline, is a regression however
    // well the others ran.
    const auto failed = [](const std::vector<const RunResult*>& runs) {
      return std::count_if(runs.begin(), runs.end(), [](auto* r) { return r->status == RunStatus::failed; });
    };
    if (failed(base_runs) == 0 && failed(cur_runs) > 0) {
      const auto first = std::find_if(cur_runs.begin(), cur_runs.end(), [](auto* r) { return r->status == RunStatus::failed; });
      result.failed_rows.push_back(row + ": " + std::to_string(failed(cur_runs)) + " of " +
                                   std::to_string(cur_runs.size()) + " repetitions failed (none in the baseline): " +
                                   (*first)->reason);
    }
    for (const MetricInfo* info : metrics) {
      const std::string& metric = info->name;
      const bool higher_better = info->higher_is_better;
      MetricComparison c;
      c.row = key.first;
      c.mode = key.second;
      c.metric = metric;
      c.baseline = values(base_runs, metric, divisor(base_rows, key.second, metric));
      c.current = values(cur_runs, metric, divisor(cur_rows, key.second, metric));
      if (c.baseline.empty() || c.current.empty()) {
        result.not_compared.push_back(row + ": " + metric + " not measured");
        continue;
      }
      c.baseline_median = median(c.baseline);
      c.current_median = median(c.current);
      c.ratio = c.current_median / c.baseline_median;
      // > 0: worse. One threshold, the same both ways: beyond 1 + t or 1 - t in ratio.
      const double change = higher_better ? 1.0 - c.ratio : c.ratio - 1.0;
      const bool repeated = c.baseline.size() > 1 && c.current.size() > 1;
      if (repeated) c.p_value = mann_whitney_p(c.current, c.baseline);
      if (std::fabs(change) <= options.threshold) {
        c.verdict = Verdict::unchanged;
        c.detail = "within the threshold";
      } else if (!repeated) {
        c.verdict = change > 0 ? Verdict::regression : Verdict::improved;
        c.detail = "beyond the threshold; no repetitions, so the noise is unknown";
      } else {
        // Small samples cannot reach alpha: the smallest p the U test can give is reported;
        // then the change must clear the whole spread instead.
        std::vector<double> low(c.baseline.size()), high(c.current.size());  // separated, untied
        std::iota(low.begin(), low.end(), 0.0);
        std::iota(high.begin(), high.end(), static_cast<double>(low.size()));
        const double smallest_p = mann_whitney_p(high, low);
        const auto [bmin, bmax] = std::minmax_element(c.baseline.begin(), c.baseline.end());
        const auto [cmin, cmax] = std::minmax_element(c.current.begin(), c.current.end());
        const bool separated = *cmin > *bmax || *cmax < *bmin;
        const bool beyond_noise = smallest_p < options.alpha ? c.p_value < options.alpha : separated;
        if (beyond_noise) {
          c.verdict = change > 0 ? Verdict::regression : Verdict::improved;
          c.detail = smallest_p < options.alpha ? "U test p < alpha" : "beyond the threshold and every repetition";
        } else {
          c.verdict = Verdict::within_noise;
          c.detail = smallest_p < options.alpha ? "U test p >= alpha" : "the repetitions overlap";
        }
      }
      result.metrics.push_back(std::move(c));
    }
  }
  for (const auto& [key, runs] : cur_rows) {
    if (base_rows.count(key) == 0) result.not_compared.push_back(label(key.first, key.second) + ": only in the current file");
  }
  if (!env.empty() && !options.allow_env_mismatch) {
    std::string text;
    for (const auto& e : env) text += (text.empty() ? "" : "; ") + e;
    throw InputError("the results come from different environments (" + text + "); --allow-env-mismatch compares them anyway");
  }
  result.environment_differences = env;
  if (options.min_vs_pytorch) {
    for (const RowSummary& r : summarize_sweep(current)) {
      if (!r.pytorch || r.pytorch->status != RunStatus::ok || r.status != RunStatus::ok) continue;
      const std::string row = label(r.name, r.mode);
      const std::string ratios = format_fixed(r.vs_pytorch_train_time, 2) + "x in epoch time, " +
                                 format_fixed(r.vs_pytorch_steady, 2) + "x in steady images/s";
      result.pytorch_ratios.push_back(row + ": " + ratios);
      if (!(r.vs_pytorch_train_time >= *options.min_vs_pytorch) || !(r.vs_pytorch_steady >= *options.min_vs_pytorch)) {
        result.below_pytorch.push_back(row + ": " + ratios + " of PyTorch's, below " +
                                       format_fixed(*options.min_vs_pytorch, 2) + "x");
      }
    }
  }
  if (matched == 0) throw InputError("the two result files have no row in common (by name, mode and configuration)");
  return result;
}

std::string markdown_comparison(const Comparison& c, const CompareOptions& options) {
  std::ostringstream md;
  md << "| row | metric | baseline | current | ratio | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n";
  for (const auto& m : c.metrics) {
    const int decimals = options.normalize_by ? 3 : (m.metric == "test_accuracy" ? 4 : 3);
    md << "| " << label(m.row, m.mode) << " | " << m.metric << (options.normalize_by ? " / " + *options.normalize_by : "")
       << " | " << format_fixed(m.baseline_median, decimals) << " | " << format_fixed(m.current_median, decimals) << " | "
       << format_fixed(m.ratio, 3) << " | " << verdict_name(m.verdict) << " (" << m.detail;
    if (std::isfinite(m.p_value)) md << "; p = " << format_fixed(m.p_value, 3);
    md << "; n = " << m.baseline.size() << " vs " << m.current.size() << ") |\n";
  }
  for (const auto& f : c.failed_rows) md << "\n- REGRESSION: " << f;
  for (const auto& f : c.below_pytorch) md << "\n- REGRESSION: " << f;
  for (const auto& p : c.pytorch_ratios) md << "\n- against PyTorch: " << p;
  for (const auto& n : c.not_compared) md << "\n- not compared: " << n;
  for (const auto& e : c.environment_differences) md << "\n- environment differs (allowed): " << e;
  md << (c.failed_rows.empty() && c.not_compared.empty() && c.environment_differences.empty() && c.pytorch_ratios.empty()
             ? ""
             : "\n");
  md << "\n" << (c.regression() ? "Regression" : "No regression") << " (threshold " << format_percent(options.threshold)
     << ", alpha " << format_fixed(options.alpha, 2) << ").\n";
  return md.str();
}

}  // namespace ddpbench
