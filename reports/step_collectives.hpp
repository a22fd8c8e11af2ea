#pragma once
// The collectives a DDP step runs inside forward and backward, where every rank waits for the
// others: SyncBatchNorm's (each layer gathers its statistics in forward and sums its gradients'
// in backward) and the buffers' broadcast before forward. A row records the time it waited in
// them; `project` and `advise` take that out of forward's and backward's compute and cost the
// collectives again, as communication, at each world size (by the ring model of projection.hpp;
// the broadcast as a pipelined chain). No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/projection.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

struct StepCollectives {
  std::vector<int64_t> sync_bn_features;  // each synchronised layer's channels
  double broadcast_bytes = 0;             // the buffers broadcast before each forward
  int64_t measured_ranks = 1;
  double forward_wait_s = 0;   // per step, measured at measured_ranks
  double backward_wait_s = 0;

  /// Seconds a step spends in them at `ranks` ranks, `per_node` a node, on `fabric`.
  [[nodiscard]] double forward_s(int64_t ranks, int64_t per_node, const Fabric& fabric) const;
  [[nodiscard]] double backward_s(int64_t ranks, int64_t per_node, const Fabric& fabric) const;
  /// Backward's sum of the layer `from_last`-th from the model's end (backward's order).
  [[nodiscard]] double backward_sum_s(std::size_t from_last, int64_t ranks, int64_t per_node, const Fabric& fabric) const;

  /// `link` (one node's, all measured_ranks on it) with the latency forward's waits give: what
  /// they took past their bytes' time on its bandwidth, over their ring steps. Unchanged where
  /// it has a latency already or nothing was waited for.
  [[nodiscard]] Link with_latency_from_waits(Link link) const;
};

/// `measured` (a link measured from a row, without a latency) with the one `c`'s forward waits
/// give, at both levels, its source saying so; false, unchanged, where it has one or they give none.
bool take_latency_from_waits(Fabric& measured, const StepCollectives& c);

/// A SyncBatchNorm row's collectives inside the step, or why its waits cannot be told from its
/// compute (`why`: a row from before they were recorded apart, or waits longer than their
/// phase). Neither for a row without SyncBatchNorm: its one collective, the buffers' broadcast,
/// stays in forward, as the models always took it (it also waits out the ranks' skew).
struct RowCollectives {
  std::optional<StepCollectives> collectives;
  std::string why;
};
RowCollectives step_collectives(const RunResult& r, double backward_compute_s);

}  // namespace ddpbench
