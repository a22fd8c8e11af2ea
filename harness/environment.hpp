#pragma once
// The machine and software a result was measured on, for the result file's header.
#include "reports/run_result.hpp"

namespace ddpbench {

/// Host, CPU, GPUs, driver, CUDA runtime, cuDNN, NCCL, LibTorch, compiler, git revision.
/// Fields that do not apply (no GPU) stay empty; nothing here throws.
Environment capture_environment();

}  // namespace ddpbench
