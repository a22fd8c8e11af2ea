#pragma once
// --cuda-graphs: a strategy's whole training step (forward, loss, backward, optimizer step)
// captured once in one CUDA graph at the row's last warm-up step, then replayed with each
// batch copied into the graph's static inputs (PyTorch's whole-network capture,
// torch.cuda.graphs). A batch of another shape (an epoch's last, partial one) runs eagerly
// and is counted. A replayed step is one launch: its phases are not measured (NaN).
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "strategies/strategy.hpp"

namespace ddpbench {

/// What records a step and replays it. The CUDA graph (the default) records without running;
/// the stand-in for CPU tests records the function and runs it again on each replay.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  /// Records `step` on the static inputs it closes over; returns the tensor a replay leaves the loss in.
  virtual at::Tensor capture(const std::function<at::Tensor()>& step) = 0;
  virtual void replay() = 0;
};

/// A CUDA graph of the step on `device` (throws where the build has no CUDA).
std::unique_ptr<StepGraph> make_cuda_step_graph(const c10::Device& device);
/// Test only: records nothing, runs the step again on each replay (any device).
std::unique_ptr<StepGraph> make_rerun_step_graph();

/// The step the graph is captured at: the last warm-up step, after the eager ones.
int64_t cuda_graph_capture_step(const StrategyOptions& options);

/// Why a row with --cuda-graphs cannot run on this machine (its device is no GPU), or nullopt.
std::optional<std::string> cuda_graphs_preflight(const StrategyOptions& options);

/// `eager`'s step, captured once and replayed. `graph` null: a CUDA graph on the row's device.
std::unique_ptr<Strategy> capture_in_cuda_graph(std::unique_ptr<Strategy> eager, const StrategyOptions& options,
                                                std::unique_ptr<StepGraph> graph = nullptr);

}  // namespace ddpbench
