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
#include "reports/matched_steps.hpp"

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

// Below the cap an undecided row is not yet within the noise: it waits for more rounds.
std::string verdict_text(const PairedComparison& c) {
  return c.needs_more_rounds ? "undecided" : std::string(verdict_name(c.verdict));
}

bool coarse(const PairedComparison& c, const PairedOptions& o) {
  return std::find(o.coarse_metrics.begin(), o.coarse_metrics.end(), c.metric) != o.coarse_metrics.end();
}

// Decides one comparison from its pairs, once Holm has adjusted its p-value. Its look is the
// rounds its row ran, not its pairs: a row that lost a round (a flake, a failure
// --allow-missing excuses) reaches the cap with fewer pairs, and the gate stops there. A coarse
// metric whose row runs no more rounds (`row_stops`) is at its cap: its last look spends the
// cap's share of alpha, as any comparison's last look does.
// Where a comparison stands: its pairs, the look it is at, and that look's alpha.
struct Look {
  int64_t pairs = 0;
  int64_t look = 0;
  bool at_cap = false;
  double alpha = 0;
  std::string pairs_text;  // "3 pairs"
  std::string cap_text;    // "the cap is 12 rounds, and its row ran 13"
};

Look look_of(const PairedComparison& c, const PairedOptions& o, bool row_stops) {
  Look l;
  l.pairs = static_cast<int64_t>(c.log_ratios.size());
  l.look = row_stops ? o.max_rounds : std::max(c.rounds_run, l.pairs);
  l.at_cap = l.look >= o.max_rounds;
  l.alpha = alpha_at_look(l.look, o);
  l.pairs_text = std::to_string(l.pairs) + (l.pairs == 1 ? " pair" : " pairs");
  l.cap_text = "the cap is " + std::to_string(o.max_rounds) + " rounds" +
               (l.look > l.pairs ? ", and its row ran " + std::to_string(l.look) : "");
  return l;
}

// Too few pairs, or no finite figures: more rounds below the cap, no verdict at it. False
// where the figures can decide.
bool decide_without_figures(PairedComparison& c, const PairedOptions& o, const Look& l) {
  std::string why;
  if (l.pairs < o.min_rounds) {
    why = l.pairs_text + ", fewer than the " + std::to_string(o.min_rounds) + " any verdict needs";
  } else if (!std::isfinite(c.change) || !std::isfinite(c.ci_low) || !std::isfinite(c.ci_high)) {
    why = "its " + l.pairs_text + " give no finite change or interval";
  } else {
    return false;
  }
  c.verdict = l.at_cap ? Verdict::cannot_judge : Verdict::within_noise;
  c.needs_more_rounds = !l.at_cap;
  c.why = why + (l.at_cap ? " (" + l.cap_text + "): cannot judge" : "");
  return true;
}

// The last look of a comparison the test did not decide: no regression only where its data
// exclude one (the one-sided upper bound below the threshold, an equivalence test); a bound
// that reaches past the threshold could hide one, so the row cannot be judged: too noisy.
void decide_at_last_look(PairedComparison& c, const PairedOptions& o, const std::string& where) {
  const std::string bound = format_fixed((1 - o.alpha) * 100, 0) + " % upper bound " + signed_percent(c.upper_bound);
  if (std::isfinite(c.upper_bound) && c.upper_bound < o.threshold) {
    c.verdict = Verdict::within_noise;
    c.why = "still undecided after " + where + ": within the noise, its " + bound + " below the " +
            format_percent(o.threshold) + " threshold";
  } else {
    c.verdict = Verdict::cannot_judge;
    c.why = "too noisy: still undecided after " + where + ", its " + bound + " reaches past the " +
            format_percent(o.threshold) + " threshold, so a regression that large could hide in the noise";
  }
}

// What a comparison that is neither beyond the threshold nor inside it is at this look.
void decide_undecided(PairedComparison& c, const PairedOptions& o, const Look& l, bool beyond, bool row_stops) {
  c.verdict = Verdict::within_noise;
  if (!l.at_cap && coarse(c, o)) {
    c.why = "undecided after " + l.pairs_text + "; a coarse metric (--coarse-metric) asks for no rounds of its own";
  } else if (row_stops) {
    decide_at_last_look(c, o, l.pairs_text + ", its row's last (a coarse metric, judged at the cap's alpha)");
  } else if (!l.at_cap) {
    c.needs_more_rounds = true;
    c.why = "undecided after " + l.pairs_text + ": the CI reaches past ±" + format_percent(o.threshold) +
            (beyond ? " and the test has not rejected" : "");
  } else {
    decide_at_last_look(c, o, l.pairs_text + " (" + l.cap_text + ")");
  }
}

// Decides one comparison from its pairs, once Holm has adjusted its p-value. Its look is the
// rounds its row ran, not its pairs: a row that lost a round (a flake, a failure
// --allow-missing excuses) reaches the cap with fewer pairs, and the gate stops there. A coarse
// metric whose row runs no more rounds (`row_stops`) is at its cap: its last look spends the
// cap's share of alpha, as any comparison's last look does.
void decide(PairedComparison& c, const PairedOptions& o, bool row_stops = false) {
  const Look l = look_of(c, o, row_stops);
  c.needs_more_rounds = false;
  if (decide_without_figures(c, o, l)) return;
  const bool beyond = std::isfinite(c.change) && std::fabs(c.change) > o.threshold;
  const bool significant = std::isfinite(c.p_holm) && c.p_holm < l.alpha;
  const bool inside = std::isfinite(c.ci_low) && c.ci_low > -o.threshold && c.ci_high < o.threshold;
  if (beyond && significant) {
    c.verdict = c.change > 0 ? Verdict::regression : Verdict::improved;
    c.why = "beyond the " + format_percent(o.threshold) + " threshold; Holm p " + p_text(c.p_holm) + ", below " +
            (l.at_cap ? "the cap's" : "this look's") + " alpha " + format_fixed(l.alpha, 5);
  } else if (inside) {
    c.verdict = Verdict::unchanged;
    c.why = "its " + format_fixed((1 - o.alpha) * 100, 0) + " % CI inside ±" + format_percent(o.threshold);
  } else {
    decide_undecided(c, o, l, beyond, row_stops);
  }
}

}  // namespace

double alpha_at_look(int64_t rounds, const PairedOptions& o) {
  if (rounds < o.min_rounds) return 0;
  const int64_t looks = o.max_rounds - o.min_rounds + 1;
  if (looks == 1) return o.alpha;
  if (rounds >= o.max_rounds) return o.alpha * kCapLookShare;
  return o.alpha * (1 - kCapLookShare) / static_cast<double>(looks - 1);
}

bool PairedResult::regression() const {
  return !failed_rows.empty() || std::any_of(comparisons.begin(), comparisons.end(), [](const PairedComparison& c) {
           return c.verdict == Verdict::regression;
         });
}

bool PairedResult::cannot_judge_any() const {
  return !regression() && (!cannot_judge.empty() ||
                           std::any_of(comparisons.begin(), comparisons.end(),
                                       [](const PairedComparison& c) { return c.verdict == Verdict::cannot_judge; }));
}

std::vector<std::string> PairedResult::undecided_rows() const {
  std::vector<std::string> rows;
  for (const auto& c : comparisons) {
    if (c.needs_more_rounds && std::find(rows.begin(), rows.end(), c.row) == rows.end()) rows.push_back(c.row);
  }
  return rows;
}

namespace {

void require_round_limits(const PairedOptions& options) {
  // Past 100 rounds each look before the cap tests at under alpha / 500: a slowdown waits
  // for a cap no gate reaches.
  if (!(options.min_rounds >= 2 && options.max_rounds >= options.min_rounds && options.max_rounds <= 100)) {
    throw InputError("--min-rounds must be at least 2 and --max-rounds at least --min-rounds and at most 100 (got " +
                     std::to_string(options.min_rounds) + " and " + std::to_string(options.max_rounds) + ")");
  }
}

std::vector<const MetricInfo*> paired_metrics(const PairedOptions& options) {
  std::vector<const MetricInfo*> metrics;
  for (const auto& m : options.metrics) {
    metrics.push_back(&find_named(std::span<const MetricInfo>(comparable_metrics()), m, "--metric", "metric"));
    if (m == "test_accuracy") {
      throw InputError("--metric test_accuracy does not apply to --paired: it times two builds; accuracy is the same "
                       "rows' arithmetic, gated by compare without --paired or by the equivalence tests");
    }
    if (std::count(options.metrics.begin(), options.metrics.end(), m) > 1) {
      throw InputError("--metric lists " + m + " twice (each comparison counts once in the correction across rows)");
    }
  }
  for (const auto& m : options.coarse_metrics) {
    if (std::find(options.metrics.begin(), options.metrics.end(), m) == options.metrics.end()) {
      throw InputError("--coarse-metric " + m + ": not one of the metrics compared (--metric)");
    }
  }
  return metrics;
}

// Both builds run on one machine: the stored mode's fingerprint leaves the host out (runs of one
// gate move between machines), this mode cannot, and --allow-env-mismatch does not lift it:
// pairs from two machines pair nothing. Everything else is the one rule both modes keep
// (reports/environment_fingerprint.hpp).
void require_side_by_side(const Environment& baseline, const Environment& candidate) {
  if (baseline.host != candidate.host) {
    throw InputError("the two builds' rounds were not run side by side (host: " + baseline.host + " vs " +
                     candidate.host + "): a paired comparison runs both builds on one machine, whatever "
                     "--allow-env-mismatch allows");
  }
}

// A round that says it ran on one host other than its file's (a row `sweep --resume` kept from
// another machine, under this machine's environment) was not run side by side either.
void require_rounds_on_the_files_host(const ResultDocument& doc, const std::string& side) {
  for (const RunResult& r : doc.runs) {
    if (r.nodes.size() == 1 && !doc.environment.host.empty() && r.nodes.front() != doc.environment.host) {
      throw InputError(side + ": " + row_label(r.name, r.mode) + " round " + std::to_string(r.repetition) + " ran on " +
                       r.nodes.front() + ", not on the file's host " + doc.environment.host +
                       ": a paired comparison runs both builds on one machine");
    }
  }
}

// Nothing timed is nothing judged (every row allowed missing): no regression then would be a
// pass that measured nothing.
void require_something_timed(PairedResult& result) {
  if (!result.comparisons.empty() || result.regression()) return;
  result.cannot_judge.push_back("nothing was timed: no row ran on both builds (every row missing and allowed, or not "
                                "run on the baseline build)");
}

// Each round's run of a row, in round order, for the rule on what the row ran with.
std::vector<const RunResult*> runs_of(const std::map<int64_t, const RunResult*>& rounds) {
  std::vector<const RunResult*> runs;
  for (const auto& [round, run] : rounds) runs.push_back(run);
  return runs;
}

std::string round_list(const std::vector<int64_t>& rounds) {
  std::string text;
  for (const auto r : rounds) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

using Rounds = std::map<int64_t, const RunResult*>;

// One row of the baseline build being judged, and where its findings go.
struct PairedRow {
  RowKey key;
  std::string label;
  bool allowed_missing;
  PairedResult& result;
  void failed(const std::string& why) const {
    (allowed_missing ? result.allowed_missing : result.failed_rows).push_back(label + ": " + why);
  }
};

// A row the baseline build did not run judges nothing: skipped (it cannot run here) is not
// compared; failed or cut short in every round, the gate cannot judge the candidate's.
bool ran_on_baseline_build(const PairedRow& row, const Rounds& base) {
  if (any_ok(base)) return true;
  const RunResult& first = *base.begin()->second;
  if (first.status == RunStatus::skipped || row.allowed_missing) {
    row.result.not_compared.push_back(row.label + ": did not run on the baseline build (" +
                                      std::string(status_name(first.status)) + ")");
  } else {
    row.result.cannot_judge.push_back(row.label + ": " + std::string(status_name(first.status)) +
                                      " on the baseline build in every round (" + first.reason +
                                      "), so nothing judges the candidate's");
  }
  return false;
}

void require_same_work(const std::string& label, int64_t round, const RunResult& a, const RunResult& b) {
  if (a.world_size == b.world_size && a.global_batch == b.global_batch && a.images_trained == b.images_trained &&
      a.device == b.device && a.dataset == b.dataset && a.steps == b.steps && a.strategy == b.strategy &&
      a.eval_images == b.eval_images) {
    return;
  }
  throw InputError(label + " round " + std::to_string(round) + " did other work on the two builds (world " +
                   std::to_string(a.world_size) + " vs " + std::to_string(b.world_size) + ", global batch " +
                   std::to_string(a.global_batch) + " vs " + std::to_string(b.global_batch) + ", images " +
                   std::to_string(a.images_trained) + " vs " + std::to_string(b.images_trained) + ", " + a.device +
                   " vs " + b.device + ", " + a.dataset + " vs " + b.dataset + ", steps " + std::to_string(a.steps) +
                   " vs " + std::to_string(b.steps) + ", strategy " + a.strategy + " vs " + b.strategy +
                   ", eval images " + std::to_string(a.eval_images) + " vs " + std::to_string(b.eval_images) +
                   "): a paired comparison times the same work");
}

// A row's rounds as the two builds ran them. A round the candidate did not finish, where the
// baseline build did, is the candidate's failure: a build that crashes in some rounds must not
// pass on the rounds it survived.
struct RoundSplit {
  std::vector<int64_t> paired, baseline_only, candidate_only, failed_on_candidate, absent_on_candidate;
  int64_t rounds_run = 0;  // on either build, paired or not: the row's look
};

RoundSplit split_rounds(const std::string& label, const Rounds& base, const Rounds& cand,
                        const std::set<int64_t>& candidate_rounds) {
  RoundSplit split;
  std::set<int64_t> ran;
  for (const auto& [round, run] : base) {
    ran.insert(round);
    const auto other = cand.find(round);
    if (run->status != RunStatus::ok) continue;
    if (other == cand.end()) {
      (candidate_rounds.count(round) ? split.absent_on_candidate : split.baseline_only).push_back(round);
    } else if (other->second->status != RunStatus::ok) {
      split.failed_on_candidate.push_back(round);
    } else {
      require_same_work(label, round, *run, *other->second);
      split.paired.push_back(round);
    }
  }
  for (const auto& [round, run] : cand) {
    ran.insert(round);
    if (base.count(round) == 0) split.candidate_only.push_back(round);
  }
  split.rounds_run = static_cast<int64_t>(ran.size());
  // A row whose rounds were all numbered apart on the two files is misnumbered, not absent.
  if (split.paired.empty() && split.failed_on_candidate.empty()) {
    std::vector<int64_t> base_numbers, cand_numbers;
    for (const auto& entry : base) base_numbers.push_back(entry.first);
    for (const auto& entry : cand) cand_numbers.push_back(entry.first);
    throw InputError(label + " has no round that ran on both builds (the baseline build's rounds " +
                     round_list(base_numbers) + ", the candidate's " + round_list(cand_numbers) +
                     "): repetition r of each file is round r");
  }
  return split;
}

// The candidate's failed and absent rounds, by status. Allowed to fail or be absent, a row is
// still judged on the rounds it ran: the allowance excuses the missing rounds, never a slowdown
// measured in the others. Whether the row goes on to be timed.
bool report_candidate_failures(const PairedRow& row, const RoundSplit& split, const Rounds& cand) {
  if (split.failed_on_candidate.empty() && split.absent_on_candidate.empty()) return true;
  std::map<std::string, std::pair<std::vector<int64_t>, std::string>> by_status;  // status: rounds, first reason
  for (const auto round : split.failed_on_candidate) {
    const RunResult& run = *cand.at(round);
    auto& [rounds, reason] = by_status[std::string(status_name(run.status))];
    rounds.push_back(round);
    if (reason.empty()) reason = run.reason;
  }
  std::string text;
  for (const auto& [status, entry] : by_status) {
    text += (text.empty() ? "" : "; ") + status + " on the candidate in round(s) " + round_list(entry.first) +
            (entry.second.empty() ? "" : " (" + entry.second + ")");
  }
  if (!split.absent_on_candidate.empty()) {
    text += (text.empty() ? "" : "; ") + std::string("absent on the candidate in round(s) ") +
            round_list(split.absent_on_candidate) + ", which it ran other rows of";
  }
  row.failed(text + ", where the baseline build ran it");
  return row.allowed_missing;
}

// One metric's log ratios over the paired rounds, and its trimmed paired t test.
void time_metric(const PairedRow& row, const RoundSplit& split, const Rounds& base, const Rounds& cand,
                 const MetricInfo& info, const PairedOptions& options) {
  PairedComparison c;
  c.row = row.key.first;
  c.mode = row.key.second;
  c.metric = info.name;
  c.rounds_run = split.rounds_run;
  // A round the candidate said ok without the figure is failed by the proof before it pairs
  // (result_proof.hpp): a figure missing here is missing on both builds (no step past warm-up).
  // A step time is compared step by step where both rounds' steady steps match (a lockstep run
  // pairs them in time), else by the rounds' medians: one rule for every round of the row, and
  // a row whose rounds match but one is damaged, not quietly read by the other rule.
  std::vector<int64_t> unmatched;
  if (info.name == "step_time_s") {
    for (const auto round : split.paired) {
      if (!matched_step_log_ratio(*base.at(round), *cand.at(round))) unmatched.push_back(round);
    }
    if (!unmatched.empty() && unmatched.size() < split.paired.size()) {
      throw InputError(row.label + ": step_time_s: the steady steps of round " + std::to_string(unmatched.front()) +
                       " do not match between the two builds' files (their count or step numbers) while other "
                       "rounds' do: a damaged or edited file");
    }
  }
  c.matched_steps = info.name == "step_time_s" && !split.paired.empty() && unmatched.empty();
  for (const auto round : split.paired) {
    if (c.matched_steps) {
      c.rounds.push_back(round);
      c.log_ratios.push_back(*matched_step_log_ratio(*base.at(round), *cand.at(round)));
      continue;
    }
    const double b = metric_value(*base.at(round), info.name);
    const double a = metric_value(*cand.at(round), info.name);
    if (!(std::isfinite(a) && std::isfinite(b))) continue;
    c.rounds.push_back(round);
    c.log_ratios.push_back(info.higher_is_better ? std::log(b / a) : std::log(a / b));
  }
  if (c.rounds.empty()) {
    row.result.cannot_judge.push_back(row.label + ": " + info.name + " measured on neither build");
    return;
  }
  const PairedTTest t = trimmed_paired_t_test(c.log_ratios, options.alpha);
  c.change = std::expm1(t.mean);
  c.ci_low = std::expm1(t.ci_low);
  c.ci_high = std::expm1(t.ci_high);
  // One-sided at 1 - alpha: the upper end of the two-sided 1 - 2 alpha interval.
  c.upper_bound = std::expm1(trimmed_paired_t_test(c.log_ratios, 2 * options.alpha).ci_high);
  // One-sided, from the two-sided p of a symmetric t: "slower" and "faster" are two tests.
  c.p_slower = !std::isfinite(t.p_value) ? t.p_value : t.mean > 0 ? t.p_value / 2 : 1 - t.p_value / 2;
  c.p_faster = !std::isfinite(t.p_value) ? t.p_value : t.mean < 0 ? t.p_value / 2 : 1 - t.p_value / 2;
  c.p_value = t.mean < 0 ? c.p_faster : c.p_slower;
  row.result.comparisons.push_back(std::move(c));
}

void judge_paired_row(const PairedRow& row, const Rounds& base, const Rounds* cand, const ProvenResults& baseline_file,
                      const ProvenResults& candidate_file, const std::set<int64_t>& candidate_rounds,
                      const std::vector<const MetricInfo*>& metrics, const PairedOptions& options) {
  if (!ran_on_baseline_build(row, base)) return;
  if (cand == nullptr || !any_ok(*cand)) {
    row.failed(std::string(cand == nullptr ? "absent" : "no round ran") + " on the candidate");
    return;
  }
  const std::string difference =
      settings_difference(*base.begin()->second, baseline_file, *cand->begin()->second, candidate_file);
  if (!difference.empty()) {
    throw InputError(row.label + " ran with other settings on the two builds (" + difference +
                     "); a paired comparison runs both on the same settings");
  }
  const RoundSplit split = split_rounds(row.label, base, *cand, candidate_rounds);
  if (!report_candidate_failures(row, split, *cand) || split.paired.empty()) return;
  for (const auto* side : {&split.baseline_only, &split.candidate_only}) {
    if (side->empty()) continue;
    row.result.unpaired_rounds.push_back(row.label + ": round(s) " + round_list(*side) + " only in the " +
                                         (side == &split.baseline_only ? "baseline build's" : "candidate's") +
                                         " file; dropped");
  }
  // Rounds both files' sweeps planned and neither holds are said as the stored mode says them.
  const auto& b = baseline_file.document().sweep;
  const auto& c = candidate_file.document().sweep;
  std::vector<const RunResult*> either = runs_of(base);
  for (const RunResult* r : runs_of(*cand)) either.push_back(r);
  const std::string absent = absent_repetitions(either, std::min(b ? b->repeat : 1, c ? c->repeat : 1), "both builds' files");
  if (!absent.empty()) row.result.unpaired_rounds.push_back(row.label + ": " + absent + "; judged on the others");
  for (const MetricInfo* info : metrics) time_metric(row, split, base, *cand, *info, options);
}

// Each direction is its own family under Holm: a false regression is held to alpha whatever
// the rows that got faster, and a false improvement likewise.
void adjust_and_decide(PairedResult& result, const PairedOptions& options) {
  std::vector<double> slower, faster;
  for (const auto& c : result.comparisons) {
    slower.push_back(c.p_slower);
    faster.push_back(c.p_faster);
  }
  const std::vector<double> slower_holm = holm_adjusted(slower);
  const std::vector<double> faster_holm = holm_adjusted(faster);
  for (std::size_t i = 0; i < result.comparisons.size(); ++i) {
    auto& c = result.comparisons[i];
    c.p_holm = c.change < 0 ? faster_holm[i] : slower_holm[i];
    if (!coarse(c, options)) decide(c, options);
  }
  // A coarse metric is judged once its row's other metrics are: at the cap's alpha where they
  // ask for no more rounds (or, with none, from --min-rounds on).
  for (auto& c : result.comparisons) {
    if (!coarse(c, options)) continue;
    bool others = false, row_goes_on = false;
    for (const auto& other : result.comparisons) {
      if (other.row != c.row || other.mode != c.mode || coarse(other, options)) continue;
      others = true;
      row_goes_on = row_goes_on || other.needs_more_rounds;
    }
    const bool row_stops = others ? !row_goes_on : static_cast<int64_t>(c.log_ratios.size()) >= options.min_rounds;
    decide(c, options, row_stops && std::max(c.rounds_run, static_cast<int64_t>(c.log_ratios.size())) < options.max_rounds);
  }
}

}  // namespace

PairedResult compare_paired(const ProvenResults& baseline_file, const ProvenResults& candidate_file,
                            const PairedOptions& options) {
  require_round_limits(options);
  const std::vector<const MetricInfo*> metrics = paired_metrics(options);
  const ResultDocument& baseline = baseline_file.document();
  const ResultDocument& candidate = candidate_file.document();
  check_baseline_unslowed(baseline, "the baseline build's file");
  PairedResult result;
  result.looks = options.max_rounds - options.min_rounds + 1;
  result.failed_by_proof = failed_by_proofs(baseline_file, candidate_file);
  require_side_by_side(baseline.environment, candidate.environment);
  require_rounds_on_the_files_host(baseline, "the baseline build's file");
  require_rounds_on_the_files_host(candidate, "the candidate's file");
  check_allowed_aspects(options.allow_env_mismatch);
  std::vector<EnvironmentDifference> env = environment_differences(baseline.environment, candidate.environment);
  const auto base_rows = rounds_of(baseline);
  const auto cand_rows = rounds_of(candidate);
  // The rounds the candidate ran at all: a row it left out of one of them is absent there, not
  // a round on one side only.
  std::set<int64_t> candidate_rounds;
  for (const auto& r : candidate.runs) candidate_rounds.insert(r.repetition);
  for (const auto& name : options.allow_missing) {
    const bool known = std::any_of(base_rows.begin(), base_rows.end(), [&](const auto& row) { return row.first.first == name; });
    if (!known) throw InputError("--allow-missing: the baseline build's file has no row '" + name + "'");
  }
  for (const auto& [key, base] : base_rows) {
    const bool allowed = std::count(options.allow_missing.begin(), options.allow_missing.end(), key.first) > 0;
    const auto cand = cand_rows.find(key);
    judge_paired_row(PairedRow{key, row_label(key.first, key.second), allowed, result}, base,
                     cand == cand_rows.end() ? nullptr : &cand->second, baseline_file, candidate_file,
                     candidate_rounds, metrics, options);
  }
  for (auto& absent : planned_rows_absent_from_both(baseline_file.document(), candidate_file.document())) {
    result.not_compared.push_back(std::move(absent));
  }
  for (const auto& [key, rounds] : cand_rows) {
    if (base_rows.count(key) == 0) result.not_compared.push_back(row_label(key.first, key.second) + ": only on the candidate");
    if (base_rows.count(key) == 0) continue;
    const auto differences = row_environment_differences(row_label(key.first, key.second), runs_of(base_rows.at(key)),
                                                         runs_of(rounds));
    env.insert(env.end(), differences.begin(), differences.end());
  }
  if (result.comparisons.empty() && result.failed_rows.empty() && result.allowed_missing.empty() &&
      result.cannot_judge.empty()) {
    throw InputError("the two files have no row that ran on both builds");
  }
  adjust_and_decide(result, options);
  require_something_timed(result);
  return judged_in_one_environment(std::move(result), env, options.allow_env_mismatch);
}

std::string markdown_paired(const PairedResult& r, const PairedOptions& o) {
  std::ostringstream md;
  const std::string level = format_fixed((1 - o.alpha) * 100, 0) + " % CI";
  for (const auto& c : r.comparisons) {
    const std::string direction = c.change >= 0 ? " slower" : " faster";
    md << "- " << row_label(c.row, c.mode) << " " << c.metric << ": "
       << (std::isfinite(c.change) ? format_fixed(std::fabs(c.change) * 100, 1) + " %" + direction : "not measured")
       << ", " << level << " " << signed_percent(c.ci_low) << " to " << signed_percent(c.ci_high) << ", "
       << c.log_ratios.size() << (c.log_ratios.size() == 1 ? " pair: " : " pairs: ") << verdict_text(c) << " (" << c.why
       << ")\n";
  }
  md << "\n| row | metric | pairs | change | " << level << " | p | p (Holm) | verdict | why it stopped |\n"
     << "| --- | --- | ---: | ---: | --- | ---: | ---: | --- | --- |\n";
  for (const auto& c : r.comparisons) {
    md << "| " << row_label(c.row, c.mode) << " | " << c.metric << " | " << c.log_ratios.size() << " | "
       << signed_percent(c.change) << " | " << signed_percent(c.ci_low) << " to " << signed_percent(c.ci_high) << " | "
       << p_text(c.p_value) << " | " << p_text(c.p_holm) << " | " << verdict_text(c) << " | " << c.why << " |\n";
  }
  md << "\nEach round ran the baseline build and the candidate on one machine, back to back in a random order or side "
        "by side taking turns step by step (lockstep); a change is "
        "the candidate over the baseline build (above 0: worse), from the 20 % trimmed mean of the log ratios. Paired "
        "t test on that trimmed mean (Tukey-McLaughlin), one-sided in the direction of the change (a false regression "
        "and a false improvement each at most alpha " << format_fixed(o.alpha, 2) << "); Holm across the "
     << r.comparisons.size() << " comparisons in each direction; ";
  for (std::size_t i = 0; i < o.coarse_metrics.size(); ++i) {
    md << (i == 0 ? "coarse metrics (" : ", ") << o.coarse_metrics[i]
       << (i + 1 == o.coarse_metrics.size() ? ") ask for no rounds of their own and are judged at the cap's alpha at "
                                              "their row's last look; "
                                            : "");
  }
  if (std::any_of(r.comparisons.begin(), r.comparisons.end(), [](const PairedComparison& c) { return c.matched_steps; })) {
    md << "step_time_s's log ratio of a round is from its matched steady steps (a lockstep run: the builds took "
          "turns step by step): the mean of the 20 % trimmed means of the even and of the odd steps, so going first "
          "in a pair cancels; ";
  }
  if (r.looks == 1) {
    md << "one look, at " << o.min_rounds << " rounds.\n";
  } else {
    md << r.looks << " looks (rounds " << o.min_rounds << " to " << o.max_rounds << "): each before the cap at alpha "
       << format_fixed(alpha_at_look(o.min_rounds, o), 5) << ", the cap's at " << format_fixed(alpha_at_look(o.max_rounds, o), 5)
       << ".\n";
  }
  for (const auto& f : r.failed_rows) md << "\n- failed on the candidate: " << f;
  for (const auto& f : r.failed_by_proof) md << "\n- failed by the proof of its file: " << f;
  for (const auto& f : r.cannot_judge) md << "\n- CANNOT JUDGE: " << f;
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
  if (r.regression()) {
    md << "\n\n**Regression**: the candidate is slower beyond the noise, or a row failed.\n";
  } else if (r.cannot_judge_any()) {
    md << "\n\nCannot judge: a row or comparison above has nothing to judge it by (CANNOT JUDGE); this is no pass.\n";
  } else if (!undecided.empty()) {
    md << "\n\nUndecided below the cap: no verdict yet; run more rounds of the undecided rows (scripts/ci-bench "
          "--against does), up to --max-rounds.\n";
  } else {
    md << "\n\nNo regression.\n";
  }
  return md.str();
}

std::string undecided_rows_file(const std::vector<std::string>& rows) {
  std::string text(kUndecidedRowsMarker);
  for (const auto& row : rows) text += row + "\n";
  return text;
}

bool is_undecided_rows_text(std::string_view text) {
  if (!text.starts_with(kUndecidedRowsMarker)) return false;
  text.remove_prefix(kUndecidedRowsMarker.size());
  if (!text.empty() && !text.ends_with('\n')) return false;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string_view name = text.substr(start, end - start);
    const bool a_name = !name.empty() && name.front() != '.' &&
                        name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
                            std::string_view::npos;
    if (!a_name) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace ddpbench
