#include <algorithm>

#include <torch/cuda.h>

#include "harness/control/row_check.hpp"
#include "harness/control/sweep.hpp"
#include "harness/launch/rank_environment.hpp"
#include "harness/runner/build_info.hpp"
#include "harness/runner/commands.hpp"
#include "harness/runner/environment.hpp"
#include "harness/runner/pytorch_rank.hpp"
#include "models/checkpoint.hpp"
#include "strategies/strategy.hpp"

namespace ddpbench {

// The LibTorch side of the sweep: what this machine and build offer.
int sweep_command(const SweepCommand& command, const std::vector<std::string>& argv) {
  SweepEnvironment env;
  env.visible_gpus = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  env.cpu_native_bf16 = cpu_has_native_bf16();
  env.cpu_native_fp16 = cpu_has_native_fp16();
  for (const auto& s : strategy_registry()) {
    env.strategies.push_back(s.name);
    if (s.pytorch) env.pytorch_twins[s.twin_of] = s.name;
  }
  env.machine = capture_environment();
  env.memory_bytes = machine_memory_bytes();
  env.is_checkpoint = is_checkpoint_file;
  env.check_model_inputs = check_model_inputs;
  env.tool_version = build_info().version;
  env.launcher_world = launcher_world_from_process();
  if (command.launcher == "srun") read_slurm_allocation(env);
  // PyTorch's rows that run here fork their ranks from one Python that holds torch already.
  std::unique_ptr<PreloadedPython> preloaded;
  env.before_rows = [&preloaded, &command](const SweepPlan& plan) {
    const bool pytorch_here = std::any_of(plan.rows.begin(), plan.rows.end(), [](const PlannedRow& row) {
      return !row.skip_reason && row.launch.empty() && find_strategy(row.config.strategy).pytorch;
    });
    if (pytorch_here && command.preload_python) preloaded = preload_pytorch();
  };
  return run_sweep(command, argv, env);
}

}  // namespace ddpbench
