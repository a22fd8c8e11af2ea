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

  Normaliser(const CompareOptions& options, const ProvenResults& baseline_file, const ProvenResults& current_file,
             const Rows& baseline, const Rows& current, const std::vector<std::string>& metrics)
      : twin_(options.normalize_by == kTwin), baseline_file_(baseline_file), current_file_(current_file) {
    if (!options.normalize_by) return;
    if (twin_) {
      pair_twins(baseline_file.document(), current_file.document(), baseline, current);
      find_other_settings();
    } else {
      yardstick_ = *options.normalize_by;
      measure_yardstick(baseline_file.document(), baseline, current, metrics);
    }
  }

  // --normalize-by twin: the row's values now have nothing to be divided by (its twin, or the
  // one that stands in for it, ran no repetition now); empty where they have.
  [[nodiscard]] std::string missing_divisor(const RowKey& row) const {
    if (!twin_ || twin_runs_.count({true, row}) == 0) return {};
    const auto own = twins_.find(true);
    const std::string name = substitutes_.count(row) != 0 || own == twins_.end() || own->second.count(row) == 0
                                 ? "that stands in for its own"
                                 : own->second.at(row);
    if (twin_runs_.count({false, row}) == 0) {
      return "the PyTorch twin " + name + " ran no repetition now, so nothing divides its values (--normalize-by twin)";
    }
    if (const auto it = other_settings_.find(row); it != other_settings_.end()) {
      return "the PyTorch twin " + name + " runs other settings now (" + it->second +
             "), so dividing by it compares other work (--normalize-by twin)";
    }
    return {};
  }

  // --normalize-by ROW's row: divided by itself it reads 1 whatever it did.
  [[nodiscard]] bool is_yardstick(const RowKey& row) const { return !yardstick_.empty() && row.first == yardstick_; }

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
    if (!baseline && other_settings_.count(row) != 0) return out;  // divides nothing (missing_divisor says why)
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
  void pair_twins(const ResultDocument& baseline_doc, const ResultDocument& current_doc, const Rows& baseline,
                  const Rows& current) {
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
  }

  // The named row's median per mode, on both sides: a gate on ratios to a row that did not run
  // has nothing to divide by (bad input, not a verdict).
  void measure_yardstick(const ResultDocument& baseline_doc, const Rows& baseline, const Rows& current,
                         const std::vector<std::string>& metrics) {
    std::vector<std::string> modes;  // the baseline's, in the order its rows ran
    for (const auto& r : baseline_doc.runs) {
      if (std::find(modes.begin(), modes.end(), r.mode) == modes.end()) modes.push_back(r.mode);
    }
    for (const auto& mode : modes) {
      for (const bool in_baseline : {true, false}) {
        const Rows& rows = in_baseline ? baseline : current;
        const std::string side = in_baseline ? "the baseline" : "the current file";
        const std::string row = row_label(yardstick_, mode);
        const auto it = rows.find({yardstick_, mode});
        if (it == rows.end()) throw InputError("--normalize-by " + yardstick_ + ": " + side + " has no row " + row);
        if (!any_ok(it->second)) {
          const RunResult& first = *it->second.front();
          throw InputError("--normalize-by " + yardstick_ + ": " + row + " did not run in " + side + " (" +
                           std::string(status_name(first.status)) + ": " + first.reason + ")");
        }
        if (!in_baseline) require_same_settings(baseline.at({yardstick_, mode}), it->second, row);
        for (const auto& metric : metrics) {
          const double m = median(values(it->second, metric, 1.0));
          if (!(m > 0) || !std::isfinite(m)) {
            throw InputError("--normalize-by " + yardstick_ + ": " + row + " has no " + metric + " to divide by in " + side);
          }
          divisors_[{in_baseline, mode + "/" + metric}] = m;
        }
      }
    }
  }

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

  // How a divisor's settings differ on the two sides (empty where either did not run): one
  // configured otherwise measures other work (a `single` of twice the steps hid a 1.9x slower
  // ddp-2 under --allow-missing).
  [[nodiscard]] std::string divisor_difference(const RunResult* in_baseline, const RunResult* now) const {
    if (in_baseline == nullptr || now == nullptr) return {};
    return settings_difference(*in_baseline, baseline_file_, *now, current_file_);
  }

  static const RunResult* first_ok(const std::vector<const RunResult*>& runs) {
    for (const RunResult* r : runs) {
      if (r->status == RunStatus::ok) return r;
    }
    return nullptr;
  }

  void require_same_settings(const std::vector<const RunResult*>& base_runs, const std::vector<const RunResult*>& cur_runs,
                             const std::string& row) const {
    if (const std::string differs = divisor_difference(first_ok(base_runs), first_ok(cur_runs)); !differs.empty()) {
      throw InputError("--normalize-by " + yardstick_ + ": " + row + " runs other settings in the two files (" +
                       differs + "), so dividing by it compares other work");
    }
  }

  void find_other_settings() {
    for (const auto& [key, base_runs] : twin_runs_) {
      if (!key.first) continue;
      const auto cur = twin_runs_.find({false, key.second});
      if (cur == twin_runs_.end() || base_runs.empty() || cur->second.empty()) continue;
      if (std::string differs = divisor_difference(base_runs.begin()->second, cur->second.begin()->second);
          !differs.empty()) {
        other_settings_[key.second] = std::move(differs);
      }
    }
  }

  bool twin_ = false;
  const ProvenResults& baseline_file_;
  const ProvenResults& current_file_;
  std::map<RowKey, std::string> other_settings_;  // row -> how its twin's settings differ now
  std::string yardstick_;  // --normalize-by ROW
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
    } else if (change > 0) {
      // Slower past the threshold, and the noise cannot tell: the data do not exclude a
      // regression, so "no regression" would be a pass that could not have seen one.
      c.verdict = Verdict::cannot_judge;
      c.detail = "too noisy: the median is " + format_fixed(change * 100, 1) + " % worse, past the " +
                 format_percent(options.threshold) + " threshold, and " +
                 (testable ? "the U test cannot tell it from the noise (p >= alpha)" : "the repetitions overlap");
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
    case Verdict::cannot_judge: return "CANNOT JUDGE";
  }
  return "?";
}

bool Comparison::regression() const {
  const auto regressed = [](const auto& c) { return c.verdict == Verdict::regression; };
  return !failed_rows.empty() || !missing_rows.empty() || std::any_of(metrics.begin(), metrics.end(), regressed) ||
         std::any_of(pytorch.begin(), pytorch.end(), regressed);
}

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

namespace {

std::vector<const MetricInfo*> chosen_metrics(const std::vector<std::string>& names) {
  std::vector<const MetricInfo*> metrics;
  for (const auto& m : names) {
    metrics.push_back(&find_named(std::span<const MetricInfo>(comparable_metrics()), m, "--metric", "metric"));
  }
  return metrics;
}

void require_rows_known(const std::vector<std::string>& allow_missing, const Rows& base_rows) {
  for (const auto& name : allow_missing) {
    const bool known = std::any_of(base_rows.begin(), base_rows.end(), [&](const auto& row) { return row.first.first == name; });
    if (!known) throw InputError("--allow-missing: the baseline has no row '" + name + "'");
  }
}

// PyTorch's twins (sweep --reference) are the reference, not the code under test: they must
// run as in the baseline, and their speed gates through --min-vs-pytorch, not here. Which rows
// are twins is the baseline's to say: a current file that names one of the rows under test a
// twin would exempt it from timing. A twin is PyTorch's own implementation.
std::set<RowKey> agreed_twins(const ResultDocument& baseline, const ResultDocument& current, const Rows& base_rows) {
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
  return twins;
}

int64_t count_status(const std::vector<const RunResult*>& runs, RunStatus status) {
  return std::count_if(runs.begin(), runs.end(), [&](const RunResult* r) { return r->status == status; });
}

const RunResult* first_with(const std::vector<const RunResult*>& runs, RunStatus status) {
  const auto it = std::find_if(runs.begin(), runs.end(), [&](const RunResult* r) { return r->status == status; });
  return it == runs.end() ? nullptr : *it;
}

// One row of the baseline being judged: what it is called, and where its findings go.
struct RowJudgement {
  RowKey key;
  std::string label;
  bool allowed_missing;
  Comparison& result;
  void missing(const std::string& why) const {
    (allowed_missing ? result.allowed_missing : result.missing_rows).push_back(label + ": " + why);
  }
};

// A row the baseline did not run is no yardstick: skipped (it cannot run there) is not
// compared; failed or cut short, the gate has nothing to judge the current row by.
bool ran_in_baseline(const RowJudgement& row, const std::vector<const RunResult*>& base_runs) {
  if (any_ok(base_runs)) return true;
  const RunResult* broken = first_with(base_runs, RunStatus::failed);
  if (broken == nullptr) broken = first_with(base_runs, RunStatus::interrupted);
  if (broken == nullptr || row.allowed_missing) {
    row.result.not_compared.push_back(row.label + ": did not run in the baseline (" +
                                      std::string(status_name(base_runs.front()->status)) + ")");
  } else {
    row.result.cannot_judge.push_back(row.label + ": " + std::string(status_name(broken->status)) +
                                      " in every repetition of the baseline (" + broken->reason +
                                      "), so nothing judges it now (--allow-missing ROW leaves it out)");
  }
  return false;
}

// A row that ran in the baseline and did not run now fails closed: failed is a regression,
// skipped or interrupted is missing (a regression unless allowed).
bool ran_now(const RowJudgement& row, const std::vector<const RunResult*>& cur_runs) {
  if (any_ok(cur_runs)) return true;
  if (const RunResult* failed = first_with(cur_runs, RunStatus::failed)) {
    row.result.failed_rows.push_back(row.label + ": failed: " + failed->reason);
  } else {
    row.missing(std::string(status_name(cur_runs.front()->status)) + " now: " + cur_runs.front()->reason);
  }
  return false;
}

}  // namespace

std::vector<std::string> planned_rows_absent_from_both(const ResultDocument& a, const ResultDocument& b) {
  std::set<RowKey> present;
  for (const ResultDocument* doc : {&a, &b}) {
    for (const RunResult& r : doc->runs) present.insert({r.name, r.mode});
  }
  std::vector<std::string> out;
  std::set<RowKey> named;
  for (const ResultDocument* doc : {&a, &b}) {
    if (!doc->sweep) continue;
    for (const SweepRowInfo& info : doc->sweep->rows) {
      const RowKey key{info.name, info.mode};
      if (present.count(key) != 0 || !named.insert(key).second) continue;
      out.push_back(row_label(info.name, info.mode) + ": planned (" + std::to_string(doc->sweep->repeat) +
                    (doc->sweep->repeat == 1 ? " repetition" : " repetitions") +
                    ") and absent from both files (a sweep cut short, or an edited file): nothing of it is compared");
    }
  }
  return out;
}

// Found from the gaps between the present repetitions: a sweep cut short between rows leaves
// them out altogether.
std::string absent_repetitions(const std::vector<const RunResult*>& runs, int64_t planned, const std::string& side) {
  std::set<int64_t> present;
  for (const RunResult* r : runs) present.insert(r->repetition);
  std::string absent;  // as ranges: "1, 3-4"; found from the gaps between the present ones, so that
  int64_t count = 0;   // a file planning 2^62 repetitions costs no more than one planning 5
  const auto gap = [&](int64_t first, int64_t last) {
    absent += (absent.empty() ? "" : ", ") + std::to_string(first) + (last > first ? "-" + std::to_string(last) : "");
    count += last - first + 1;
  };
  int64_t next = 0;  // the first repetition not yet accounted for
  for (const int64_t k : present) {
    if (k < next || k >= planned) continue;
    if (k > next) gap(next, k - 1);
    next = k + 1;
  }
  if (next < planned) gap(next, planned - 1);
  if (count == 0) return {};
  return std::to_string(count) + " of " + std::to_string(planned) + " planned repetitions (" + absent +
         ") are absent from " + side + " (a sweep cut short, or an edited file)";
}

namespace {

// A repetition that fails now, where none did in the baseline, is a regression however well
// the others ran; repetitions that did not run, or that the sweep planned and the file lacks,
// are left out, and said so with how many.
void note_repetitions(const RowJudgement& row, const std::vector<const RunResult*>& base_runs,
                      const std::vector<const RunResult*>& cur_runs, const std::pair<int64_t, int64_t>& planned) {
  if (count_status(base_runs, RunStatus::failed) == 0 && count_status(cur_runs, RunStatus::failed) > 0) {
    row.result.failed_rows.push_back(row.label + ": " + std::to_string(count_status(cur_runs, RunStatus::failed)) +
                                     " of " + std::to_string(cur_runs.size()) +
                                     " repetitions failed (none in the baseline): " +
                                     first_with(cur_runs, RunStatus::failed)->reason);
  }
  for (const bool in_baseline : {true, false}) {
    const auto& runs = in_baseline ? base_runs : cur_runs;
    std::vector<const RunResult*> unrun;
    for (const RunResult* r : runs) {
      if (r->status == RunStatus::skipped || r->status == RunStatus::interrupted) unrun.push_back(r);
    }
    if (unrun.empty()) continue;
    row.result.partial_rows.push_back(row.label + ": " + std::to_string(unrun.size()) + " of " +
                                      std::to_string(runs.size()) + " repetitions did not run in " +
                                      (in_baseline ? "the baseline" : "the current file") + " (" +
                                      std::string(status_name(unrun.front()->status)) + ": " + unrun.front()->reason +
                                      "); compared over the others");
  }
  for (const bool in_baseline : {true, false}) {
    const std::string absent = absent_repetitions(in_baseline ? base_runs : cur_runs,
                                                  in_baseline ? planned.first : planned.second,
                                                  in_baseline ? "the baseline" : "the current file");
    if (!absent.empty()) row.result.partial_rows.push_back(row.label + ": " + absent + "; compared over the others");
  }
}

void judge_metrics(const RowJudgement& row, const std::vector<const RunResult*>& base_runs,
                   const std::vector<const RunResult*>& cur_runs, const std::vector<const MetricInfo*>& metrics,
                   const Normaliser& normaliser, const CompareOptions& options) {
  if (normaliser.is_yardstick(row.key)) {
    const std::string why = row.label + ": the row every other is divided by (--normalize-by): divided by itself it "
                                        "reads 1 whatever it did";
    if (row.allowed_missing) {
      row.result.not_compared.push_back(why);
    } else {
      row.result.cannot_judge.push_back(why + " (--allow-missing " + row.key.first + " leaves it unjudged)");
    }
    return;
  }
  if (const std::string how = normaliser.note(row.key); !how.empty()) row.result.notes.push_back(row.label + ": " + how);
  for (const MetricInfo* info : metrics) {
    std::vector<double> base = normaliser.values_of(true, base_runs, info->name);
    std::vector<double> cur = normaliser.values_of(false, cur_runs, info->name);
    if (base.empty()) {
      row.result.cannot_judge.push_back(row.label + ": " + info->name +
                                        " not measured in the baseline, so nothing judges it now");
    } else if (cur.empty()) {
      const std::string divisor = normaliser.missing_divisor(row.key);
      if (divisor.empty()) {
        row.missing(info->name + " measured in the baseline, not now");
      } else {
        row.result.cannot_judge.push_back(row.label + ": " + info->name + ": " + divisor);
      }
    } else {
      row.result.metrics.push_back(compare_metric(row.key, *info, std::move(base), std::move(cur), options));
      const MetricComparison& c = row.result.metrics.back();
      if (c.verdict == Verdict::cannot_judge) row.result.cannot_judge.push_back(row.label + ": " + info->name + ": " + c.detail);
    }
  }
}

// The floor checks the speeds among the metrics that gate (both where neither is asked). A
// twin skipped now (it needs CUDA) is said so; a twin that failed or was cut short leaves the
// floor nothing to judge by.
void judge_floor(const ResultDocument& current, const std::vector<std::string>& metric_names,
                 const CompareOptions& options, Comparison& result) {
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
      const std::string why = row_label(r.name, r.mode) + ": its PyTorch twin " + r.pytorch->name + " is " +
                              std::string(status_name(r.pytorch->status)) + " (" + r.pytorch->reason + ")";
      (r.pytorch->status == RunStatus::skipped ? result.without_twin : result.cannot_judge).push_back(why);
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

// What every row is judged with.
struct RowRules {
  const ProvenResults& baseline;
  const ProvenResults& current;
  std::pair<int64_t, int64_t> planned_repetitions;  // each file's sweep's repeat (1 without a sweep)
  const std::vector<const MetricInfo*>& metrics;
  const Normaliser& normaliser;
  const std::set<RowKey>& twins;
  const CompareOptions& options;
};

// One row of the baseline, rule by rule: ran there, present now, the same settings, ran now,
// its repetitions, then its metrics. Whether it was matched (same name, mode and settings).
bool judge_row(const RowJudgement& row, const std::vector<const RunResult*>& base_runs,
               const std::vector<const RunResult*>* cur_runs, const RowRules& rules,
               std::vector<EnvironmentDifference>& env) {
  if (!ran_in_baseline(row, base_runs)) return false;
  if (cur_runs == nullptr) {
    row.missing("ran in the baseline, absent now");
    return false;
  }
  const RunResult& base = *base_runs.front();
  const RunResult& cur = *cur_runs->front();
  const std::string difference = settings_difference(base, rules.baseline, cur, rules.current);
  if (!difference.empty()) {
    row.missing("configured differently now, so not the same measurement (" + difference + ")");
    return false;
  }
  const auto differences = row_environment_differences(row.label, base_runs, *cur_runs);
  env.insert(env.end(), differences.begin(), differences.end());
  if (!ran_now(row, *cur_runs)) return true;
  note_repetitions(row, base_runs, *cur_runs, rules.planned_repetitions);
  if (rules.twins.count(row.key) != 0) {
    row.result.not_compared.push_back(row.label + ": PyTorch's twin: checked to have run; its speed is judged "
                                                  "against its row's (--min-vs-pytorch)");
    return true;
  }
  judge_metrics(row, base_runs, *cur_runs, rules.metrics, rules.normaliser, rules.options);
  return true;
}

// Nothing timed is nothing judged: every row allowed missing, not run, or a twin, and no floor
// checked. No regression then would be a pass that measured nothing.
void require_something_timed(Comparison& result) {
  if (!result.metrics.empty() || !result.pytorch.empty() || result.regression()) return;
  result.cannot_judge.push_back("nothing was timed: no row of the baseline had a metric compared with the current "
                                "file (every row missing and allowed, not run in the baseline, or a twin)");
}

void require_common_row(int64_t matched, const Comparison& result) {
  if (matched > 0) return;
  std::string why;
  for (const auto& m : result.missing_rows) {
    if (m.find("configured differently") != std::string::npos) why += (why.empty() ? "" : "; ") + m;
  }
  throw InputError("the two result files have no row in common (by name, mode and configuration)" +
                   (why.empty() ? std::string() : ": " + why));
}

}  // namespace

Comparison compare_results(const ProvenResults& baseline_file, const ProvenResults& current_file,
                           const CompareOptions& options) {
  const ResultDocument& baseline = baseline_file.document();
  const ResultDocument& current = current_file.document();
  const std::vector<const MetricInfo*> metrics = chosen_metrics(options.metrics);
  std::vector<std::string> metric_names;
  for (const MetricInfo* m : metrics) metric_names.push_back(m->name);
  check_baseline_unslowed(baseline, "the baseline");
  check_allowed_aspects(options.allow_env_mismatch);
  Comparison result;
  result.failed_by_proof = failed_by_proofs(baseline_file, current_file);
  std::vector<EnvironmentDifference> env = environment_differences(baseline.environment, current.environment);
  const Rows base_rows = rows_of(baseline);
  const Rows cur_rows = rows_of(current);
  require_rows_known(options.allow_missing, base_rows);
  const Normaliser normaliser(options, baseline_file, current_file, base_rows, cur_rows, metric_names);
  const std::set<RowKey> twins = agreed_twins(baseline, current, base_rows);
  const RowRules rules{baseline_file,
                       current_file,
                       {baseline.sweep ? baseline.sweep->repeat : 1, current.sweep ? current.sweep->repeat : 1},
                       metrics,
                       normaliser,
                       twins,
                       options};
  int64_t matched = 0;
  for (const auto& [key, base_runs] : base_rows) {
    const bool allowed = std::count(options.allow_missing.begin(), options.allow_missing.end(), key.first) > 0;
    const auto it = cur_rows.find(key);
    matched += judge_row(RowJudgement{key, row_label(key.first, key.second), allowed, result}, base_runs,
                         it == cur_rows.end() ? nullptr : &it->second, rules, env) ? 1 : 0;
  }
  for (const auto& [key, runs] : cur_rows) {
    if (base_rows.count(key) == 0) result.not_compared.push_back(row_label(key.first, key.second) + ": only in the current file");
  }
  for (auto& absent : planned_rows_absent_from_both(baseline, current)) result.not_compared.push_back(std::move(absent));
  if (options.min_vs_pytorch) judge_floor(current, metric_names, options, result);
  require_common_row(matched, result);
  require_something_timed(result);
  // The one rule for environments, which both modes keep: another environment than allowed is
  // never judged, row by row or at all.
  return judged_in_one_environment(std::move(result), env, options.allow_env_mismatch);
}

namespace {

void metric_table(std::ostringstream& md, const Comparison& c, const CompareOptions& options) {
  md << "| row | metric | baseline | current | ratio | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n";
  for (const auto& m : c.metrics) {
    const int decimals = options.normalize_by ? 3 : (m.metric == "test_accuracy" ? 4 : 3);
    md << "| " << row_label(m.row, m.mode) << " | " << m.metric << (options.normalize_by ? " / " + *options.normalize_by : "")
       << " | " << format_fixed(m.baseline_median, decimals) << " | " << format_fixed(m.current_median, decimals) << " | "
       << format_fixed(m.ratio, 3) << " | " << verdict_name(m.verdict) << " (" << m.detail;
    if (std::isfinite(m.p_value)) md << "; p = " << format_fixed(m.p_value, 3);
    md << "; n = " << m.baseline.size() << " vs " << m.current.size() << ") |\n";
  }
}

void twin_table(std::ostringstream& md, const Comparison& c, const CompareOptions& options) {
  if (c.pytorch.empty()) return;
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

// Every finding outside the tables, a line each, worst first.
void finding_lines(std::ostringstream& md, const Comparison& c) {
  const std::pair<const char*, const std::vector<std::string>*> lists[] = {
      {"REGRESSION: ", &c.failed_rows},
      {"failed by the proof of its file: ", &c.failed_by_proof},
      {"CANNOT JUDGE: ", &c.cannot_judge},
      {"REGRESSION (missing now; --allow-missing ROW allows it): ", &c.missing_rows},
      {"missing now, allowed by --allow-missing: ", &c.allowed_missing},
      {"compared over part of its repetitions: ", &c.partial_rows},
      {"", &c.notes},
      {"not checked against PyTorch: ", &c.without_twin},
      {"not compared: ", &c.not_compared},
      {"environment differs (allowed): ", &c.environment_differences}};
  bool listed = false;
  for (const auto& [prefix, lines] : lists) {
    for (const auto& line : *lines) md << "\n- " << prefix << line;
    listed = listed || !lines->empty();
  }
  md << (listed ? "\n" : "");
}

}  // namespace

std::string comparison_file(std::string_view table) { return std::string(kComparisonFileMarker) + std::string(table); }

bool is_comparison_text(std::string_view text) { return text.starts_with(kComparisonFileMarker); }

std::string markdown_comparison(const Comparison& c, const CompareOptions& options) {
  std::ostringstream md;
  metric_table(md, c, options);
  twin_table(md, c, options);
  finding_lines(md, c);
  md << "\n" << (c.regression() ? "Regression" : c.cannot_judge_any() ? "Cannot judge" : "No regression")
     << " (threshold " << format_percent(options.threshold) << ", alpha " << format_fixed(options.alpha, 2) << ").\n";
  return md.str();
}

}  // namespace ddpbench
