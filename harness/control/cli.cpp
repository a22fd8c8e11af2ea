#include "harness/control/cli.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
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

}  // namespace

Command parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"ddpbench: the single-GPU / DataParallel / DDP / AMP training table, measured",
               "ddpbench"};
  app.set_version_flag("--version", std::string("ddpbench ") + DDPBENCH_VERSION);
  app.require_subcommand(1);

  RunConfig run_config;
  std::set<std::string> run_keys;  // what the user set, which a preset must not override
  auto* run = app.add_subcommand("run", "train one row (one strategy, one config) and report it");
  add_run_options(*run, [&](const RunOption& opt, const std::string& value) {
    opt.set(run_config, value);
    run_keys.insert(opt.key);
  });
  auto* list = app.add_subcommand("list", "list the strategies and models");

  SweepCommand sweep_command;
  auto* sweep = app.add_subcommand("sweep", "run the tutorial's table (or a sweep file's rows) and report them");
  sweep->add_option("--table", sweep_command.table,
                    "auto: tutorial where GPUs are, cpu otherwise; tutorial: the tutorial's five rows; cpu: "
                    "the same rows on CPUs, cut short")
      ->check(CLI::IsMember({"auto", "tutorial", "cpu"}));
  sweep->add_option("--file", sweep_command.file, "a sweep file (JSON) defining the rows, instead of a preset");
  sweep->add_option("--rows", sweep_command.rows, "only these rows, by name")->delimiter(',');
  sweep->add_option("--mode", sweep_command.mode, "faithful, controlled or both (default)")
      ->check(CLI::IsMember({"faithful", "controlled", "both"}));
  sweep->add_option("--repeat", sweep_command.repeat, "run each row N times; reports give the median and spread");
  sweep->add_option("--out-dir", sweep_command.out_dir, "where rows and reports go (default results/)");
  sweep->add_option("--reports-dir", sweep_command.reports_dir,
                    "write results.{json,md,html} here instead of --out-dir (rewritten as each row ends)");
  sweep->add_flag("--resume", sweep_command.resume, "skip rows already done with the same configuration");
  sweep->add_option("--gbench-json", sweep_command.gbench_json, "also write the results as Google Benchmark JSON");
  sweep->add_flag("--dry-run", sweep_command.dry_run, "print each planned row's ddpbench run command; run nothing");
  sweep->add_flag("--reference", sweep_command.reference,
                  "after each row, run PyTorch's own implementation of it (torch-single, torch-dp, torch-ddp) on the "
                  "same data, weights and clock, and report the two side by side");
  sweep->add_flag("--preload-python,!--no-preload-python", sweep_command.preload_python,
                  "PyTorch's rows fork their ranks from one Python started for the sweep, torch already imported "
                  "(default); --no-preload-python: each rank starts its own Python, seconds of imports each");
  sweep->add_option("--launcher", sweep_command.launcher,
                    "local (default): every row on this machine; srun: inside a SLURM allocation (salloc, sbatch), "
                    "each row an srun job step over the allocation's nodes, its ranks spread as the row asks")
      ->check(CLI::IsMember({"local", "srun"}));
  sweep->add_option("--project", sweep_command.project,
                    "project the DDP rows to this fabric (measured, hdr-ib, ndr-ib, ethernet-100g) in the reports: "
                    "1 to 512 ranks, 8 to a node (ddpbench project gives every choice)");
  RunConfig sweep_scratch;  // overrides are checked as they are given
  add_run_options(*sweep, [&](const RunOption& opt, const std::string& value) {
    if (opt.key == "out" || opt.key == "name") {
      throw InputError("--" + opt.key + ": not for sweep (rows are named by the sweep; --out-dir says where)");
    }
    opt.set(sweep_scratch, value);
    sweep_command.overrides.emplace_back(opt.key, value);
  });

  CompareCommand compare_command;
  auto* compare = app.add_subcommand(
      "compare", "compare two result files: the CI gate (exit 0 no regression, 1 a regression, 2 cannot judge or bad input)");
  compare->add_option("baseline", compare_command.baseline, "baseline result JSON")->required();
  compare->add_option("current", compare_command.current, "current result JSON")->required();
  compare->add_option("--threshold", compare_command.threshold,
                      "relative change below which nothing is a regression (default 0.10)");
  compare->add_option("--metric", compare_command.metrics,
                      "metrics that gate: train_time_s, images_per_s, steady_images_per_s, step_time_s, test_accuracy")
      ->delimiter(',');
  compare->add_flag("--allow-env-mismatch", compare_command.allow_env_mismatch,
                    "compare results from different machines or software (GPUs, CPU, LibTorch, CUDA, cuDNN, NCCL, "
                    "driver, dataset)");
  compare->add_option("--normalize-by", compare_command.normalize_by,
                      "divide each row's metric by this row's in the same file (e.g. single), or with `twin` each "
                      "repetition by its PyTorch twin's (sweep --reference), to gate on ratios");
  compare->add_option("--alpha", compare_command.alpha, "significance level of the rank test (default 0.05)");
  compare->add_option("--out", compare_command.out, "also write the Markdown table to this file");
  compare->add_option("--min-vs-pytorch", compare_command.min_vs_pytorch,
                      "fail where a row of the current file is below this many times its PyTorch twin "
                      "(sweep --reference) in epoch speed or steady images/s beyond the noise, e.g. 0.9");
  compare->add_option("--allow-missing", compare_command.allow_missing,
                      "rows (by name) of the baseline that may be absent, skipped or interrupted now; any other "
                      "such row is a regression")
      ->delimiter(',');
  compare->add_flag("--paired", compare_command.paired,
                    "the files are the baseline build's and the candidate's rounds, run back to back on one machine "
                    "(repetition r of each is round r): a paired t test on the trimmed mean of the log ratios, one-sided in the "
                    "direction of the change, Holm across rows, each round a look with its share of alpha (80 % at "
                    "--max-rounds) (default threshold 0.05, metric train_time_s)");
  compare->add_option("--min-rounds", compare_command.min_rounds, "--paired: no row is decided on fewer pairs (default 4)");
  compare->add_option("--max-rounds", compare_command.max_rounds,
                      "--paired: a row still undecided after this many pairs is within the noise; one with fewer "
                      "pairs than --min-rounds here cannot be judged (default 12)");
  compare->add_option("--coarse-metric", compare_command.coarse_metrics,
                      "--paired: metrics (of --metric) judged on the rounds the others ask for: one still undecided "
                      "asks for no more rounds and is within the noise (scripts/ci-bench's lockstep gate: train_time_s)")
      ->delimiter(',');
  compare->add_option("--undecided-out", compare_command.undecided_out,
                      "--paired: write the rows still undecided below --max-rounds to this file, one a line (the "
                      "rounds to run next)");

  ProjectCommand project_command;
  auto* project = app.add_subcommand("project", "project a result file's DDP rows to another cluster (ring model "
                                                "over the measured bucket timeline)");
  add_link_options(*project, project_command, "rank counts to project to (default 1,2,4,...,512)", "projection");

  AdviseCommand advise_command;
  auto* advise = app.add_subcommand("advise", "the DDP settings (bucket cap, compression hook, overlap) to use at other "
                                              "rank counts, from each DDP row of a result file");
  add_link_options(*advise, advise_command, "rank counts to advise for, 2 or more (default 8,64,512)", "advice");
  advise->add_option("--bucket-mb", advise_command.bucket_mb, "only these bucket caps, MiB (default 1,5,10,25,50,100)")
      ->delimiter(',');
  advise->add_option("--comm-hook", advise_command.comm_hooks, "only these hooks (default allreduce,fp16,bf16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"allreduce", "fp16", "bf16"}));
  advise->add_option("--overlap", advise_command.overlap, "only overlap on, off or both (default on,off)")
      ->delimiter(',')
      ->check(CLI::IsMember({"on", "off"}));

  TraceCommand trace_command;
  auto* trace = app.add_subcommand("trace", "merge a traced row's per-rank traces (--trace-steps) into one Chrome "
                                            "trace on one clock, for Perfetto or chrome://tracing");
  trace->add_option("results", trace_command.results, "the row's result JSON (its traces lie beside it)")->required();
  trace->add_option("--row", trace_command.row, "the traced row to merge, where the file holds several");
  trace->add_option("--out", trace_command.out, "the merged trace (default: beside the results, NAME.merged.trace.json for NAME.json)");

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

  if (run->parsed()) {
    apply_preset(run_config, run_keys);
    validate(run_config);
    return RunCommand{run_config};
  }
  if (list->parsed()) return ListCommand{};
  if (sweep->parsed()) {
    if (sweep_command.repeat < 1) throw InputError("--repeat must be positive (got " + std::to_string(sweep_command.repeat) + ")");
    if (sweep_command.out_dir.empty()) throw InputError("--out-dir must not be empty");
    if (sweep->count("--reports-dir") > 0 && sweep_command.reports_dir.empty()) {
      throw InputError("--reports-dir must not be empty");
    }
    if (!sweep_command.project.empty() && sweep_command.project != "measured") {
      (void)named_fabric(sweep_command.project, "--project");
    }
    return sweep_command;
  }
  if (compare->parsed()) {
    compare_command.threshold_given = compare->count("--threshold") > 0;
    compare_command.metrics_given = compare->count("--metric") > 0;
    for (const char* flag : {"--min-rounds", "--max-rounds", "--undecided-out", "--coarse-metric"}) {
      if (compare->count(flag) > 0 && !compare_command.paired) throw InputError(std::string(flag) + " needs --paired");
    }
    for (const char* flag : {"--normalize-by", "--min-vs-pytorch"}) {
      if (compare->count(flag) > 0 && compare_command.paired) {
        throw InputError(std::string(flag) + " does not apply to --paired (each row is compared with itself on the "
                                             "baseline build; the floor against PyTorch is a separate compare)");
      }
    }
    if (!(compare_command.threshold >= 0 && compare_command.threshold < 10)) {
      throw InputError("--threshold must be in [0, 10) (got " + std::to_string(compare_command.threshold) + ")");
    }
    if (!(compare_command.min_vs_pytorch >= 0 && compare_command.min_vs_pytorch < 100)) {
      throw InputError("--min-vs-pytorch must be in [0, 100) (got " + std::to_string(compare_command.min_vs_pytorch) + ")");
    }
    if (!(compare_command.alpha > 0 && compare_command.alpha < 1)) {
      throw InputError("--alpha must be in (0, 1) (got " + std::to_string(compare_command.alpha) + ")");
    }
    return compare_command;
  }
  if (project->parsed()) {
    validate_link_options(*project, project_command, 1);
    return project_command;
  }
  if (trace->parsed()) return trace_command;
  if (advise->parsed()) {
    validate_link_options(*advise, advise_command, 2);
    // Each rank count once, in the order given.
    std::vector<int64_t> once;
    for (int64_t n : advise_command.ranks) {
      if (std::find(once.begin(), once.end(), n) == once.end()) once.push_back(n);
    }
    advise_command.ranks = once;
    for (double mb : advise_command.bucket_mb) {
      // DDP's caps in bytes are whole numbers: a cap below a kilobyte or above a terabyte is no cap.
      if (!(std::isfinite(mb) && mb >= 0.001 && mb <= 1e6)) {
        throw InputError("--bucket-mb: " + std::to_string(mb) + " is not a bucket cap (0.001 to 1000000 MiB)");
      }
    }
    return advise_command;
  }
  throw InputError("no subcommand given (see --help)");
}

}  // namespace ddpbench
