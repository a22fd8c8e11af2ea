#pragma once
// `ddpbench sweep`: runs the plan (harness/control/sweep_plan.hpp) row by row. Every
// row runs as its own `ddpbench run` process, so a crash costs one row; each result is
// written as soon as the row ends, atomically, and the reports are rewritten after every
// row, so a killed sweep loses nothing and --resume carries on. No LibTorch.
#include <string>
#include <vector>

#include "harness/control/cli.hpp"
#include "harness/control/sweep_plan.hpp"
#include "harness/launch/process_supervisor.hpp"
#include "reports/result_proof.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// How the configuration a row ran with (its result's) differs from the planned one, option
/// by option; empty when it ran what was planned. A row that differs is reported failed.
std::string plan_difference(const RunConfig& planned, const RunResult& ran);

/// Why a row measured in `before` cannot stand, on --resume, for one measured in `now`: another
/// machine or build (every aspect of compare's one environment rule,
/// reports/environment_fingerprint.hpp) or another git revision, in words; empty where it can.
std::string measured_elsewhere(const Environment& before, const Environment& now);

/// Why a row file, read through the proof, is not `row`'s own run on --resume: a whole sweep's or
/// another row's, repetition's or mode's file (its own record of where it was written), a row of
/// --dataset auto trained on what auto would not find now, or a row of ddpbench's that does not
/// record its threads per rank; empty where it is.
std::string not_this_slots_run(const PlannedRow& row, const ProvenResults& file);

/// A row srun ran whose result says it was interrupted, though the sweep was sent no signal,
/// where srun failed (`srun_exit`): srun stopped its tasks once one failed (--kill-on-bad-exit),
/// and the row failed, with srun's last words (the failed task's); else the result as it is.
RunResult stopped_by_srun(const PlannedRow& row, RunResult result, const ProcessExit& srun_exit, bool sweep_interrupted);

/// Runs the plan and writes results.json, results.md and results.html into --out-dir (and
/// --gbench-json). Returns 0 when every row ran or was skipped, 1 when one failed or the
/// sweep was interrupted.
int run_sweep(const SweepCommand& command, const std::vector<std::string>& argv, const SweepEnvironment& environment);

}  // namespace ddpbench
