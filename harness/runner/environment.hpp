#pragma once
// The machine and software a result was measured on, for the result file's header.
#include "reports/run_result.hpp"

namespace ddpbench {

/// Host, CPU, GPUs, driver, CUDA runtime, cuDNN, NCCL, LibTorch, compiler, git revision.
/// Fields that do not apply (no GPU) stay empty; nothing here throws.
Environment capture_environment();

/// Whether the CPU computes bf16 or fp16 in hardware (x86 AVX512-BF16, AMX-BF16 or
/// AVX512-FP16; Arm BF16). Without it CPU autocast emulates half precision, far slower than fp32.
bool cpu_has_native_half_precision();

}  // namespace ddpbench
