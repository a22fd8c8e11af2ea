#include "reports/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "harness/base/enum_names.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/statistics.hpp"
#include "harness/base/units.hpp"
#include "reports/environment_fingerprint.hpp"
#include "reports/sweep_summary.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// Keys of a row's config that do not change what is measured. The injected slowdown is the
// gate's own test: it plays a slower build of the same row, so the gate must match it.
const char* const kIgnoredConfigKeys[] = {"out",       "save-checkpoint", "log-interval-steps",   "data-dir",
                                          "cache-dir", "name",            "inject-slowdown",      "inject-slowdown-rank",
                                          "inject-slowdown-phase"};

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
using Rows = std::map<RowKey, std::vector<const RunResult*>>;

Rows rows_of(const ResultDocument& doc) {
  Rows rows;
  for (const auto& r : doc.runs) rows[{r.name, r.mode}].push_back(&r);
  return rows;
}

std::string scientific(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

// No C0 or C1 control character, DEL, U+2028 or U+2029 (Python's splitlines() breaks a line at
// each of them), nor a table's '|'.
bool fits_a_line_and_a_cell(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '|') return false;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      return false;
    }
    if (c == 0xe2 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(text[i + 2]) == 0xa8 || static_cast<unsigned char>(text[i + 2]) == 0xa9)) {
      return false;
    }
  }
  return true;
}

// A file the gate can judge: each repetition of a row once, every repetition of a row run
// with one configuration, and no time or rate of a run that ran that is zero or negative
// (NaN is "not measured" and stays so). Anything else is bad input naming the row: merged
// files or hand edits would otherwise inflate n, hide a changed setting or read as a speed-up.
void check_rows(const ResultDocument& doc, const std::string& side) {
  std::map<std::pair<RowKey, int64_t>, int> seen;
  std::map<RowKey, const RunResult*> first_of;
  for (const auto& r : doc.runs) {
    const std::string row = "row '" + row_label(r.name, r.mode) + "'";
    // A name is a line of the gate's outputs (the rows to run next, one a line; a table cell).
    for (const auto& [what, text] : {std::pair<const char*, const std::string*>{"name", &r.name}, {"mode", &r.mode}}) {
      if (!fits_a_line_and_a_cell(*text) || (text == &r.name && text->empty())) {
        throw InputError(side + ": a row's " + std::string(what) + " " + nlohmann::json(*text).dump() +
                         " is empty or holds a control character, a line separator or '|': rows are named by sweep "
                         "files, and a name is a line and a table cell of the gate's outputs");
      }
    }
    if (++seen[{{r.name, r.mode}, r.repetition}] == 2) {
      throw InputError(side + ": " + row + " holds repetition " + std::to_string(r.repetition) +
                       " more than once; a result file holds each repetition of a row once (a sweep's --repeat numbers "
                       "them)");
    }
    const auto [first, inserted] = first_of.emplace(RowKey{r.name, r.mode}, &r);
    if (!inserted) {
      const std::string difference =
          config_difference(comparable_config(first->second->config), comparable_config(r.config));
      if (!difference.empty()) {
        throw InputError(side + ": the repetitions of " + row + " were run with different configurations (" +
                         difference + "); a row's repetitions measure one configuration");
      }
    }
    if (r.status != RunStatus::ok) continue;
    for (const auto& metric : comparable_metrics()) {
      if (metric.name == "test_accuracy") continue;
      const double v = metric_of(r, metric.name);
      // No run takes a year, nor trains a trillion images a second.
      const double most = metric.higher_is_better ? 1e12 : 365.0 * 24 * 3600;
      // Nor is any time shorter than a microsecond (a rate has no such floor: a stalled row).
      const double least = metric.higher_is_better ? 0 : 1e-6;
      if (std::isfinite(v) && (v <= least || v > most)) {
        throw InputError(side + ": " + row + " repetition " + std::to_string(r.repetition) + " has " + metric.name +
                         " " + (v <= 0 ? format_fixed(v, 6) : scientific(v)) +
                         ": not a time or a rate a run measures (a damaged or edited file)");
      }
    }
  }
}

bool any_ok(const std::vector<const RunResult*>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const RunResult* r) { return r->status == RunStatus::ok; });
}

// The finite values of a metric over the repetitions that ran, each divided by `divisor`.
std::vector<double> values(const std::vector<const RunResult*>& runs, const std::string& metric, double divisor) {
  std::vector<double> out;
  for (const RunResult* r : runs) {
    const double v = metric_of(*r, metric) / divisor;
    if (r->status == RunStatus::ok && std::isfinite(v)) out.push_back(v);
  }
  return out;
}

// The smallest two-sided p the U test can give for samples of these sizes: below alpha, the
// test can decide; otherwise the samples are too few and the whole spread must be cleared.
double smallest_u_test_p(std::size_t m, std::size_t n) {
  std::vector<double> low(m), high(n);
  std::iota(low.begin(), low.end(), 0.0);
  std::iota(high.begin(), high.end(), static_cast<double>(m));
  return mann_whitney_p(high, low);
}

// The name of each row's PyTorch twin (sweep --reference), by row and mode.
std::map<RowKey, std::string> twin_names(const ResultDocument& doc) {
  std::map<RowKey, std::string> out;
  if (!doc.sweep) return out;
  for (const auto& info : doc.sweep->rows) {
    if (info.reference_of.empty()) continue;
    out[{info.reference_of, info.mode}] = info.name;
    // ddpbench's run of the row as the twin runs it ran right before the twin: its pair.
    if (!info.compared_with.empty()) out[{info.compared_with, info.mode}] = info.name;
  }
  return out;
}

// What each repetition is divided by. A named row: its median per mode, checked on both sides
// first (a gate on ratios to a row that did not run has nothing to divide by: bad input, not a
// verdict). `twin`: the row's PyTorch twin in the same repetition, run back to back with it,
// so that the drift of a shared machine between two sweeps cancels; a repetition whose twin
// did not run has no value. A row whose own twin did not run in the baseline (dp-2 on CPUs:
// PyTorch's DataParallel needs CUDA) is divided by the PyTorch twin that ran nearest it in the
// baseline's repetitions, the same one on both sides: a measurement of the machine at that
// moment, if not of the same work. Every row is timed; the output says how.
class Normaliser {
 public:
  static constexpr const char* kTwin = "twin";

  Normaliser(const CompareOptions& options, const ResultDocument& baseline_doc, const ResultDocument& current_doc,
             const Rows& baseline, const Rows& current, const std::vector<std::string>& metrics)
      : twin_(options.normalize_by == kTwin) {
    if (!options.normalize_by) return;
    if (twin_) {
      for (const bool in_baseline : {true, false}) {
        const ResultDocument& doc = in_baseline ? baseline_doc : current_doc;
        twins_[in_baseline] = twin_names(doc);
        for (const auto& [row, twin] : twins_[in_baseline]) {
          const auto it = (in_baseline ? baseline : current).find({twin, row.second});
          if (it == (in_baseline ? baseline : current).end()) continue;
          for (const RunResult* r : it->second) {
            if (r->status == RunStatus::ok) twin_runs_[{in_baseline, row}][r->repetition] = r;
          }
        }
      }
      if (twins_[true].empty()) {
        throw InputError("--normalize-by twin: the baseline has no PyTorch twin rows (run its sweep with --reference)");
      }
      substitute_twins(baseline_doc, baseline, current);
      return;
    }
    const std::string& name = *options.normalize_by;
    std::vector<std::string> modes;  // the baseline's, in the order its rows ran
    for (const auto& r : baseline_doc.runs) {
      if (std::find(modes.begin(), modes.end(), r.mode) == modes.end()) modes.push_back(r.mode);
    }
    for (const auto& mode : modes) {
      for (const bool in_baseline : {true, false}) {
        const Rows& rows = in_baseline ? baseline : current;
        const std::string side = in_baseline ? "the baseline" : "the current file";
        const std::string row = row_label(name, mode);
        const auto it = rows.find({name, mode});
        if (it == rows.end()) throw InputError("--normalize-by " + name + ": " + side + " has no row " + row);
        if (!any_ok(it->second)) {
          const RunResult& first = *it->second.front();
          throw InputError("--normalize-by " + name + ": " + row + " did not run in " + side + " (" +
                           std::string(status_name(first.status)) + ": " + first.reason + ")");
        }
        for (const auto& metric : metrics) {
          const double m = median(values(it->second, metric, 1.0));
          if (!(m > 0) || !std::isfinite(m)) {
            throw InputError("--normalize-by " + name + ": " + row + " has no " + metric + " to divide by in " + side);
          }
          divisors_[{in_baseline, mode + "/" + metric}] = m;
        }
      }
    }
  }

  // How a row is normalised where not by its own twin, for the output; empty otherwise.
  [[nodiscard]] std::string note(const RowKey& row) const {
    if (!twin_) return {};
    if (const auto it = substitutes_.find(row); it != substitutes_.end()) return it->second;
    if (twin_runs_.count({true, row}) != 0) return {};
    return "gated on its raw values: no PyTorch twin ran in its mode in the baseline, so the machine's drift "
           "between the two files falls on it too";
  }

  // The metric's values over the repetitions that ran, each divided as above.
  [[nodiscard]] std::vector<double> values_of(bool baseline, const std::vector<const RunResult*>& runs,
                                              const std::string& metric) const {
    if (!twin_) {
      const auto it = runs.empty() ? divisors_.end() : divisors_.find({baseline, runs.front()->mode + "/" + metric});
      return values(runs, metric, it == divisors_.end() ? 1.0 : it->second);
    }
    std::vector<double> out;
    if (runs.empty()) return out;
    const RowKey row{runs.front()->name, runs.front()->mode};
    if (twin_runs_.count({true, row}) == 0) return values(runs, metric, 1.0);  // no twin ran beside it: raw
    const auto pairs = twin_runs_.find({baseline, row});
    if (pairs == twin_runs_.end()) return out;
    for (const RunResult* r : runs) {
      const auto twin = pairs->second.find(r->repetition);
      if (r->status != RunStatus::ok || twin == pairs->second.end()) continue;
      const double v = metric_of(*r, metric) / metric_of(*twin->second, metric);
      if (std::isfinite(v) && v > 0) out.push_back(v);
    }
    return out;
  }

 private:
  // Rows whose own twin did not run in the baseline take the twin that ran nearest them there
  // (by position in the file, over their repetitions), on both sides.
  void substitute_twins(const ResultDocument& baseline_doc, const Rows& baseline, const Rows& current) {
    std::set<std::string> twin_rows;
    for (const auto& [row, twin] : twins_[true]) twin_rows.insert(twin);
    const auto position = [&](const RunResult* r) { return r - baseline_doc.runs.data(); };
    for (const auto& [key, runs] : baseline) {
      if (twin_runs_.count({true, key}) != 0 || twin_rows.count(key.first) != 0) continue;
      std::map<std::string, int> nearest;  // twin name -> repetitions it was nearest in
      for (const RunResult* r : runs) {
        const RunResult* best = nullptr;
        for (const auto& candidate : baseline_doc.runs) {
          if (twin_rows.count(candidate.name) == 0 || candidate.mode != key.second ||
              candidate.repetition != r->repetition || candidate.status != RunStatus::ok) {
            continue;
          }
          if (best == nullptr || std::abs(position(&candidate) - position(r)) < std::abs(position(best) - position(r))) {
            best = &candidate;
          }
        }
        if (best != nullptr) ++nearest[best->name];
      }
      if (nearest.empty()) continue;
      const std::string twin =
          std::max_element(nearest.begin(), nearest.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
              ->first;
      for (const bool in_baseline : {true, false}) {
        const auto it = (in_baseline ? baseline : current).find({twin, key.second});
        if (it == (in_baseline ? baseline : current).end()) continue;
        for (const RunResult* r : it->second) {
          if (r->status == RunStatus::ok) twin_runs_[{in_baseline, key}][r->repetition] = r;
        }
      }
      const auto own = twins_[true].find(key);
      substitutes_[key] = "normalised by " + twin + ", the PyTorch twin that ran nearest it in each repetition (" +
                          (own == twins_[true].end() ? std::string("it has no twin of its own")
                                                     : "its own, " + own->second + ", did not run in the baseline") +
                          ")";
    }
  }

  bool twin_ = false;
  std::map<RowKey, std::string> substitutes_;  // row -> how it is normalised, for the output
  std::map<std::pair<bool, std::string>, double> divisors_;
  std::map<bool, std::map<RowKey, std::string>> twins_;  // per side: row -> its twin's name
  std::map<std::pair<bool, RowKey>, std::map<int64_t, const RunResult*>> twin_runs_;  // by repetition
};

// How far past the threshold a median beyond the baseline's whole spread must be to be a
// change on its own, where the repetitions are too few or too mixed for the U test.
constexpr double kFarBeyondThresholds = 5;

// One metric of one row, both sides measured: ratio, noise and verdict.
MetricComparison compare_metric(const RowKey& key, const MetricInfo& info, std::vector<double> base,
                                std::vector<double> cur, const CompareOptions& options) {
  MetricComparison c;
  c.row = key.first;
  c.mode = key.second;
  c.metric = info.name;
  c.baseline = std::move(base);
  c.current = std::move(cur);
  c.baseline_median = median(c.baseline);
  c.current_median = median(c.current);
  c.ratio = c.current_median / c.baseline_median;
  // > 0: worse. One threshold, the same both ways: beyond 1 + t or 1 - t in ratio.
  const double change = info.higher_is_better ? 1.0 - c.ratio : c.ratio - 1.0;
  // The noise is known when either side repeats: one value must then clear the other side's
  // whole spread (a single repetition inside the baseline's own range is no change).
  const bool both_repeated = c.baseline.size() > 1 && c.current.size() > 1;
  const bool any_repeated = c.baseline.size() > 1 || c.current.size() > 1;
  if (any_repeated) c.p_value = mann_whitney_p(c.current, c.baseline);
  const auto [bmin, bmax] = std::minmax_element(c.baseline.begin(), c.baseline.end());
  const auto [cmin, cmax] = std::minmax_element(c.current.begin(), c.current.end());
  // The current median beyond every baseline repetition by far more than the threshold is a
  // change whatever a U test of a few repetitions can say (3 of 5 repetitions 3x slower).
  const bool median_beyond_spread = c.current_median > *bmax || c.current_median < *bmin;
  if (std::fabs(change) <= options.threshold) {
    c.verdict = Verdict::unchanged;
    c.detail = "within the threshold";
  } else if (!any_repeated) {
    c.verdict = change > 0 ? Verdict::regression : Verdict::improved;
    c.detail = "beyond the threshold; no repetitions, so the noise is unknown";
  } else {
    // Small samples cannot reach alpha; then the change must clear the whole spread instead.
    const bool testable = both_repeated && smallest_u_test_p(c.baseline.size(), c.current.size()) < options.alpha;
    const bool separated = *cmin > *bmax || *cmax < *bmin;
    const bool far_beyond = median_beyond_spread && std::fabs(change) > kFarBeyondThresholds * options.threshold;
    if (testable ? c.p_value < options.alpha : separated) {
      c.verdict = change > 0 ? Verdict::regression : Verdict::improved;
      c.detail = testable ? "U test p < alpha" : "beyond the threshold and every repetition";
    } else if (far_beyond) {
      c.verdict = change > 0 ? Verdict::regression : Verdict::improved;
      c.detail = "the median beyond every baseline repetition and " + format_fixed(kFarBeyondThresholds, 0) +
                 "x the threshold";
    } else {
      c.verdict = Verdict::within_noise;
      c.detail = testable ? "U test p >= alpha" : "the repetitions overlap";
    }
  }
  return c;
}

// ddpbench's speed against `floor` x PyTorch's over back-to-back pairs: below the floor only
// beyond the noise (the U test where the pairs are enough for it, else every pair below).
TwinComparison compare_with_twin(const RowSummary& row, const ResultDocument& doc, const std::string& metric,
                                 double floor, double alpha) {
  TwinComparison t;
  t.mode = row.mode;
  t.metric = metric;
  t.floor = floor;
  std::vector<double> ours, floored_theirs;
  const std::string& ours_name = row.pytorch->ddpbench_name.empty() ? row.name : row.pytorch->ddpbench_name;
  t.row = ours_name;  // on CPUs the row without SyncBatchNorm, as its twin ran
  for (const auto& a : doc.runs) {
    if (a.name != ours_name || a.mode != row.mode || a.status != RunStatus::ok) continue;
    for (const auto& b : doc.runs) {
      if (b.name != row.pytorch->name || b.mode != row.mode || b.repetition != a.repetition || b.status != RunStatus::ok) {
        continue;
      }
      const bool epoch = metric == "train_time_s";
      const double our_speed = epoch ? 1.0 / a.train_time_s : a.steady_images_per_s;
      const double their_speed = epoch ? 1.0 / b.train_time_s : b.steady_images_per_s;
      if (!std::isfinite(our_speed) || !std::isfinite(their_speed) || !(their_speed > 0)) continue;
      ours.push_back(our_speed);
      floored_theirs.push_back(floor * their_speed);
      t.ratios.push_back(our_speed / their_speed);
    }
  }
  if (t.ratios.empty()) {
    t.verdict = Verdict::regression;
    t.detail = "no back-to-back pair measured " + metric + " on both sides";
    return t;
  }
  t.median_ratio = median(t.ratios);
  if (ours.size() > 1) t.p_value = mann_whitney_p(ours, floored_theirs);
  const bool testable = ours.size() > 1 && smallest_u_test_p(ours.size(), ours.size()) < alpha;
  const bool every_pair_below = std::all_of(t.ratios.begin(), t.ratios.end(), [&](double r) { return r < floor; });
  if (t.median_ratio >= floor) {
    t.verdict = Verdict::unchanged;
    t.detail = "at or above the floor";
  } else if (testable ? t.p_value < alpha : every_pair_below) {
    t.verdict = Verdict::regression;
    t.detail = testable ? "below the floor, U test p < alpha" : "every pair below the floor";
  } else {
    t.verdict = Verdict::within_noise;
    t.detail = testable ? "below the floor within the noise (U test p >= alpha)" : "pairs on both sides of the floor";
  }
  return t;
}

}  // namespace

json comparable_config(const json& config) {
  json c = config;
  for (const char* key : kIgnoredConfigKeys) c.erase(key);
  // Files from before --nodes ran on one node.
  if (c.is_object() && !c.contains("nodes")) c["nodes"] = 1;
  return c;
}

bool runs_the_same(const json& a, const json& b) {
  if (comparable_config(a) != comparable_config(b)) return false;
  for (const char* key : {"inject-slowdown", "inject-slowdown-rank", "inject-slowdown-phase"}) {
    const json none = nullptr;
    if ((a.contains(key) ? a.at(key) : none) != (b.contains(key) ? b.at(key) : none)) return false;
  }
  return true;
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
  const auto regressed = [](const auto& c) { return c.verdict == Verdict::regression; };
  return !failed_rows.empty() || !missing_rows.empty() || std::any_of(metrics.begin(), metrics.end(), regressed) ||
         std::any_of(pytorch.begin(), pytorch.end(), regressed);
}

void check_result_rows(const ResultDocument& doc, const std::string& side) { check_rows(doc, side); }

void check_baseline_unslowed(const ResultDocument& doc, const std::string& side) {
  for (const auto& r : doc.runs) {
    if (!r.config.is_object() || !r.config.contains("inject-slowdown")) continue;
    const json& slowdown = r.config.at("inject-slowdown");
    if (slowdown.is_null() || (slowdown.is_number() && slowdown.get<double>() == 0)) continue;
    const std::string run = side + ": " + row_label(r.name, r.mode) + " repetition " + std::to_string(r.repetition);
    if (!slowdown.is_number() || !(slowdown.get<double>() > 0)) {
      throw InputError(run + " has inject-slowdown " + slowdown.dump() +
                       ": ddpbench writes a fraction of 0 or more (an edited file)");
    }
    throw InputError(run + " ran with --inject-slowdown " + slowdown.dump() +
                     ": a baseline slowed on purpose hides any regression up to that size (a slowdown is injected "
                     "into the candidate, to measure the gate)");
  }
}

double metric_value(const RunResult& run, const std::string& metric) { return metric_of(run, metric); }

Comparison compare_results(const ResultDocument& baseline, const ResultDocument& current, const CompareOptions& options) {
  std::vector<const MetricInfo*> metrics;
  std::vector<std::string> metric_names;
  for (const auto& m : options.metrics) {
    metrics.push_back(&find_named(std::span<const MetricInfo>(comparable_metrics()), m, "--metric", "metric"));
    metric_names.push_back(metrics.back()->name);
  }
  Comparison result;
  check_rows(baseline, "the baseline");
  check_rows(current, "the current file");
  check_baseline_unslowed(baseline, "the baseline");
  std::vector<std::string> env = environment_differences(baseline.environment, current.environment);

  const Rows base_rows = rows_of(baseline);
  const Rows cur_rows = rows_of(current);
  for (const auto& name : options.allow_missing) {
    const bool known = std::any_of(base_rows.begin(), base_rows.end(), [&](const auto& row) { return row.first.first == name; });
    if (!known) throw InputError("--allow-missing: the baseline has no row '" + name + "'");
  }
  const Normaliser normaliser(options, baseline, current, base_rows, cur_rows, metric_names);
  // PyTorch's twins (sweep --reference) are the reference, not the code under test: they must
  // run as in the baseline, and their speed gates through --min-vs-pytorch, not here.
  // Which rows are twins is the baseline's to say: a current file that names one of the rows
  // under test a twin would exempt it from timing. A twin is PyTorch's own implementation.
  std::set<RowKey> twins;
  const auto baseline_twins = twin_names(baseline);
  for (const auto& [row, twin] : baseline_twins) twins.insert({twin, row.second});
  for (const auto& [row, twin] : twin_names(current)) {
    const auto in_baseline = baseline_twins.find(row);
    if (in_baseline != baseline_twins.end() && in_baseline->second != twin) {
      throw InputError("the current file names " + twin + " the PyTorch twin of " + row_label(row.first, row.second) +
                       ", the baseline " + in_baseline->second + ": they were planned differently");
    }
    if (base_rows.count({twin, row.second}) != 0 && twins.count({twin, row.second}) == 0) {
      throw InputError("the current file names " + row_label(twin, row.second) + " a PyTorch twin (of " + row.first +
                       "), which the baseline runs as a row under test");
    }
  }
  for (const ResultDocument* doc : {&baseline, &current}) {
    for (const auto& r : doc->runs) {
      if (twins.count({r.name, r.mode}) != 0 && !r.strategy.empty() && !r.strategy.starts_with("torch-")) {
        throw InputError(std::string(doc == &baseline ? "the baseline" : "the current file") + ": " +
                         row_label(r.name, r.mode) + " is named a PyTorch twin but ran --strategy " + r.strategy);
      }
    }
  }
  const auto allowed = [&](const std::string& name) {
    return std::find(options.allow_missing.begin(), options.allow_missing.end(), name) != options.allow_missing.end();
  };

  int64_t matched = 0;
  for (const auto& [key, base_runs] : base_rows) {
    const std::string row = row_label(key.first, key.second);
    // Fail closed: what ran in the baseline and cannot be measured now is a regression,
    // unless the user said it may be missing.
    const bool may_be_missing = allowed(key.first);  // a lambda may not capture a structured binding (clang)
    const auto missing = [&](const std::string& why) {
      (may_be_missing ? result.allowed_missing : result.missing_rows).push_back(row + ": " + why);
    };
    if (!any_ok(base_runs)) {
      result.not_compared.push_back(row + ": did not run in the baseline (" +
                                    std::string(status_name(base_runs.front()->status)) + ")");
      continue;
    }
    auto it = cur_rows.find(key);
    if (it == cur_rows.end()) {
      missing("ran in the baseline, absent now");
      continue;
    }
    const auto& cur_runs = it->second;
    const std::string difference = config_difference(comparable_config(base_runs.front()->config), comparable_config(cur_runs.front()->config));
    if (!difference.empty()) {
      missing("configured differently now, so not the same measurement (" + difference + ")");
      continue;
    }
    if (base_runs.front()->dataset != cur_runs.front()->dataset && !base_runs.front()->dataset.empty() &&
        !cur_runs.front()->dataset.empty()) {
      env.push_back("dataset of " + row + ": " + base_runs.front()->dataset + " vs " + cur_runs.front()->dataset);
    }
    ++matched;
    if (!any_ok(cur_runs)) {
      const auto failed = std::find_if(cur_runs.begin(), cur_runs.end(), [](auto* r) { return r->status == RunStatus::failed; });
      if (failed != cur_runs.end()) {
        result.failed_rows.push_back(row + ": failed: " + (*failed)->reason);
      } else {
        missing(std::string(status_name(cur_runs.front()->status)) + " now: " + cur_runs.front()->reason);
      }
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
    // Repetitions that did not run are left out of the comparison, and said so.
    for (const bool in_baseline : {true, false}) {
      const auto& runs = in_baseline ? base_runs : cur_runs;
      std::vector<const RunResult*> unrun;
      for (const RunResult* r : runs) {
        if (r->status == RunStatus::skipped || r->status == RunStatus::interrupted) unrun.push_back(r);
      }
      if (unrun.empty()) continue;
      result.partial_rows.push_back(row + ": " + std::to_string(unrun.size()) + " of " + std::to_string(runs.size()) +
                                    " repetitions did not run in " + (in_baseline ? "the baseline" : "the current file") +
                                    " (" + std::string(status_name(unrun.front()->status)) + ": " +
                                    unrun.front()->reason + "); compared over the others");
    }
    if (twins.count(key) != 0) {
      result.not_compared.push_back(row + ": PyTorch's twin: checked to have run; its speed is judged against its "
                                          "row's (--min-vs-pytorch)");
      continue;
    }
    if (const std::string how = normaliser.note(key); !how.empty()) result.notes.push_back(row + ": " + how);
    for (const MetricInfo* info : metrics) {
      std::vector<double> base = normaliser.values_of(true, base_runs, info->name);
      std::vector<double> cur = normaliser.values_of(false, cur_runs, info->name);
      if (base.empty()) {
        result.not_compared.push_back(row + ": " + info->name + " not measured in the baseline");
      } else if (cur.empty()) {
        missing(info->name + " measured in the baseline, not now");
      } else {
        result.metrics.push_back(compare_metric(key, *info, std::move(base), std::move(cur), options));
      }
    }
  }
  for (const auto& [key, runs] : cur_rows) {
    if (base_rows.count(key) == 0) result.not_compared.push_back(row_label(key.first, key.second) + ": only in the current file");
  }
  if (!env.empty() && !options.allow_env_mismatch) {
    std::string text;
    for (const auto& e : env) text += (text.empty() ? "" : "; ") + e;
    throw InputError("the results come from different environments (" + text + "); --allow-env-mismatch compares them anyway");
  }
  result.environment_differences = env;
  if (options.min_vs_pytorch) {
    // The floor checks the speeds among the metrics that gate (both where neither is asked).
    std::vector<std::string> twin_metrics;
    for (const char* metric : {"train_time_s", "steady_images_per_s"}) {
      if (std::find(metric_names.begin(), metric_names.end(), metric) != metric_names.end()) twin_metrics.push_back(metric);
    }
    if (twin_metrics.empty()) twin_metrics = {"train_time_s", "steady_images_per_s"};
    bool any_twin = false;
    for (const RowSummary& r : summarize_sweep(current)) {
      if (!r.pytorch) continue;
      any_twin = true;
      if (r.status != RunStatus::ok) continue;  // the row's own failure is the row's verdict
      if (r.pytorch->status != RunStatus::ok) {
        result.without_twin.push_back(row_label(r.name, r.mode) + ": its PyTorch twin " + r.pytorch->name + " is " +
                                      std::string(status_name(r.pytorch->status)) + " (" + r.pytorch->reason + ")");
        continue;
      }
      for (const auto& metric : twin_metrics) {
        result.pytorch.push_back(compare_with_twin(r, current, metric, *options.min_vs_pytorch, options.alpha));
      }
    }
    if (!any_twin) {
      throw InputError("--min-vs-pytorch: the current file has no PyTorch twin rows (run the sweep with --reference)");
    }
  }
  if (matched == 0) {
    std::string why;
    for (const auto& m : result.missing_rows) {
      if (m.find("configured differently") != std::string::npos) why += (why.empty() ? "" : "; ") + m;
    }
    throw InputError("the two result files have no row in common (by name, mode and configuration)" +
                     (why.empty() ? std::string() : ": " + why));
  }
  return result;
}

std::string markdown_comparison(const Comparison& c, const CompareOptions& options) {
  std::ostringstream md;
  md << "| row | metric | baseline | current | ratio | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n";
  for (const auto& m : c.metrics) {
    const int decimals = options.normalize_by ? 3 : (m.metric == "test_accuracy" ? 4 : 3);
    md << "| " << row_label(m.row, m.mode) << " | " << m.metric << (options.normalize_by ? " / " + *options.normalize_by : "")
       << " | " << format_fixed(m.baseline_median, decimals) << " | " << format_fixed(m.current_median, decimals) << " | "
       << format_fixed(m.ratio, 3) << " | " << verdict_name(m.verdict) << " (" << m.detail;
    if (std::isfinite(m.p_value)) md << "; p = " << format_fixed(m.p_value, 3);
    md << "; n = " << m.baseline.size() << " vs " << m.current.size() << ") |\n";
  }
  if (!c.pytorch.empty()) {
    md << "\nddpbench against its PyTorch twin (current file; speed ratio, above 1.00x ddpbench is faster; floor "
       << format_fixed(*options.min_vs_pytorch, 2) << "x):\n\n"
       << "| row | metric | median ratio | range | pairs | verdict |\n| --- | --- | ---: | --- | ---: | --- |\n";
    for (const auto& t : c.pytorch) {
      md << "| " << row_label(t.row, t.mode) << " | " << (t.metric == "train_time_s" ? "epoch speed" : "steady images/s")
         << " | " << format_fixed(t.median_ratio, 2) << "x | ";
      if (!t.ratios.empty()) {
        const auto [low, high] = std::minmax_element(t.ratios.begin(), t.ratios.end());
        md << format_fixed(*low, 2) << "x–" << format_fixed(*high, 2) << "x";
      }
      md << " | " << t.ratios.size() << " | " << verdict_name(t.verdict) << " (" << t.detail;
      if (std::isfinite(t.p_value)) md << "; p = " << format_fixed(t.p_value, 3);
      md << ") |\n";
    }
  }
  for (const auto& f : c.failed_rows) md << "\n- REGRESSION: " << f;
  for (const auto& f : c.missing_rows) md << "\n- REGRESSION (missing now; --allow-missing ROW allows it): " << f;
  for (const auto& f : c.allowed_missing) md << "\n- missing now, allowed by --allow-missing: " << f;
  for (const auto& p : c.partial_rows) md << "\n- compared over part of its repetitions: " << p;
  for (const auto& n : c.notes) md << "\n- " << n;
  for (const auto& w : c.without_twin) md << "\n- not checked against PyTorch: " << w;
  for (const auto& n : c.not_compared) md << "\n- not compared: " << n;
  for (const auto& e : c.environment_differences) md << "\n- environment differs (allowed): " << e;
  const bool listed = !c.failed_rows.empty() || !c.missing_rows.empty() || !c.allowed_missing.empty() ||
                      !c.partial_rows.empty() || !c.notes.empty() || !c.without_twin.empty() ||
                      !c.not_compared.empty() || !c.environment_differences.empty();
  md << (listed ? "\n" : "");
  md << "\n" << (c.regression() ? "Regression" : "No regression") << " (threshold " << format_percent(options.threshold)
     << ", alpha " << format_fixed(options.alpha, 2) << ").\n";
  return md.str();
}

}  // namespace ddpbench
