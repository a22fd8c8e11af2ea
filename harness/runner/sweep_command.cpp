#include <torch/cuda.h>

#include "harness/control/sweep.hpp"
#include "harness/runner/build_info.hpp"
#include "harness/runner/commands.hpp"
#include "harness/runner/environment.hpp"
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
  env.tool_version = build_info().version;
  if (command.launcher == "srun") read_slurm_allocation(env);
  return run_sweep(command, argv, env);
}

}  // namespace ddpbench
