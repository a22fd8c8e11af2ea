#pragma once
// `ddpbench compare`: the CI gate. Rows of two result files are matched by name, mode and
// configuration; each chosen metric is compared as the ratio of the medians of the rows'
// repetitions. A change is a regression only when it is beyond the threshold and beyond
// the noise: with repetitions, a Mann-Whitney U test (as Google Benchmark's compare.py
// runs) below alpha, or, where the samples are too few for that test ever to reach alpha,
// two sets of values that do not overlap. The gate fails closed: a row that ran in the
// baseline and is absent, skipped, interrupted, reconfigured or unmeasured now is a
// regression unless named as allowed; results from another environment than allowed, or with
// nothing timed, cannot be judged (never a pass); a normalising row that did not run is bad
// input. No LibTorch.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/result_proof.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

struct CompareOptions {
  double threshold = 0.10;  // a relative change smaller than this is never a regression
  std::vector<std::string> metrics = {"train_time_s", "steady_images_per_s"};
  // Aspects of the environment that may differ (reports/environment_fingerprint.hpp), or "all".
  std::vector<std::string> allow_env_mismatch;
  // Divide each row's metric by this row's median, per file and mode; or, with "twin", each
  // repetition by its PyTorch twin's in the same repetition (a row whose twin did not run in
  // the baseline: by the twin that ran nearest it, said so in `notes`).
  std::optional<std::string> normalize_by;
  double alpha = 0.05;
  // Where the current file has PyTorch twins (sweep --reference): a row whose epoch speed or
  // steady images/s (those of `metrics`; both when neither is there) is below this many times
  // its twin's, beyond the noise, fails the gate.
  std::optional<double> min_vs_pytorch;
  // Rows (by name, any mode) that may be absent, skipped or interrupted now without failing.
  std::vector<std::string> allow_missing;
};

/// The metrics compare knows, and whether a larger value is better.
struct MetricInfo {
  std::string name;
  bool higher_is_better;
};
const std::vector<MetricInfo>& comparable_metrics();

// cannot_judge: nothing to judge by (too few pairs at the cap, no finite change, another
// environment, nothing timed): never a pass.
enum class Verdict { unchanged, improved, regression, within_noise, cannot_judge };

struct MetricComparison {
  std::string row;
  std::string mode;
  std::string metric;
  std::vector<double> baseline;  // per repetition (normalised when asked)
  std::vector<double> current;
  double baseline_median = kNotMeasured;
  double current_median = kNotMeasured;
  double ratio = kNotMeasured;    // current / baseline
  double p_value = kNotMeasured;  // two-sided U test, when both sides repeat
  Verdict verdict = Verdict::unchanged;
  std::string detail;             // why, in words
};

/// A row of the current file against its PyTorch twin (--min-vs-pytorch), in one metric:
/// epoch speed (1 / train_time_s) or steady images/s.
struct TwinComparison {
  std::string row;
  std::string mode;
  std::string metric;          // train_time_s | steady_images_per_s
  std::vector<double> ratios;  // per back-to-back pair: ddpbench's speed over PyTorch's (above 1: faster)
  double median_ratio = kNotMeasured;
  double floor = kNotMeasured;
  double p_value = kNotMeasured;  // U test of ddpbench's speeds against floor x PyTorch's
  Verdict verdict = Verdict::unchanged;  // regression: below the floor beyond the noise
  std::string detail;
};

struct Comparison {
  std::vector<MetricComparison> metrics;
  std::vector<std::string> failed_rows;       // ran in the baseline, failed now: regressions
  std::vector<std::string> missing_rows;      // ran in the baseline; absent, skipped, interrupted, reconfigured
                                              // or unmeasured now: regressions
  std::vector<std::string> allowed_missing;   // the same, for rows --allow-missing names: reported only
  std::vector<std::string> not_compared;      // only in the current file, or did not run in the baseline
  std::vector<std::string> partial_rows;      // compared over some repetitions: the others skipped or interrupted
  std::vector<std::string> notes;             // how a row was normalised where not by its own twin
  std::vector<std::string> environment_differences;  // every one, allowed or not
  std::vector<TwinComparison> pytorch;        // --min-vs-pytorch: each row against its twin
  std::vector<std::string> without_twin;      // --min-vs-pytorch: rows whose twin was skipped now, and why
  std::vector<std::string> cannot_judge;      // rows (or a metric of one) the gate has nothing to judge by, and why
  std::vector<std::string> failed_by_proof;   // rows either file said ok that did less work than configured
  [[nodiscard]] bool regression() const;
  /// No regression, and something could not be judged: exit 2, never a pass.
  [[nodiscard]] bool cannot_judge_any() const { return !regression() && !cannot_judge.empty(); }
  /// Three answers: 1 a regression, 2 cannot judge, 0 no regression.
  [[nodiscard]] int exit_code() const { return regression() ? 1 : cannot_judge_any() ? 2 : 0; }
};

/// "The same configuration", for compare and for the sweep's --resume alike: a row's config
/// (by option name) without the keys that do not change what is measured (output paths,
/// the row's name, logging, where the data lies) and the test-only slowdown, which stands in
/// for a code change and must leave the row the same row. Two rows are the same measurement
/// only where these are equal (settings_difference in reports/result_proof.hpp, with defaults).
nlohmann::json comparable_config(const nlohmann::json& config);

/// Whether two configs run the same row, as --resume asks: the same configuration (each side's
/// missing options at its defaults, as settings_difference_of) and the same injected slowdown
/// (a row run slowed must not stand in for the row run as it is).
bool runs_the_same(const nlohmann::json& a, const nlohmann::json& b,
                   const nlohmann::json& a_defaults = nlohmann::json::object(),
                   const nlohmann::json& b_defaults = nlohmann::json::object());

/// How two configs differ, option by option ("amp \"bf16\" vs \"off\", ..."); empty when equal.
std::string config_difference(const nlohmann::json& a, const nlohmann::json& b);

/// Throws InputError where a run of a baseline ran with --inject-slowdown: a baseline slowed on
/// purpose would hide any regression up to that size. (A candidate may be slowed: that is how
/// scripts/gate-power measures the gate, and why the setting is no difference of configuration.)
void check_baseline_unslowed(const ResultDocument& doc, const std::string& side);

/// A run's value of one of comparable_metrics(); kNotMeasured for any other name.
double metric_value(const RunResult& run, const std::string& metric);

/// A pipeline: the files come proven (result_proof.hpp); the rows are matched, each judged
/// rule by rule, and every row ends a regression, no regression or cannot judge (a row the
/// baseline failed or cut short, a metric the baseline did not measure, a twin that failed: the
/// gate has nothing to judge the current row by, which is never a pass); results from another
/// environment than options.allow_env_mismatch allows are not judged at all, and nothing timed is
/// cannot judge too (reports/environment_fingerprint.hpp). Throws InputError when an aspect it
/// allows is unknown, a metric is unknown, the normalising row did not run on either side, --allow-missing names no row of the
/// baseline, --min-vs-pytorch finds no twin, or no row is in both files.
Comparison compare_results(const ProvenResults& baseline, const ProvenResults& current, const CompareOptions& options);

/// The comparison as a Markdown table with a verdict line.
std::string markdown_comparison(const Comparison& comparison, const CompareOptions& options);

/// The repetitions (rounds) a file's sweep planned (`planned`, its repeat) that `runs` lack, named
/// and counted ("2 of 6 planned repetitions (2, 4) are absent from SIDE ..."); empty where none is.
std::string absent_repetitions(const std::vector<const RunResult*>& runs, int64_t planned, const std::string& side);

/// Rows a file's sweep planned that neither file holds a run of, each named with its planned
/// repetitions ("single (faithful): planned (5 repetitions) and absent from both files ..."):
/// nothing was dropped without a word.
std::vector<std::string> planned_rows_absent_from_both(const ResultDocument& a, const ResultDocument& b);

/// The first line of every file compare --out writes, stored or paired: what marks it as
/// compare's own (a Markdown comment, not shown where the table is rendered).
inline constexpr std::string_view kComparisonFileMarker =
    "<!-- ddpbench compare --out: replaced by the next compare that writes here -->\n";

/// `table` as compare --out writes it: the marker, then the table.
std::string comparison_file(std::string_view table);

/// Whether `text` is a comparison compare --out wrote: it starts with kComparisonFileMarker. An
/// earlier one is replaced; any other file is not, whatever its last line says (the output rule,
/// harness/base/output_rule.hpp).
bool is_comparison_text(std::string_view text);

std::string_view verdict_name(Verdict verdict);

}  // namespace ddpbench
