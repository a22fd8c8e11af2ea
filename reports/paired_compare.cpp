#include "reports/paired_compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <sstream>

#include "harness/base/enum_names.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/statistics.hpp"
#include "harness/base/units.hpp"
#include "reports/environment_fingerprint.hpp"

namespace ddpbench {
namespace {

using RowKey = std::pair<std::string, std::string>;  // name, mode

std::map<RowKey, std::map<int64_t, const RunResult*>> rounds_of(const ResultDocument& doc) {
  std::map<RowKey, std::map<int64_t, const RunResult*>> rows;
  for (const auto& r : doc.runs) rows[{r.name, r.mode}][r.repetition] = &r;
  return rows;
}

bool any_ok(const std::map<int64_t, const RunResult*>& rounds) {
  return std::any_of(rounds.begin(), rounds.end(), [](const auto& r) { return r.second->status == RunStatus::ok; });
}

// "+11.8 %" / "-3.0 %": a signed relative change.
std::string signed_percent(double change) {
  if (!std::isfinite(change)) return "-";
  return (change >= 0 ? "+" : "-") + format_fixed(std::fabs(change) * 100, 1) + " %";
}

std::string p_text(double p) {
  if (!std::isfinite(p)) return "-";
  if (p < 1e-4) return "< 0.0001";
  return format_fixed(p, 4);
}

// Decides one comparison from its pairs, once Holm has adjusted its p-value.
void decide(PairedComparison& c, const PairedOptions& o, int64_t looks) {
  const auto n = static_cast<int64_t>(c.log_ratios.size());
  const double per_look_alpha = o.alpha / static_cast<double>(looks);
  const bool beyond = std::isfinite(c.change) && std::fabs(c.change) > o.threshold;
  const bool significant = std::isfinite(c.p_holm) && c.p_holm < per_look_alpha;
  const bool inside = std::isfinite(c.ci_low) && c.ci_low > -o.threshold && c.ci_high < o.threshold;
  const std::string pairs = std::to_string(n) + (n == 1 ? " pair" : " pairs");
  c.needs_more_rounds = false;
  if (n < o.min_rounds) {
    c.verdict = Verdict::within_noise;
    c.needs_more_rounds = true;
    c.why = pairs + ", fewer than the " + std::to_string(o.min_rounds) + " any verdict needs";
  } else if (beyond && significant) {
    c.verdict = c.change > 0 ? Verdict::regression : Verdict::improved;
    c.why = "beyond the " + format_percent(o.threshold) + " threshold; Holm p " + p_text(c.p_holm) +
            ", below alpha / " + std::to_string(looks) + " looks = " + format_fixed(per_look_alpha, 4);
  } else if (inside) {
    c.verdict = Verdict::unchanged;
    c.why = "its " + format_fixed((1 - o.alpha) * 100, 0) + " % CI inside ±" + format_percent(o.threshold);
  } else if (n < o.max_rounds) {
    c.verdict = Verdict::within_noise;
    c.needs_more_rounds = true;
    c.why = "undecided after " + pairs + ": the CI reaches past ±" + format_percent(o.threshold) +
            (beyond ? " and the test has not rejected" : "");
  } else {
    c.verdict = Verdict::within_noise;
    c.why = "still undecided at the cap of " + std::to_string(o.max_rounds) + " pairs: within the noise";
  }
}

}  // namespace

bool PairedResult::regression() const {
  return !failed_rows.empty() || std::any_of(comparisons.begin(), comparisons.end(), [](const PairedComparison& c) {
           return c.verdict == Verdict::regression;
         });
}

std::vector<std::string> PairedResult::undecided_rows() const {
  std::vector<std::string> rows;
  for (const auto& c : comparisons) {
    if (c.needs_more_rounds && std::find(rows.begin(), rows.end(), c.row) == rows.end()) rows.push_back(c.row);
  }
  return rows;
}

PairedResult compare_paired(const ResultDocument& baseline, const ResultDocument& candidate,
                            const PairedOptions& options) {
  if (!(options.min_rounds >= 2 && options.max_rounds >= options.min_rounds)) {
    throw InputError("--min-rounds must be at least 2 and --max-rounds at least --min-rounds (got " +
                     std::to_string(options.min_rounds) + " and " + std::to_string(options.max_rounds) + ")");
  }
  std::vector<const MetricInfo*> metrics;
  for (const auto& m : options.metrics) {
    metrics.push_back(&find_named(std::span<const MetricInfo>(comparable_metrics()), m, "--metric", "metric"));
  }
  check_result_rows(baseline, "the baseline build's file");
  check_result_rows(candidate, "the candidate's file");
  PairedResult result;
  result.looks = options.max_rounds - options.min_rounds + 1;
  result.environment_differences = environment_differences(baseline.environment, candidate.environment);
  if (!result.environment_differences.empty() && !options.allow_env_mismatch) {
    std::string text;
    for (const auto& e : result.environment_differences) text += (text.empty() ? "" : "; ") + e;
    throw InputError("the two builds ran in different environments (" + text +
                     "); a paired comparison runs both on one machine (--allow-env-mismatch compares them anyway)");
  }
  const auto base_rows = rounds_of(baseline);
  const auto cand_rows = rounds_of(candidate);
  for (const auto& name : options.allow_missing) {
    const bool known = std::any_of(base_rows.begin(), base_rows.end(), [&](const auto& row) { return row.first.first == name; });
    if (!known) throw InputError("--allow-missing: the baseline build's file has no row '" + name + "'");
  }
  const auto allowed = [&](const std::string& name) {
    return std::find(options.allow_missing.begin(), options.allow_missing.end(), name) != options.allow_missing.end();
  };
  for (const auto& [key, base] : base_rows) {
    const std::string label = row_label(key.first, key.second);
    if (!any_ok(base)) {
      result.not_compared.push_back(label + ": did not run on the baseline build");
      continue;
    }
    const auto cand = cand_rows.find(key);
    if (cand == cand_rows.end() || !any_ok(cand->second)) {
      const std::string why = cand == cand_rows.end() ? "absent" : "no round ran";
      (allowed(key.first) ? result.allowed_missing : result.failed_rows).push_back(label + ": " + why + " on the candidate");
      continue;
    }
    const std::string difference = config_difference(comparable_config(base.begin()->second->config),
                                                     comparable_config(cand->second.begin()->second->config));
    if (!difference.empty()) {
      throw InputError(label + " ran with other settings on the two builds (" + difference +
                       "); a paired comparison runs both on the same settings");
    }
    std::vector<int64_t> paired, one_sided;
    for (const auto& [round, run] : base) {
      const auto other = cand->second.find(round);
      const bool both = run->status == RunStatus::ok && other != cand->second.end() && other->second->status == RunStatus::ok;
      (both ? paired : one_sided).push_back(round);
    }
    for (const auto& [round, run] : cand->second) {
      if (base.count(round) == 0) one_sided.push_back(round);
    }
    if (!one_sided.empty()) {
      std::string list;
      for (const auto r : one_sided) list += (list.empty() ? "" : ", ") + std::to_string(r);
      result.unpaired_rounds.push_back(label + ": round(s) " + list + " ran on one side only; dropped");
    }
    for (const MetricInfo* info : metrics) {
      PairedComparison c;
      c.row = key.first;
      c.mode = key.second;
      c.metric = info->name;
      for (const auto round : paired) {
        const double b = metric_value(*base.at(round), info->name);
        const double a = metric_value(*cand->second.at(round), info->name);
        if (!(std::isfinite(a) && std::isfinite(b) && a > 0 && b > 0)) continue;
        c.rounds.push_back(round);
        c.log_ratios.push_back(info->higher_is_better ? std::log(b / a) : std::log(a / b));
      }
      const PairedTTest t = paired_t_test(c.log_ratios, options.alpha);
      c.change = std::expm1(t.mean);
      c.ci_low = std::expm1(t.ci_low);
      c.ci_high = std::expm1(t.ci_high);
      c.p_value = t.p_value;
      result.comparisons.push_back(std::move(c));
    }
  }
  for (const auto& [key, rounds] : cand_rows) {
    if (base_rows.count(key) == 0) result.not_compared.push_back(row_label(key.first, key.second) + ": only on the candidate");
  }
  if (result.comparisons.empty() && result.failed_rows.empty()) {
    throw InputError("the two files have no row that ran on both builds");
  }
  std::vector<double> p_values;
  for (const auto& c : result.comparisons) p_values.push_back(c.p_value);
  const std::vector<double> adjusted = holm_adjusted(p_values);
  for (std::size_t i = 0; i < result.comparisons.size(); ++i) {
    result.comparisons[i].p_holm = adjusted[i];
    decide(result.comparisons[i], options, result.looks);
  }
  return result;
}

std::string markdown_paired(const PairedResult& r, const PairedOptions& o) {
  std::ostringstream md;
  const std::string level = format_fixed((1 - o.alpha) * 100, 0) + " % CI";
  for (const auto& c : r.comparisons) {
    const std::string direction = c.change >= 0 ? " slower" : " faster";
    md << "- " << row_label(c.row, c.mode) << " " << c.metric << ": "
       << (std::isfinite(c.change) ? format_fixed(std::fabs(c.change) * 100, 1) + " %" + direction : "not measured")
       << ", " << level << " " << signed_percent(c.ci_low) << " to " << signed_percent(c.ci_high) << ", "
       << c.log_ratios.size() << " pairs: " << verdict_name(c.verdict) << " (" << c.why << ")\n";
  }
  md << "\n| row | metric | pairs | change | " << level << " | p | p (Holm) | verdict | why it stopped |\n"
     << "| --- | --- | ---: | ---: | --- | ---: | ---: | --- | --- |\n";
  for (const auto& c : r.comparisons) {
    md << "| " << row_label(c.row, c.mode) << " | " << c.metric << " | " << c.log_ratios.size() << " | "
       << signed_percent(c.change) << " | " << signed_percent(c.ci_low) << " to " << signed_percent(c.ci_high) << " | "
       << p_text(c.p_value) << " | " << p_text(c.p_holm) << " | " << verdict_name(c.verdict) << " | " << c.why << " |\n";
  }
  md << "\nEach round ran the baseline build and the candidate back to back, in a random order; a change is "
        "the candidate over the baseline build (above 0: worse), the geometric mean over the rounds. Paired t test on "
        "the log ratios; Holm across the "
     << r.comparisons.size() << " comparisons; each round a look at alpha / " << r.looks << " (rounds "
     << o.min_rounds << " to " << o.max_rounds << ").\n";
  for (const auto& f : r.failed_rows) md << "\n- failed on the candidate: " << f;
  for (const auto& f : r.allowed_missing) md << "\n- missing on the candidate (allowed): " << f;
  for (const auto& n : r.not_compared) md << "\n- not compared: " << n;
  for (const auto& u : r.unpaired_rounds) md << "\n- unpaired: " << u;
  for (const auto& e : r.environment_differences) md << "\n- environment differs (allowed): " << e;
  const auto undecided = r.undecided_rows();
  if (!undecided.empty()) {
    std::string list;
    for (const auto& row : undecided) list += (list.empty() ? "" : ", ") + row;
    md << "\n- undecided below the cap (run more rounds of these): " << list;
  }
  md << "\n\n" << (r.regression() ? "**Regression**: the candidate is slower beyond the noise, or a row failed." : "No regression.")
     << "\n";
  return md.str();
}

}  // namespace ddpbench
