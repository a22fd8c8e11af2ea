#include "harness/cli.hpp"

#include <sstream>

#include <CLI/CLI.hpp>

#include "harness/run_options.hpp"

namespace ddpbench {
namespace {

// Every RunConfig option from the table, so `run` (and later `sweep`) accept the same flags.
void add_run_options(CLI::App& cmd, RunConfig& config) {
  for (const auto& opt : run_options()) {
    const std::string flag = "--" + opt.key;
    if (opt.is_switch) {
      // CLI11 counts a `!`-negated flag as -1.
      cmd.add_flag_function(flag + ",!--no-" + opt.key, [&config, &opt](std::int64_t count) {
        opt.set(config, count > 0 ? "true" : "false");
      }, opt.help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      cmd.add_option_function<std::string>(flag, [&config, &opt](const std::string& value) {
        opt.set(config, value);
      }, opt.help)->type_name(opt.value_name)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
}

}  // namespace

Command parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"ddpbench: the single-GPU / DataParallel / DDP / AMP training table, measured",
               "ddpbench"};
  app.set_version_flag("--version", std::string("ddpbench ") + DDPBENCH_VERSION);
  app.require_subcommand(1);

  RunConfig run_config;
  auto* run = app.add_subcommand("run", "train one row (one strategy, one config) and report it");
  add_run_options(*run, run_config);
  auto* list = app.add_subcommand("list", "list the strategies and models");

  CompareCommand compare_command;
  auto* compare = app.add_subcommand("compare", "compare two result files: the CI gate (exit 1 on a regression)");
  compare->add_option("baseline", compare_command.baseline, "baseline result JSON")->required();
  compare->add_option("current", compare_command.current, "current result JSON")->required();
  compare->add_option("--threshold", compare_command.threshold,
                      "relative change below which nothing is a regression (default 0.10)");
  compare->add_option("--metric", compare_command.metrics,
                      "metrics that gate: train_time_s, images_per_s, steady_images_per_s, step_time_s, test_accuracy")
      ->delimiter(',');
  compare->add_flag("--allow-env-mismatch", compare_command.allow_env_mismatch,
                    "compare results from different GPUs, LibTorch versions or datasets");
  compare->add_option("--normalize-by", compare_command.normalize_by,
                      "divide each row's metric by this row's in the same file (e.g. single), to gate on ratios");
  compare->add_option("--alpha", compare_command.alpha, "significance level of the rank test (default 0.05)");
  compare->add_option("--out", compare_command.out, "also write the Markdown table to this file");

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
    validate(run_config);
    return RunCommand{run_config};
  }
  if (list->parsed()) return ListCommand{};
  if (compare->parsed()) {
    if (!(compare_command.threshold >= 0 && compare_command.threshold < 10)) {
      throw InputError("--threshold must be in [0, 10) (got " + std::to_string(compare_command.threshold) + ")");
    }
    if (!(compare_command.alpha > 0 && compare_command.alpha < 1)) {
      throw InputError("--alpha must be in (0, 1) (got " + std::to_string(compare_command.alpha) + ")");
    }
    return compare_command;
  }
  throw InputError("no subcommand given (see --help)");
}

}  // namespace ddpbench
