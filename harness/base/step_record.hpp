#pragma once
// What measurement produces, below every report of it: the seconds one step spent in each
// phase, and the step's record, in SI units. Timers fill these; the result schema carries
// them. A number that was not measured is NaN.
#include <cstdint>
#include <limits>

namespace ddpbench {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

/// Seconds one step spent in each phase, as measured on the step's device.
struct PhaseSeconds {
  double data_s = 0;       // waiting for the loader and copying the batch in
  double forward_s = 0;    // forward pass and loss
  double backward_s = 0;   // backward pass (overlapped communication included)
  double comm_s = 0;       // gradient communication left after backward
  double optimizer_s = 0;  // optimizer step
  double allreduce_s = 0;  // summed gradient allreduce durations; they overlap backward
  // Time the host was blocked in collectives inside forward and backward (SyncBatchNorm's
  // sums, the buffer broadcasts): waiting for the other ranks, already part of those phases.
  double collective_wait_s = 0;
  // Time forward spent cloning the module onto its replicas (LibTorch's data_parallel does it
  // on every call): part of forward, host work rather than the device's.
  double replicate_s = 0;
  // Of collective_wait_s, the part inside forward (the rest lies in backward): what `project` and
  // `advise` take out of each to leave the compute. NaN in files from before it was recorded.
  double forward_collective_wait_s = 0;

  /// The step: every phase but allreduce, the collective waits and replicate, which lie inside the others.
  [[nodiscard]] double total_s() const { return data_s + forward_s + backward_s + comm_s + optimizer_s; }
  /// Allreduce time hidden under backward (it ran while backward did): the allreduce time
  /// not left exposed after backward, at most backward's own time.
  [[nodiscard]] double hidden_comm_s() const;
  /// Waiting for other ranks: the exposed gradient communication and the blocked collectives.
  [[nodiscard]] double wait_s() const { return comm_s + collective_wait_s; }

  PhaseSeconds& operator+=(const PhaseSeconds& other);
  [[nodiscard]] PhaseSeconds operator/(double divisor) const;
};

struct StepRecord {
  int64_t epoch = 0;
  int64_t step = 0;      // within the epoch
  int64_t images = 0;    // images this process trained on in this step
  double time_s = 0;     // wall time from the end of the previous step, device-synchronised
  double loss = kNotMeasured;
  PhaseSeconds phases;

  /// The step's own work, without the loader and without waiting for other ranks: what a
  /// straggler has more of.
  [[nodiscard]] double compute_s() const { return time_s - phases.data_s - phases.wait_s(); }
};

}  // namespace ddpbench
