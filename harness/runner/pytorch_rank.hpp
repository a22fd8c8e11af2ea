#pragma once
// PyTorch's own implementation of a row (torch-single, torch-dp, torch-ddp): this process
// prepares what the Python side reads (the dataset's record files, ddpbench's initial weights,
// the row's whole configuration), runs strategies/pytorch/reference_rank.py as its child
// (one per rank, with the rank's variables), relays its stderr, and turns the records it
// writes into the usual result row.
#include <chrono>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "harness/base/clock.hpp"
#include "harness/control/run_config.hpp"
#include "harness/launch/rank_environment.hpp"
#include "harness/runner/preloaded_python.hpp"
#include "reports/run_result.hpp"

namespace ddpbench {

/// Throws InputError before any work when the row cannot be a PyTorch row here: no Python
/// with torch (or, for the ResNets, torchvision), or an option PyTorch has no equivalent for.
void check_pytorch_inputs(const RunConfig& config);

/// The sweep's preloaded Python for its PyTorch rows (preloaded_python.hpp), on the Python and
/// scripts those rows run.
std::unique_ptr<PreloadedPython> preload_pytorch();

/// The ranks' progress records are read this long apart when a PyTorch rank fails (a heartbeat
/// that did not move over it is a rank that stopped): three of the Python ranks' beats.
inline constexpr std::chrono::milliseconds kPyTorchSilenceWindow{1500};

/// Why a PyTorch rank of `env`'s world failed (`own_error`: its exit and traceback's last line),
/// as ddpbench's own rows say it: the rank the progress records in the launcher's store blame
/// ("failed on rank 0: rank 1 is behind, alive: ..."), or said plainly to be this rank's own
/// error, blaming no rank, where they blame no other or there are none to read.
std::string pytorch_failure_reason(const RankEnvironment& env, const std::string& own_error);

/// This rank of a PyTorch row on `device`; rank 0's result describes the row. A failure of
/// the Python rank becomes a failed row whose reason is its traceback's last line.
RunResult run_pytorch_rank(const RunConfig& config, const RankEnvironment& env, const c10::Device& device,
                           int64_t intra_op_threads, Clock::time_point row_start);

}  // namespace ddpbench
