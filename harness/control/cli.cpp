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

// The options of a projection: the result file, the rank counts, the fabric and link figures,
// --force and --out-dir (for `stem`.json and `stem`.md).
void add_link_options(CLI::App& cmd, ProjectCommand& c, const std::string& ranks_help, const std::string& stem) {
  cmd.add_flag("--force", c.force, "exit 0 even where a row's model is more than 15 % off its own measured step");
  cmd.add_option("--out-dir", c.out_dir, "also write " + stem + ".json and " + stem + ".md here");
  cmd.add_option("results", c.results, "result JSON with DDP rows")->required();
  cmd.add_option("--ranks", c.ranks, ranks_help)->delimiter(',');
  cmd.add_option("--ranks-per-node", c.ranks_per_node, "ranks that share a node (default 8)");
  cmd.add_option("--fabric", c.fabric,
                 "measured (the link the row ran on), hdr-ib, ndr-ib or ethernet-100g (data-sheet figures)");
  cmd.add_option("--intra-node-gbps", c.intra_node_gbps, "bandwidth between ranks of a node, Gbit/s");
  cmd.add_option("--inter-node-gbps", c.inter_node_gbps, "bandwidth between nodes, Gbit/s");
  cmd.add_option("--latency-us", c.latency_us, "latency of one ring step, microseconds");
  cmd.add_option("--nics-per-node", c.nics_per_node,
                 "NICs a node's ranks share across nodes (the fabric's: 8 for hdr-ib and ndr-ib, one per GPU; 1 "
                 "for ethernet-100g and measured)");
  cmd.add_option("--calibrate", c.calibrate,
                 "ddpbench_microbench's JSON (--benchmark_format=json): the measured link's latency and bandwidth "
                 "fitted to its allreduce times, instead of to the row's own buckets");
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
};

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
          }};
}

Subcommand declare_list(CLI::App& app) {
  auto* list = app.add_subcommand("list", "list the strategies and models");
  auto c = std::make_shared<ListCommand>();
  list->add_flag("--options", c->options,
                 "print every option of run (and of sweep's rows) as the Markdown table of docs/options.md");
  return {list, [c]() -> Command { return *c; }};
}

void add_sweep_row_options(CLI::App& sweep, SweepCommand& c) {
  sweep.add_option("--table", c.table,
                   "auto: tutorial where GPUs are, cpu otherwise; tutorial: the tutorial's five rows; cpu: "
                   "the same rows on CPUs, cut short")
      ->check(CLI::IsMember({"auto", "tutorial", "cpu"}));
  sweep.add_option("--file", c.file, "a sweep file (JSON) defining the rows, instead of a preset");
  sweep.add_option("--rows", c.rows, "only these rows, by name")->delimiter(',');
  sweep.add_option("--mode", c.mode, "faithful, controlled or both (default)")
      ->check(CLI::IsMember({"faithful", "controlled", "both"}));
  sweep.add_option("--repeat", c.repeat, "run each row N times; reports give the median and spread");
  sweep.add_option("--out-dir", c.out_dir, "where rows and reports go (default results/)");
  sweep.add_option("--reports-dir", c.reports_dir,
                   "write results.{json,md,html} here instead of --out-dir (rewritten as each row ends)");
  sweep.add_flag("--resume", c.resume, "skip rows already done with the same configuration");
  sweep.add_option("--gbench-json", c.gbench_json, "also write the results as Google Benchmark JSON");
  sweep.add_flag("--dry-run", c.dry_run, "print each planned row's ddpbench run command; run nothing");
}

void add_sweep_run_options(CLI::App& sweep, SweepCommand& c) {
  sweep.add_flag("--reference", c.reference,
                 "after each row, run PyTorch's own implementation of it (torch-single, torch-dp, torch-ddp) on the "
                 "same data, weights and clock, and report the two side by side");
  sweep.add_flag("--preload-python,!--no-preload-python", c.preload_python,
                 "PyTorch's rows fork their ranks from one Python started for the sweep, torch already imported "
                 "(default); --no-preload-python: each rank starts its own Python, seconds of imports each");
  sweep.add_option("--launcher", c.launcher,
                   "local (default): every row on this machine; srun: inside a SLURM allocation (salloc, sbatch), "
                   "each row an srun job step over the allocation's nodes, its ranks spread as the row asks")
      ->check(CLI::IsMember({"local", "srun"}));
  sweep.add_option("--project", c.project,
                   "project the DDP rows to this fabric (measured, hdr-ib, ndr-ib, ethernet-100g) in the reports: "
                   "1 to 512 ranks, 8 to a node (ddpbench project gives every choice)");
}

Subcommand declare_sweep(CLI::App& app) {
  auto* sweep = app.add_subcommand("sweep", "run the tutorial's table (or a sweep file's rows) and report them");
  auto c = std::make_shared<SweepCommand>();
  add_sweep_row_options(*sweep, *c);
  add_sweep_run_options(*sweep, *c);
  auto scratch = std::make_shared<RunConfig>();  // overrides are checked as they are given
  add_run_options(*sweep, [c, scratch](const RunOption& opt, const std::string& value) {
    if (opt.key == "out" || opt.key == "name") {
      throw InputError("--" + opt.key + ": not for sweep (rows are named by the sweep; --out-dir says where)");
    }
    opt.set(*scratch, value);
    c->overrides.emplace_back(opt.key, value);
  });
  return {sweep, [sweep, c]() -> Command {
            if (c->repeat < 1) throw InputError("--repeat must be positive (got " + std::to_string(c->repeat) + ")");
            if (c->out_dir.empty()) throw InputError("--out-dir must not be empty");
            if (sweep->count("--reports-dir") > 0 && c->reports_dir.empty()) {
              throw InputError("--reports-dir must not be empty");
            }
            if (!c->project.empty() && c->project != "measured") (void)named_fabric(c->project, "--project");
            return *c;
          }};
}

void add_compare_gate_options(CLI::App& compare, CompareCommand& c) {
  compare.add_option("baseline", c.baseline, "baseline result JSON")->required();
  compare.add_option("current", c.current, "current result JSON")->required();
  compare.add_option("--threshold", c.threshold, "relative change below which nothing is a regression (default 0.10)");
  compare.add_option("--metric", c.metrics,
                     "metrics that gate: train_time_s, images_per_s, steady_images_per_s, step_time_s, test_accuracy")
      ->delimiter(',');
  compare.add_flag("--allow-env-mismatch", c.allow_env_mismatch,
                   "compare results from different machines or software (GPUs, CPU, LibTorch, CUDA, cuDNN, NCCL, "
                   "driver, dataset)");
  compare.add_option("--normalize-by", c.normalize_by,
                     "divide each row's metric by this row's in the same file (e.g. single), or with `twin` each "
                     "repetition by its PyTorch twin's (sweep --reference), to gate on ratios");
  compare.add_option("--alpha", c.alpha, "significance level of the rank test (default 0.05)");
  compare.add_option("--out", c.out, "also write the Markdown table to this file");
  compare.add_option("--min-vs-pytorch", c.min_vs_pytorch,
                     "fail where a row of the current file is below this many times its PyTorch twin "
                     "(sweep --reference) in epoch speed or steady images/s beyond the noise, e.g. 0.9");
  compare.add_option("--allow-missing", c.allow_missing,
                     "rows (by name) of the baseline that may be absent, skipped or interrupted now; any other "
                     "such row is a regression")
      ->delimiter(',');
}

void add_compare_paired_options(CLI::App& compare, CompareCommand& c) {
  compare.add_flag("--paired", c.paired,
                   "the files are the baseline build's and the candidate's rounds, run back to back on one machine "
                   "(repetition r of each is round r): a paired t test on the trimmed mean of the log ratios, one-sided in the "
                   "direction of the change, Holm across rows, each round a look with its share of alpha (80 % at "
                   "--max-rounds) (default threshold 0.05, metric train_time_s)");
  compare.add_option("--min-rounds", c.min_rounds, "--paired: no row is decided on fewer pairs (default 4)");
  compare.add_option("--max-rounds", c.max_rounds,
                     "--paired: a row still undecided after this many pairs is within the noise; one with fewer "
                     "pairs than --min-rounds here cannot be judged (default 12)");
  compare.add_option("--coarse-metric", c.coarse_metrics,
                     "--paired: metrics (of --metric) judged on the rounds the others ask for: one still undecided "
                     "asks for no more rounds and is within the noise (scripts/ci-bench's lockstep gate: train_time_s)")
      ->delimiter(',');
  compare.add_option("--undecided-out", c.undecided_out,
                     "--paired: write the rows still undecided below --max-rounds to this file, one a line (the "
                     "rounds to run next)");
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
  if (!(c.alpha > 0 && c.alpha < 1)) {
    throw InputError("--alpha must be in (0, 1) (got " + std::to_string(c.alpha) + ")");
  }
}

Subcommand declare_compare(CLI::App& app) {
  auto* compare = app.add_subcommand(
      "compare", "compare two result files: the CI gate (exit 0 no regression, 1 a regression, 2 cannot judge or bad input)");
  auto c = std::make_shared<CompareCommand>();
  add_compare_gate_options(*compare, *c);
  add_compare_paired_options(*compare, *c);
  return {compare, [compare, c]() -> Command {
            validate_compare(*compare, *c);
            return *c;
          }};
}

Subcommand declare_project(CLI::App& app) {
  auto* project = app.add_subcommand("project", "project a result file's DDP rows to another cluster (ring model "
                                                "over the measured bucket timeline)");
  auto c = std::make_shared<ProjectCommand>();
  add_link_options(*project, *c, "rank counts to project to (default 1,2,4,...,512)", "projection");
  return {project, [project, c]() -> Command {
            validate_link_options(*project, *c, 1);
            return *c;
          }};
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
    if (!(std::isfinite(mb) && mb >= 0.001 && mb <= 1e6)) {
      throw InputError("--bucket-mb: " + std::to_string(mb) + " is not a bucket cap (0.001 to 1000000 MiB)");
    }
  }
}

Subcommand declare_advise(CLI::App& app) {
  auto* advise = app.add_subcommand("advise", "the DDP settings (bucket cap, compression hook, overlap) to use at other "
                                              "rank counts, from each DDP row of a result file");
  auto c = std::make_shared<AdviseCommand>();
  add_link_options(*advise, *c, "rank counts to advise for, 2 or more (default 8,64,512)", "advice");
  advise->add_option("--bucket-mb", c->bucket_mb, "only these bucket caps, MiB (default 1,5,10,25,50,100)")
      ->delimiter(',');
  advise->add_option("--comm-hook", c->comm_hooks, "only these hooks (default allreduce,fp16,bf16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"allreduce", "fp16", "bf16"}));
  advise->add_option("--overlap", c->overlap, "only overlap on, off or both (default on,off)")
      ->delimiter(',')
      ->check(CLI::IsMember({"on", "off"}));
  return {advise, [advise, c]() -> Command {
            validate_advise(*advise, *c);
            return *c;
          }};
}

Subcommand declare_trace(CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "merge a traced row's per-rank traces (--trace-steps) into one Chrome "
                                            "trace on one clock, for Perfetto or chrome://tracing");
  auto c = std::make_shared<TraceCommand>();
  trace->add_option("results", c->results, "the row's result JSON (its traces lie beside it)")->required();
  trace->add_option("--row", c->row, "the traced row to merge, where the file holds several");
  trace->add_option("--out", c->out, "the merged trace (default: beside the results, NAME.merged.trace.json for NAME.json)");
  return {trace, [c]() -> Command { return *c; }};
}

// The subcommands, in the order --help lists them.
const std::array<Subcommand (*)(CLI::App&), 7> kSubcommands{&declare_run,     &declare_list,   &declare_sweep,
                                                            &declare_compare, &declare_project, &declare_advise,
                                                            &declare_trace};

}  // namespace

Command parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"ddpbench: the single-GPU / DataParallel / DDP / AMP training table, measured", "ddpbench"};
  app.set_version_flag("--version", std::string("ddpbench ") + DDPBENCH_VERSION);
  app.require_subcommand(1);
  std::vector<Subcommand> subcommands;
  for (const auto declare : kSubcommands) subcommands.push_back(declare(app));
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
