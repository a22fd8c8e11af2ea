#pragma once
// `ddpbench trace`: a traced row's per-rank traces merged into one Chrome trace. No LibTorch.
#include "harness/control/cli.hpp"

namespace ddpbench {

/// Writes the merged trace and prints each rank's file, host and clock shift; 0 when written.
/// InputError (2) for an unreadable or unproven result file, a row without a trace, or a
/// missing or foreign rank trace; nothing is written then.
int trace_command(const TraceCommand& command);

}  // namespace ddpbench
