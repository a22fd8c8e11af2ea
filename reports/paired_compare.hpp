#pragma once
// `ddpbench compare --paired`: the candidate build against the baseline build, run back to back
// on one machine in rounds (repetition r of each file is round r, in a random order within the
// round). Each round gives one log ratio per row and metric, so the machine's drift between
// rounds cancels. The test is a paired t test on the 20 % trimmed mean of the log ratios (one
// round's burst cannot hide a slowdown the other rounds agree on), one-sided in each direction;
// the false-alarm rate is held across comparisons (Holm) and across the looks an adaptive gate
// takes (alpha spent over them, most at the cap). A round the candidate failed where the
// baseline build ran fails the row.
// Every row is its own control, PyTorch's twins included. No LibTorch.
#include <string>
#include <string_view>
#include <vector>

#include "reports/compare.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

struct PairedOptions {
  double threshold = 0.05;  // a change smaller than this (relative) is never a regression
  double alpha = 0.05;      // the chance of any false alarm in one gate run, all rows together
  std::vector<std::string> metrics = {"train_time_s"};
  int64_t min_rounds = 4;   // no row is decided on fewer pairs
  int64_t max_rounds = 12;  // a row still undecided here is within the noise where its upper bound
                            // is below the threshold, else cannot judge (too noisy)
  std::vector<std::string> allow_env_mismatch;  // aspects that may differ (as compare's), or "all"
  std::vector<std::string> allow_missing;  // rows (by name) that may fail or be absent on the candidate
  // Metrics (of `metrics`) judged on the rounds the others ask for: undecided, one asks for no
  // more rounds and is within the noise (a lockstep gate's train_time_s, noisier than its steps).
  std::vector<std::string> coarse_metrics;
};

struct PairedComparison {
  std::string row;
  std::string mode;
  std::string metric;
  std::vector<int64_t> rounds;      // the paired rounds, in order
  int64_t rounds_run = 0;           // the rounds its row ran in, on either build, paired or not: its look
  std::vector<double> log_ratios;   // per round: log(candidate / baseline), worse positive
  bool matched_steps = false;       // step_time_s: each round's value its matched steps' (matched_steps.hpp)
  double change = kNotMeasured;     // exp(trimmed mean log ratio) - 1: above 0 worse
  double ci_low = kNotMeasured;     // the change's (1 - alpha) confidence interval
  double ci_high = kNotMeasured;
  double upper_bound = kNotMeasured;  // the change's one-sided (1 - alpha) upper confidence bound
  double p_slower = kNotMeasured;   // trimmed paired t test, one-sided: "not slower"
  double p_faster = kNotMeasured;   // and "not faster"
  double p_value = kNotMeasured;    // the one in the direction of the change
  double p_holm = kNotMeasured;     // Holm-adjusted across every comparison of the gate, in that direction
  Verdict verdict = Verdict::within_noise;
  bool needs_more_rounds = false;   // undecided, and fewer than max_rounds pairs
  std::string why;                  // why it stopped (or why it goes on), in words
};

struct PairedResult {
  std::vector<PairedComparison> comparisons;
  std::vector<std::string> failed_rows;      // ran on the baseline build; failed (in any round), unmeasured or
                                             // absent on the candidate
  std::vector<std::string> allowed_missing;  // the same, for rows --allow-missing names
  std::vector<std::string> not_compared;     // did not run on the baseline build, or only on one side
  std::vector<std::string> unpaired_rounds;  // rounds of a row that ran on one side only, dropped
  std::vector<std::string> environment_differences;
  std::vector<std::string> cannot_judge;     // rows the baseline build failed, metrics neither build measured
  std::vector<std::string> failed_by_proof;  // rows a file said ok that did less work than configured
  int64_t looks = 1;                         // max_rounds - min_rounds + 1
  [[nodiscard]] bool regression() const;
  /// No regression, and a row or comparison could not be judged (too few pairs at the cap, a
  /// row the baseline build failed): exit 2, never a pass.
  [[nodiscard]] bool cannot_judge_any() const;
  /// Three answers: 1 a regression, 2 cannot judge (or not yet: rows undecided below the cap,
  /// whose next rounds scripts/ci-bench runs), 0 no regression.
  [[nodiscard]] int exit_code() const {
    return regression() ? 1 : (cannot_judge_any() || !undecided_rows().empty()) ? 2 : 0;
  }
  /// Rows (by name) with a comparison still undecided below max_rounds: the rounds to run next.
  [[nodiscard]] std::vector<std::string> undecided_rows() const;
};

/// The share of alpha the look at the cap (max_rounds pairs) spends. Most of it: a row still
/// undecided before the cap runs on anyway, so an early look only saves the rounds of a large
/// change, and alpha split evenly over the looks (each at alpha / looks) caught 0-50 % of 10-15 %
/// slowdowns on the CI machine. The looks before the cap share the rest evenly.
inline constexpr double kCapLookShare = 0.8;

/// The level a comparison is tested at once its row ran `rounds` rounds: 0 below min_rounds,
/// alpha with a single look; the looks' levels add up to alpha, so the chance of a false alarm
/// at any of them is at most alpha (Bonferroni over the looks).
double alpha_at_look(int64_t rounds, const PairedOptions& options);

/// A pipeline over proven files (result_proof.hpp): each row's rounds split into pairs, the
/// candidate's failures, and rounds on one side; each metric's log ratios tested; Holm; each
/// comparison decided; results from another environment than options.allow_env_mismatch allows
/// are not judged at all (cannot judge, as compare's stored mode), nor is nothing timed. Throws
/// InputError when the hosts differ (whatever is allowed), a metric is unknown, listed twice or test_accuracy, a row ran with other settings
/// or did other work on the two sides, a row has no round on both sides, --allow-missing names
/// no row of the baseline, or no row is on both sides.
PairedResult compare_paired(const ProvenResults& baseline, const ProvenResults& candidate,
                            const PairedOptions& options);

/// The first line of every file --undecided-out writes: what marks it as compare's own. Readers
/// take the lines after it, one row name each (scripts/ci-bench skips lines starting with '#').
inline constexpr std::string_view kUndecidedRowsMarker =
    "# ddpbench compare --paired --undecided-out: the rows still undecided below the cap, one a line\n";

/// The undecided rows as --undecided-out writes them: the marker, then one name a line.
std::string undecided_rows_file(const std::vector<std::string>& rows);

/// Whether `text` is a list of rows --undecided-out wrote: the marker, then one row name a line
/// (the sweep file's names: letters, digits, '.', '_', '-'), so that an earlier list is replaced
/// and any other file (an empty one too) is not (the output rule, harness/base/output_rule.hpp).
bool is_undecided_rows_text(std::string_view text);

/// The comparison as Markdown: one line per comparison ("ddp-2: 11.8 % slower, 95 % CI
/// 7.1-16.2 %, 8 pairs"), the table, the method, and a verdict line.
std::string markdown_paired(const PairedResult& result, const PairedOptions& options);

}  // namespace ddpbench
