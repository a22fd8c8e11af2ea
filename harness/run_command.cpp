#include <chrono>
#include <filesystem>
#include <iostream>

#include "data/dataset.hpp"
#include "harness/commands.hpp"
#include "harness/device.hpp"
#include "harness/environment.hpp"
#include "harness/build_info.hpp"
#include "harness/runner.hpp"
#include "models/registry.hpp"
#include "reports/atomic_file.hpp"
#include "reports/markdown_report.hpp"
#include "reports/result_file.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench {
namespace {

// Everything a user can get wrong is checked before any work starts, so bad input costs
// nothing and leaves no file behind.
void check_inputs(const RunConfig& config) {
  find_strategy(config.strategy);
  find_model(config.model);
  if (!config.out.empty()) require_writable(config.out, "--out");
  if (!config.save_checkpoint.empty()) require_writable(config.save_checkpoint, "--save-checkpoint");
  if (!config.init_from.empty() && !std::filesystem::is_regular_file(config.init_from)) {
    throw InputError("--init-from: no file '" + config.init_from + "'");
  }
}

}  // namespace

int run_command(const RunCommand& command, const std::vector<std::string>& argv) {
  const auto row_start = std::chrono::steady_clock::now();
  const RunConfig& config = command.config;
  check_inputs(config);
  DistContext dist;
  dist.device = resolve_device(config.device);
  const DatasetSplits data = load_dataset(config);

  RunResult result;
  try {
    result = run_row(config, dist, data, row_start);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    result = unfinished_result(config, RunStatus::failed, e.what());
  }

  ResultDocument document;
  document.tool_version = build_info().version;
  document.created_utc = utc_timestamp();
  document.argv = argv;
  document.environment = capture_environment();
  document.runs = {result};
  if (!config.out.empty()) write_result_file(config.out, document);
  std::cout << markdown_runs_table(document.runs) << std::flush;
  return result.status == RunStatus::failed ? 1 : 0;
}

int list_command() {
  std::cout << "strategies:\n";
  for (const auto& s : strategy_registry()) {
    std::cout << "  " << s.name << std::string(s.name.size() < 12 ? 12 - s.name.size() : 1, ' ') << s.description
              << (s.distributed ? " [ranks]" : "") << "\n";
  }
  std::cout << "models:\n";
  for (const auto& m : model_registry()) {
    std::cout << "  " << m.name << std::string(m.name.size() < 12 ? 12 - m.name.size() : 1, ' ') << m.description
              << "\n";
  }
  return 0;
}

}  // namespace ddpbench
