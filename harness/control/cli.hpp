#pragma once
// The command line: CLI11 subcommands parsed into plain command structs. No LibTorch here,
// so parsing and its errors are tested without building a model.
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "harness/control/run_config.hpp"

namespace ddpbench {

struct HelpRequest {  // --help or --version: print `text` and exit 0
  std::string text;
};
struct RunCommand {
  RunConfig config;
};
struct ListCommand {
  bool options = false;  // --options: every subcommand's options as the reference's Markdown tables
};
struct CompareCommand {
  std::string baseline;
  std::string current;
  double threshold = 0.10;
  std::vector<std::string> metrics = {"train_time_s", "steady_images_per_s"};
  std::vector<std::string> allow_env_mismatch;  // aspects of the environment that may differ, or "all"
  std::string normalize_by;  // empty: absolute values
  double alpha = 0.05;
  std::string out;           // also write the Markdown table here
  double min_vs_pytorch = 0;  // 0: no floor against the PyTorch twins
  std::vector<std::string> allow_missing;  // rows that may be absent, skipped or interrupted now
  // --paired: the files are two builds' rounds, run back to back (repetition r is round r).
  bool paired = false;
  bool threshold_given = false;  // --paired's default threshold is its own (0.05)
  bool metrics_given = false;    // --paired's default metric is train_time_s alone
  int64_t min_rounds = 4;
  int64_t max_rounds = 12;
  std::string undecided_out;  // --paired: write the rows still undecided below the cap here, one a line
  std::vector<std::string> coarse_metrics;  // --paired: judged on the rounds the others ask for, never asking for more
};

/// `ddpbench project`: DDP rows of a result file projected to another cluster.
struct ProjectCommand {
  std::string results;
  std::vector<int64_t> ranks = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  int64_t ranks_per_node = 8;
  std::string fabric = "measured";
  double intra_node_gbps = 0;  // 0: the fabric's
  double inter_node_gbps = 0;
  double latency_us = -1;      // negative: the fabric's
  int64_t nics_per_node = 0;   // 0: the fabric's
  std::string calibrate;       // ddpbench_microbench's JSON: the link measured
  std::string out_dir;         // also write projection.json and projection.md there
  bool force = false;          // exit 0 though a row's model fails its own check
};

/// `ddpbench advise`: the DDP settings to use at other rank counts, from each DDP row of a
/// result file (the link and fabric options are the projection's).
struct AdviseCommand : ProjectCommand {
  AdviseCommand() { ranks = {8, 64, 512}; }
  // The grid to choose from, each empty for all of its values (1-100 MB; allreduce, fp16,
  // bf16; on and off).
  std::vector<double> bucket_mb;
  std::vector<std::string> comm_hooks;
  std::vector<std::string> overlap;
};

/// `ddpbench trace`: a traced row's per-rank traces merged on one clock.
struct TraceCommand {
  std::string results;  // the row's result JSON; the traces lie beside it
  std::string row;      // which traced row, where the file holds several
  std::string out;      // the merged trace; empty: RESULTS.merged.trace.json beside the results (RESULTS: its name less .json)
};

struct SweepCommand {
  std::string table = "auto";    // auto (tutorial with GPUs, cpu without) | tutorial | cpu
  std::string file;              // a sweep file instead of a preset
  std::vector<std::string> rows; // only these rows
  std::string mode = "both";     // faithful | controlled | both
  int64_t repeat = 1;
  std::string out_dir = "results";
  std::string reports_dir;       // results.{json,md,html} here rather than in out_dir
  bool resume = false;
  std::string gbench_json;       // also write Google Benchmark JSON here
  bool dry_run = false;          // print each row's command, run nothing
  bool reference = false;        // run each row's PyTorch twin right after it
  bool preload_python = true;    // PyTorch's ranks forked from one Python holding torch (off: each starts its own)
  std::string project;           // a fabric to project the DDP rows to in the reports; empty: none
  std::string launcher = "local";  // local | srun (each row a job step of the SLURM allocation)
  std::vector<std::pair<std::string, std::string>> overrides;  // run options given, in order
};

using Command =
    std::variant<HelpRequest, RunCommand, ListCommand, CompareCommand, SweepCommand, ProjectCommand, AdviseCommand,
                 TraceCommand>;

/// The reference's table of a subcommand's options (docs/options.md has each under the
/// subcommand's heading): every flag as declared with its line. Throws InputError for a
/// subcommand there is not, std::logic_error for a flag declared without its line.
std::string options_table_markdown(std::string_view subcommand);
/// Every subcommand's table, each after a "## `ddpbench NAME`" heading: `ddpbench list --options`.
std::string options_reference_markdown();

/// Parses argv (argv[0] included). Throws InputError on any bad flag or value; the
/// returned RunConfig has passed validate().
Command parse_command_line(int argc, const char* const* argv);

}  // namespace ddpbench
