#include "harness/control/cli.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "harness/control/run_options.hpp"
#include "harness/control/sweep_file.hpp"
#include "reports/environment_fingerprint.hpp"
#include "reports/projection.hpp"

namespace ddpbench {
namespace {

// Every RunConfig option from the table, so `run` and `sweep` accept the same flags; each
// value given reaches `on_value(option, text)`.
void add_run_options(CLI::App& cmd, const std::function<void(const RunOption&, const std::string&)>& on_value) {
  for (const auto& opt : run_options()) {
    const std::string flag = "--" + opt.key;
    if (opt.is_switch) {
      // CLI11 counts a `!`-negated flag as -1.
      cmd.add_flag_function(flag + ",!--no-" + opt.key, [on_value, &opt](std::int64_t count) {
        on_value(opt, count > 0 ? "true" : "false");
      }, opt.help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      cmd.add_option_function<std::string>(flag, [on_value, &opt](const std::string& value) {
        on_value(opt, value);
      }, opt.help)->type_name(opt.value_name)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
}

// More ranks than any cluster has: past this the ring model's arithmetic overflows nothing useful.
constexpr int64_t kMostRanks = 10'000'000;

// Each flag's line in the reference (docs/options.md), declared with the flag.
using FlagLines = std::vector<ReferenceLine>;

CLI::Option* documented(FlagLines& lines, CLI::Option* option, std::string written, std::string shown_default,
                        std::string meaning) {
  lines.push_back({std::move(written), std::move(shown_default), std::move(meaning)});
  return option;
}

// How `project` and `advise` each describe the link options they share.
struct LinkLines {
  std::string results;
  std::string ranks_default;
  std::string ranks;
};

// The options of a projection: the result file, the rank counts, the fabric and link figures,
// --force and --out-dir (for `stem`.json and `stem`.md).
void add_link_options(CLI::App& cmd, ProjectCommand& c, const std::string& ranks_help, const std::string& stem,
                      const LinkLines& link, FlagLines& lines) {
  documented(
      lines,
      cmd.add_flag("--force", c.force, "exit 0 even where a row's model is more than 15 % off its own measured step"),
      "`--force`", "off", "exit 0 even where a row's model fails its own check");
  documented(lines, cmd.add_option("--out-dir", c.out_dir, "also write " + stem + ".json and " + stem + ".md here"),
             "`--out-dir DIR`", "none", "also write `" + stem + ".json` and `" + stem + ".md` there");
  documented(lines, cmd.add_option("results", c.results, "result JSON with DDP rows")->required(), "`RESULTS`", "",
             link.results);
  documented(lines, cmd.add_option("--ranks", c.ranks, ranks_help)->delimiter(','), "`--ranks LIST`",
             link.ranks_default, link.ranks);
  documented(lines, cmd.add_option("--ranks-per-node", c.ranks_per_node, "ranks that share a node (default 8)"),
             "`--ranks-per-node N`", "`8`", "ranks sharing a node (the intra-node link between them)");
  documented(lines,
             cmd.add_option("--fabric", c.fabric,
                            "measured (the link the row ran on), hdr-ib, ndr-ib or ethernet-100g (data-sheet figures)"),
             "`--fabric NAME`", "`measured`",
             "`measured`: the link the row ran on, both levels; or `hdr-ib`, `ndr-ib`, `ethernet-100g` "
             "(data-sheet figures)");
  documented(lines, cmd.add_option("--intra-node-gbps", c.intra_node_gbps, "bandwidth between ranks of a node, Gbit/s"),
             "`--intra-node-gbps X`", "the fabric's", "bandwidth between the ranks of a node, Gbit/s");
  documented(lines, cmd.add_option("--inter-node-gbps", c.inter_node_gbps, "bandwidth between nodes, Gbit/s"),
             "`--inter-node-gbps X`", "the fabric's", "bandwidth of one NIC between nodes, Gbit/s");
  documented(lines, cmd.add_option("--latency-us", c.latency_us, "latency of one ring step, microseconds"),
             "`--latency-us X`", "the fabric's", "latency of one ring step, µs (both levels)");
  documented(lines,
             cmd.add_option("--nics-per-node", c.nics_per_node,
                            "NICs a node's ranks share across nodes (the fabric's: 8 for hdr-ib and ndr-ib, one "
                            "per GPU; 1 for ethernet-100g and measured)"),
             "`--nics-per-node N`", "the fabric's",
             "NICs a node's ranks share for their rings across nodes: each of a node's k rings gets min(1, N "
             "/ k) of one NIC; `hdr-ib` and `ndr-ib` have 8 (one per GPU, DGX rails), `ethernet-100g` and "
             "`measured` 1");
  documented(lines,
             cmd.add_option("--calibrate", c.calibrate,
                            "ddpbench_microbench's JSON (--benchmark_format=json): the measured link's latency "
                            "and bandwidth fitted to its allreduce times, instead of to the row's own buckets"),
             "`--calibrate FILE`", "none",
             "`ddpbench_microbench`'s JSON (`--benchmark_format=json`) from `BM_RankAllreduce`, run as every "
             "rank of a world across the link: the measured link's latency and bandwidth fitted to its "
             "allreduce times (the largest world among them), instead of to the row's own buckets; a file "
             "without it is refused (`BM_GlooAllreduce`'s ranks are threads on loopback)");
}

// Throws InputError for link options no projection can use; `least_ranks`: the fewest ranks
// a rank count may have.
void validate_link_options(const CLI::App& cmd, const ProjectCommand& c, int64_t least_ranks) {
  if (c.ranks.empty()) throw InputError("--ranks must list at least one rank count");
  for (int64_t n : c.ranks) {
    if (n < 1 || n > kMostRanks) {
      throw InputError("--ranks: " + std::to_string(n) + " is not a rank count (1 to " + std::to_string(kMostRanks) + ")");
    }
    if (n < least_ranks) {
      throw InputError("--ranks: " + std::to_string(n) + ": one rank has no communication to tune (give 2 or more)");
    }
  }
  if (c.ranks_per_node < 1) {
    throw InputError("--ranks-per-node must be positive (got " + std::to_string(c.ranks_per_node) + ")");
  }
  if (!(c.intra_node_gbps >= 0) || !(c.inter_node_gbps >= 0) || !std::isfinite(c.intra_node_gbps) ||
      !std::isfinite(c.inter_node_gbps)) {
    throw InputError("--intra-node-gbps and --inter-node-gbps must be positive numbers");
  }
  if (!std::isfinite(c.latency_us)) throw InputError("--latency-us must be a number");
  // Given, they must say something: 0 Gbit/s or a negative latency is no link (left out, the fabric's).
  for (const auto& [flag, gbps] : {std::pair{"--intra-node-gbps", c.intra_node_gbps},
                                    std::pair{"--inter-node-gbps", c.inter_node_gbps}}) {
    if (cmd.count(flag) > 0 && !(gbps >= 1e-6 && gbps <= 1e6)) {
      throw InputError(std::string(flag) + " must be from 0.000001 to 1000000 Gbit/s (got " + std::to_string(gbps) + ")");
    }
  }
  if (cmd.count("--latency-us") > 0 && !(c.latency_us >= 0 && c.latency_us <= 1e6)) {
    throw InputError("--latency-us must be from 0 to 1000000 us (got " + std::to_string(c.latency_us) + ")");
  }
  if (cmd.count("--nics-per-node") > 0 && c.nics_per_node < 1) {
    throw InputError("--nics-per-node must be positive (got " + std::to_string(c.nics_per_node) + ")");
  }
}

// A subcommand registered on the app: once CLI11 has parsed it, `finish` checks what was given
// together and returns the command.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<Command()> finish;
  FlagLines lines;  // the reference's line of each flag, in the order declared (run's are the option table's)
  bool takes_run_options = false;  // sweep: every run option too, documented by run's table
};

// A subcommand whose flags, once parsed, `check` sees together (with the app, which knows which
// were given) before they are the command.
template <class Parsed, class Check>
Subcommand checked_subcommand(CLI::App* app, std::shared_ptr<Parsed> parsed, FlagLines lines, Check check,
                              bool takes_run_options = false) {
  return {app,
          [app, parsed, check]() -> Command {
            check(*app, *parsed);
            return *parsed;
          },
          std::move(lines), takes_run_options};
}

Subcommand declare_run(CLI::App& app) {
  auto* run = app.add_subcommand("run", "train one row (one strategy, one config) and report it");
  auto config = std::make_shared<RunConfig>();
  auto keys = std::make_shared<std::set<std::string>>();  // what the user set, which a preset must not override
  add_run_options(*run, [config, keys](const RunOption& opt, const std::string& value) {
    opt.set(*config, value);
    keys->insert(opt.key);
  });
  return {run, [config, keys]() -> Command {
            apply_preset(*config, *keys);
            validate(*config);
            return RunCommand{*config};
          },
          {}};
}

Subcommand declare_list(CLI::App& app) {
  auto* list = app.add_subcommand("list", "list the strategies and models");
  auto c = std::make_shared<ListCommand>();
  FlagLines lines;
  documented(lines,
             list->add_flag("--options", c->options,
                            "print every subcommand's options as the Markdown tables of docs/options.md"),
             "`--options`", "off",
             "print every subcommand's table of options, as this page has them, in place of the "
             "strategies and models");
  return {list, [c]() -> Command { return *c; }, std::move(lines)};
}

void add_sweep_row_options(CLI::App& sweep, SweepCommand& c, FlagLines& lines) {
  documented(lines,
             sweep.add_option("--table", c.table,
                              "auto: tutorial where GPUs are, cpu otherwise; tutorial: the tutorial's five rows; cpu: "
                              "the same rows on CPUs, cut short"),
             "`--table auto\\|tutorial\\|cpu`", "`auto`",
             "the tutorial's five rows, or the CPU preset (the same rows as Gloo ranks and CPU replicas, cut "
             "short; the AMP row in bf16 where the CPU computes bf16, else skipped unless named in `--rows`: "
             "LibTorch's CPU fp16 autocast ran ~25x slower than fp32 even with AVX512-FP16); `auto` picks the "
             "preset where no GPU is")
      ->check(CLI::IsMember({"auto", "tutorial", "cpu"}));
  documented(lines, sweep.add_option("--file", c.file, "a sweep file (JSON) defining the rows, instead of a preset"),
             "`--file FILE`", "none", "a sweep file's rows instead of a preset (below)");
  documented(lines, sweep.add_option("--rows", c.rows, "only these rows, by name")->delimiter(','), "`--rows LIST`",
             "all", "only these rows, by name");
  documented(lines, sweep.add_option("--mode", c.mode, "faithful, controlled or both (default)"),
             "`--mode faithful\\|controlled\\|both`", "`both`",
             "which modes ([what each means](../README.md#rows-and-modes))")
      ->check(CLI::IsMember({"faithful", "controlled", "both"}));
  documented(lines, sweep.add_option("--repeat", c.repeat, "run each row N times; reports give the median and spread"),
             "`--repeat N`", "`1`",
             "each row N times: the median, the range, and rows wider than 10 % flagged unstable");
  documented(lines, sweep.add_option("--out-dir", c.out_dir, "where rows and reports go (default results/)"),
             "`--out-dir DIR`", "`results`", "where rows and reports go");
  documented(lines,
             sweep.add_option("--reports-dir", c.reports_dir,
                              "write results.{json,md,html} here instead of --out-dir (rewritten as each row ends)"),
             "`--reports-dir DIR`", "`--out-dir`",
             "where `results.{json,md,html}` go instead, rewritten as each row ends (`scripts/device-check` "
             "brings them back from there, rows folder left behind)");
  documented(lines, sweep.add_flag("--resume", c.resume, "skip rows already done with the same configuration"),
             "`--resume`", "off",
             "skip rows already done with the same configuration (failed and interrupted rows run again)");
  documented(lines, sweep.add_option("--gbench-json", c.gbench_json, "also write the results as Google Benchmark JSON"),
             "`--gbench-json FILE`", "none", "also write Google Benchmark's JSON ([reports](reports.md))");
  documented(lines,
             sweep.add_flag("--dry-run", c.dry_run, "print each planned row's ddpbench run command; run nothing"),
             "`--dry-run`", "off",
             "print each row's `ddpbench run` command; run nothing. Every row that would run is checked first as "
             "`run` checks it ([below](#exit-codes-and-signals)), and every file the sweep would write as it "
             "checks them, so a row every repetition would refuse, or an output it may not write, is bad input here");
}

void add_sweep_run_options(CLI::App& sweep, SweepCommand& c, FlagLines& lines) {
  documented(lines,
             sweep.add_flag("--reference", c.reference,
                            "after each row, run PyTorch's own implementation of it (torch-single, torch-dp, "
                            "torch-ddp) on the same data, weights and clock, and report the two side by side"),
             "`--reference`", "off",
             "after each repetition of a row, PyTorch's own implementation of it ([PyTorch "
             "twins](pytorch-twins.md)); on CPU ranks a SyncBatchNorm DDP row's twin runs without it, beside "
             "the row run once more without it (`ROW.no-sync-bn`)");
  documented(lines,
             sweep.add_flag("--preload-python,!--no-preload-python", c.preload_python,
                            "PyTorch's rows fork their ranks from one Python started for the sweep, torch already "
                            "imported (default); --no-preload-python: each rank starts its own Python, seconds of "
                            "imports each"),
             "`--preload-python`, `--no-preload-python`", "on",
             "PyTorch's rows fork their ranks from one Python the sweep starts with torch imported ([PyTorch "
             "twins](pytorch-twins.md)); off: each rank starts its own Python");
  documented(lines,
             sweep.add_option("--launcher", c.launcher,
                              "local (default): every row on this machine; srun: inside a SLURM allocation (salloc, "
                              "sbatch), each row an srun job step over the allocation's nodes, its ranks spread as the "
                              "row asks"),
             "`--launcher local\\|srun`", "`local`",
             "`srun`: inside a SLURM allocation, every row an srun job step over its nodes, its ranks srun's "
             "tasks ([under SLURM](distributed.md#under-slurm))")
      ->check(CLI::IsMember({"local", "srun"}));
  documented(lines,
             sweep.add_option("--project", c.project,
                              "project the DDP rows to this fabric (measured, hdr-ib, ndr-ib, ethernet-100g) in the "
                              "reports: 1 to 512 ranks, 8 to a node (ddpbench project gives every choice)"),
             "`--project FABRIC`", "none",
             "project the DDP rows in the reports to `measured` (the link they ran on), `hdr-ib`, `ndr-ib` or "
             "`ethernet-100g`: 1 to 512 ranks, 8 to a node "
             "([projection](projection-and-advice.md#projecting-past-this-machine-ddpbench-project)); a row that "
             "ran SyncBatchNorm across its ranks (the tutorial's DDP rows) is not projected, saying why: run it "
             "with `--no-sync-bn`");
}

// What `sweep`'s flags mean only together, and the ranges a flag cannot check alone.
void validate_sweep(const CLI::App& sweep, const SweepCommand& c) {
  if (c.repeat < 1) throw InputError("--repeat must be positive (got " + std::to_string(c.repeat) + ")");
  // The plan holds every repetition of every row: 2^30 of them ran the machine out of memory.
  constexpr int64_t kMostRepeats = 1000;
  if (c.repeat > kMostRepeats) {
    throw InputError("--repeat " + std::to_string(c.repeat) + " is more than " + std::to_string(kMostRepeats) +
                     ": every repetition is a run of every row, planned before the first");
  }
  if (c.out_dir.empty()) throw InputError("--out-dir must not be empty");
  if (sweep.count("--reports-dir") > 0 && c.reports_dir.empty()) throw InputError("--reports-dir must not be empty");
  if (!c.project.empty() && c.project != "measured") (void)named_fabric(c.project, "--project");
}

Subcommand declare_sweep(CLI::App& app) {
  auto* sweep = app.add_subcommand("sweep", "run the tutorial's table (or a sweep file's rows) and report them");
  auto c = std::make_shared<SweepCommand>();
  FlagLines lines;
  add_sweep_row_options(*sweep, *c, lines);
  add_sweep_run_options(*sweep, *c, lines);
  auto scratch = std::make_shared<RunConfig>();  // overrides are checked as they are given
  add_run_options(*sweep, [c, scratch](const RunOption& opt, const std::string& value) {
    if (sweep_sets_itself(opt.key)) throw InputError("--" + opt.key + ": " + kSweepSetsItself);
    opt.set(*scratch, value);
    c->overrides.emplace_back(opt.key, value);
  });
  return checked_subcommand(sweep, c, std::move(lines), validate_sweep, /*takes_run_options=*/true);
}

void add_compare_gate_options(CLI::App& compare, CompareCommand& c, FlagLines& lines) {
  documented(lines, compare.add_option("baseline", c.baseline, "baseline result JSON")->required(), "`BASELINE`", "",
             "the baseline's result file");
  documented(lines, compare.add_option("current", c.current, "current result JSON")->required(), "`CURRENT`", "",
             "the current result file, judged against the baseline");
  documented(lines,
             compare.add_option("--threshold", c.threshold,
                                "relative change below which nothing is a regression (default 0.10)"),
             "`--threshold X`", "`0.10`", "a relative change smaller than this is never a regression, either way");
  documented(lines,
             compare
                 .add_option("--metric", c.metrics,
                             "metrics that gate: train_time_s, images_per_s, steady_images_per_s, step_time_s, "
                             "test_accuracy")
                 ->delimiter(','),
             "`--metric LIST`", "`train_time_s,steady_images_per_s`",
             "also `images_per_s`, `step_time_s`, `test_accuracy`");
  documented(lines,
             compare
                 .add_option("--allow-env-mismatch", c.allow_env_mismatch,
                             "aspects of the environment that may differ between the files, or all: build-type, "
                             "threads, cpu-affinity, cpu, gpu, libtorch, cuda, cudnn, nccl, driver, dataset (any "
                             "other difference is cannot judge)")
                 ->delimiter(','),
             "`--allow-env-mismatch LIST`", "none",
             "what may differ between the files' environments: `build-type`, `threads` (each rank's and "
             "`OMP_NUM_THREADS`), `cpu-affinity`, `cpu`, `gpu`, `libtorch`, `cuda`, `cudnn`, `nccl`, `driver`, "
             "`dataset`, or `all`; any other difference is cannot judge (exit 2), in both modes");
  documented(lines,
             compare.add_option("--normalize-by", c.normalize_by,
                                "divide each row's metric by this row's in the same file (e.g. single), or with `twin` "
                                "each repetition by its PyTorch twin's (sweep --reference), to gate on ratios"),
             "`--normalize-by ROW\\|twin`", "none",
             "divide each row's metric by this row's median, per file and mode; `twin`: each repetition by "
             "its PyTorch twin's in the same repetition (gate on ratios)");
  documented(lines, compare.add_option("--alpha", c.alpha, "significance level of the rank test and, with --paired, of the t test and its "
                                "one-sided bound: below 0.5 (default 0.05)"),
             "`--alpha X`", "`0.05`", "the U test's significance level, and `--paired`'s (below 0.5)");
  documented(lines, compare.add_option("--out", c.out, "also write the Markdown table to this file"), "`--out FILE`",
             "none", "also write the Markdown table there, after a first line (an HTML comment, hidden where it is "
             "rendered) that marks the file compare's: only such a file is replaced");
  documented(lines,
             compare.add_option("--min-vs-pytorch", c.min_vs_pytorch,
                                "fail where a row of the current file is below this many times its PyTorch twin "
                                "(sweep --reference) in epoch speed or steady images/s beyond the noise, e.g. 0.9"),
             "`--min-vs-pytorch X`", "none",
             "a row slower than X times its PyTorch twin, beyond the noise, is a regression");
  documented(lines,
             compare
                 .add_option("--allow-missing", c.allow_missing,
                             "rows (by name) of the baseline that may be absent, skipped or interrupted now; any "
                             "other such row is a regression")
                 ->delimiter(','),
             "`--allow-missing LIST`", "none", "rows of the baseline that may be absent, skipped or interrupted now");
}

void add_compare_paired_options(CLI::App& compare, CompareCommand& c, FlagLines& lines) {
  documented(lines,
             compare.add_flag("--paired", c.paired,
                              "the files are the baseline build's and the candidate's rounds, run back to back on one "
                              "machine (repetition r of each is round r): a paired t test on the trimmed mean of the "
                              "log ratios, one-sided in the direction of the change, Holm across rows, each round a "
                              "look with its share of alpha (80 % at --max-rounds) (default threshold 0.05, metric "
                              "train_time_s)"),
             "`--paired`", "off",
             "the files are two builds' rounds on one machine (back to back, or side by side in lockstep), "
             "repetition r of each being round r: a paired t test on the 20 % trimmed mean of the log ratios, "
             "Holm across rows ([how](gate.md#paired-rounds-of-two-builds-compare---paired)); `step_time_s`'s "
             "log ratio of a round comes from its matched steady steps where both rounds' steps match (each "
             "parity's trimmed mean, then their mean); its threshold defaults to `0.05` and its metric to "
             "`train_time_s`");
  documented(lines,
             compare.add_option("--min-rounds", c.min_rounds, "--paired: no row is decided on fewer pairs (default 4)"),
             "`--min-rounds N`", "`4`", "`--paired`: no row is decided on fewer pairs");
  documented(lines,
             compare.add_option("--max-rounds", c.max_rounds,
                                "--paired: a row still undecided after this many pairs is within the noise where its "
                                "one-sided 1 - alpha upper bound is below the threshold, else too noisy; one with "
                                "fewer pairs than --min-rounds here cannot be judged (default 12)"),
             "`--max-rounds N`", "`12`",
             "`--paired`: a row still undecided after this many pairs is within the noise where its one-sided "
             "`1 - alpha` upper bound is below the threshold, else cannot judge (too noisy, exit 2); each round from "
             "`--min-rounds` on is a look at `alpha / (max - min + 1)`");
  documented(lines,
             compare
                 .add_option("--coarse-metric", c.coarse_metrics,
                             "--paired: metrics (of --metric) judged on the rounds the others ask for: one still "
                             "undecided asks for no more rounds and is judged at its row's last look (scripts/ci-bench's "
                             "lockstep gate: train_time_s)")
                 ->delimiter(','),
             "`--coarse-metric LIST`", "none",
             "`--paired`: metrics of `--metric` judged on the rounds the others ask for: one still undecided "
             "below the cap asks for no more rounds; at its row's last look it is judged as at the cap (a clear "
             "change is a regression; undecided, within the noise only where its upper bound is below the "
             "threshold, else cannot judge); `scripts/ci-bench`'s lockstep gate makes `train_time_s` coarse");
  documented(lines,
             compare.add_option("--undecided-out", c.undecided_out,
                                "--paired: write the rows still undecided below --max-rounds to this file, one a line "
                                "(the rounds to run next)"),
             "`--undecided-out FILE`", "none",
             "`--paired`: the rows still undecided below `--max-rounds`, one a line (the rounds to run next), after "
             "a first line starting with `#` that marks the file compare's (readers skip it; only such a file is "
             "replaced)");
}

// What `compare`'s flags mean only together: the paired gate's own flags, and the ranges.
void validate_compare(const CLI::App& compare, CompareCommand& c) {
  c.threshold_given = compare.count("--threshold") > 0;
  c.metrics_given = compare.count("--metric") > 0;
  for (const char* flag : {"--min-rounds", "--max-rounds", "--undecided-out", "--coarse-metric"}) {
    if (compare.count(flag) > 0 && !c.paired) throw InputError(std::string(flag) + " needs --paired");
  }
  for (const char* flag : {"--normalize-by", "--min-vs-pytorch"}) {
    if (compare.count(flag) > 0 && c.paired) {
      throw InputError(std::string(flag) + " does not apply to --paired (each row is compared with itself on the "
                                           "baseline build; the floor against PyTorch is a separate compare)");
    }
  }
  if (!(c.threshold >= 0 && c.threshold < 10)) {
    throw InputError("--threshold must be in [0, 10) (got " + std::to_string(c.threshold) + ")");
  }
  if (!(c.min_vs_pytorch >= 0 && c.min_vs_pytorch < 100)) {
    throw InputError("--min-vs-pytorch must be in [0, 100) (got " + std::to_string(c.min_vs_pytorch) + ")");
  }
  // --paired's bound is one-sided at 1 - alpha, the two-sided 1 - 2 alpha interval's upper end.
  if (!(c.alpha > 0 && c.alpha < 0.5)) {
    throw InputError("--alpha must be in (0, 0.5) (got " + std::to_string(c.alpha) + ")");
  }
  check_allowed_aspects(c.allow_env_mismatch);
}

Subcommand declare_compare(CLI::App& app) {
  auto* compare = app.add_subcommand(
      "compare", "compare two result files: the CI gate (exit 0 no regression, 1 a regression, 2 cannot judge or bad input)");
  auto c = std::make_shared<CompareCommand>();
  FlagLines lines;
  add_compare_gate_options(*compare, *c, lines);
  add_compare_paired_options(*compare, *c, lines);
  return checked_subcommand(compare, c, std::move(lines), validate_compare);
}

Subcommand declare_project(CLI::App& app) {
  auto* project = app.add_subcommand("project",
                                     "project a result file's DDP rows to another cluster (ring model "
                                     "over the measured bucket timeline)");
  auto c = std::make_shared<ProjectCommand>();
  FlagLines lines;
  add_link_options(
      *project, *c, "rank counts to project to (default 1,2,4,...,512)", "projection",
      {"a result file with DDP rows (a row's or a sweep's)", "`1,2,4,...,512`", "rank counts to project to"}, lines);
  return checked_subcommand(project, c, std::move(lines), [](const CLI::App& parsed_app, const ProjectCommand& parsed) {
    validate_link_options(parsed_app, parsed, 1);
  });
}

// Each rank count once, in the order given; bucket caps DDP can take.
void validate_advise(const CLI::App& advise, AdviseCommand& c) {
  validate_link_options(advise, c, 2);
  std::vector<int64_t> once;
  for (int64_t n : c.ranks) {
    if (std::find(once.begin(), once.end(), n) == once.end()) once.push_back(n);
  }
  c.ranks = once;
  for (double mb : c.bucket_mb) {
    // DDP's caps in bytes are whole numbers: a cap below a kilobyte or above a terabyte is no cap.
    if (!(std::isfinite(mb) && mb >= 0.001 && mb <= kMostBucketMb)) {
      throw InputError("--bucket-mb: " + std::to_string(mb) + " is not a bucket cap (0.001 to 1000000 MiB)");
    }
  }
}

Subcommand declare_advise(CLI::App& app) {
  auto* advise = app.add_subcommand("advise",
                                    "the DDP settings (bucket cap, compression hook, overlap) to use at other "
                                    "rank counts, from each DDP row of a result file");
  auto c = std::make_shared<AdviseCommand>();
  FlagLines lines;
  add_link_options(*advise, *c, "rank counts to advise for, 2 or more (default 8,64,512)", "advice",
                   {"a result file with DDP rows run by this version or later (they record `gradient_timeline`)",
                    "`8,64,512`", "rank counts to advise for, 2 or more"},
                   lines);
  documented(lines,
             advise->add_option("--bucket-mb", c->bucket_mb, "only these bucket caps, MiB (default 1,5,10,25,50,100)")
                 ->delimiter(','),
             "`--bucket-mb LIST`", "`1,5,10,25,50,100`",
             "only these bucket caps, MiB (0.001 to 1000000; 25 is DDP's default, with its 1 MiB first bucket)");
  documented(lines,
             advise->add_option("--comm-hook", c->comm_hooks, "only these hooks (default allreduce,fp16,bf16)")
                 ->delimiter(','),
             "`--comm-hook LIST`", "`allreduce,fp16,bf16`", "only these hooks (`allreduce`: none)")
      ->check(CLI::IsMember({"allreduce", "fp16", "bf16"}));
  documented(
      lines,
      advise->add_option("--overlap", c->overlap, "only overlap on, off or both (default on,off)")->delimiter(','),
      "`--overlap LIST`", "`on,off`", "only these")
      ->check(CLI::IsMember({"on", "off"}));
  return checked_subcommand(advise, c, std::move(lines), validate_advise);
}

Subcommand declare_trace(CLI::App& app) {
  auto* trace = app.add_subcommand("trace",
                                   "merge a traced row's per-rank traces (--trace-steps) into one Chrome "
                                   "trace on one clock, for Perfetto or chrome://tracing");
  auto c = std::make_shared<TraceCommand>();
  FlagLines lines;
  documented(lines,
             trace->add_option("results", c->results, "the row's result JSON (its traces lie beside it)")->required(),
             "`RESULTS`", "",
             "the traced row's result file, a row's or a sweep's: its ranks' traces lie beside it (or, for a "
             "sweep's `results.json`, beside the row's own file under `rows/MODE/` of the sweep's rows folder, "
             "which `--reports-dir` puts elsewhere: the file's `rows_href`)");
  documented(lines, trace->add_option("--row", c->row, "the traced row to merge, where the file holds several"),
             "`--row NAME`", "the file's only traced row",
             "the traced row to merge, where the file holds several; several runs of one name (modes, "
             "repetitions) are refused: give the run's own file");
  documented(lines,
             trace->add_option("--out", c->out,
                               "the merged trace (default: beside the results, NAME.merged.trace.json for NAME.json)"),
             "`--out FILE`", "`NAME.merged.trace.json` beside `NAME.json`",
             "the merged Chrome trace; never one of its inputs or another row's rank trace. From a file of "
             "several rows (a sweep's `results.json`), `ROW.merged.trace.json` beside the row's traces, one for "
             "each row");
  return {trace, [c]() -> Command { return *c; }, std::move(lines)};
}

// The subcommands, in the order --help lists them.
const std::array<Subcommand (*)(CLI::App&), 7> kSubcommands{&declare_run,     &declare_list,   &declare_sweep,
                                                            &declare_compare, &declare_project, &declare_advise,
                                                            &declare_trace};

// The application with every subcommand declared on it.
std::vector<Subcommand> declare_subcommands(CLI::App& app) {
  app.set_version_flag("--version", std::string("ddpbench ") + DDPBENCH_VERSION);
  app.require_subcommand(1);
  std::vector<Subcommand> subcommands;
  for (const auto declare : kSubcommands) subcommands.push_back(declare(app));
  return subcommands;
}

std::string flag_table_markdown(const Subcommand& subcommand) {
  const std::string name = subcommand.app->get_name();
  if (name == "run") return run_options_markdown();
  // A flag CLI11 knows that the reference does not would be a flag its users cannot find.
  const auto declared = subcommand.app->get_options([&](const CLI::Option* o) {
    const bool run_option = subcommand.takes_run_options && o->get_name().starts_with("--") &&
                            find_run_option(o->get_name().substr(2)) != nullptr;
    return o->get_name() != "--help" && !run_option;
  });
  if (declared.size() != subcommand.lines.size()) {
    throw std::logic_error("ddpbench " + name + " declares " + std::to_string(declared.size()) + " options and " +
                           std::to_string(subcommand.lines.size()) + " lines of the reference");
  }
  return reference_table_markdown(subcommand.lines);
}

const char* const kAppDescription = "ddpbench: the single-GPU / DataParallel / DDP / AMP training table, measured";

}  // namespace

std::string options_table_markdown(std::string_view subcommand) {
  CLI::App app{kAppDescription, "ddpbench"};
  for (const auto& declared : declare_subcommands(app)) {
    if (declared.app->get_name() == subcommand) return flag_table_markdown(declared);
  }
  throw InputError("no subcommand '" + std::string(subcommand) + "'");
}

std::string options_reference_markdown() {
  CLI::App app{kAppDescription, "ddpbench"};
  std::string reference;
  for (const auto& declared : declare_subcommands(app)) {
    reference += (reference.empty() ? "" : "\n") + std::string("## `ddpbench ") + declared.app->get_name() + "`\n\n" +
                 flag_table_markdown(declared);
  }
  return reference;
}

Command parse_command_line(int argc, const char* const* argv) {
  CLI::App app{kAppDescription, "ddpbench"};
  const std::vector<Subcommand> subcommands = declare_subcommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      std::ostringstream out, err;
      app.exit(e, out, err);
      return HelpRequest{out.str() + err.str()};
    }
    throw InputError(e.what());
  }
  for (const auto& subcommand : subcommands) {
    if (subcommand.app->parsed()) return subcommand.finish();
  }
  throw InputError("no subcommand given (see --help)");
}

}  // namespace ddpbench
