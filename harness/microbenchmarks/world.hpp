#pragma once
// Two Gloo ranks inside the microbenchmark process, formed once at start-up, so the
// allreduce benchmarks can run each rank on one of Google Benchmark's two threads.
#include <memory>

#include "harness/distributed/communicator.hpp"

namespace ddpbench::microbench {

/// The communicator of `rank` (0 or 1); formed by form_gloo_world().
Communicator& gloo_rank(int rank);
void form_gloo_world();

}  // namespace ddpbench::microbench
