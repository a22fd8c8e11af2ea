#pragma once
// The machine and software a result was measured on, for the result file's header.
#include "reports/run_result.hpp"

namespace ddpbench {

/// Host, CPU, GPUs, driver, CUDA runtime, cuDNN, NCCL, LibTorch, compiler, build type, git
/// revision, OMP_NUM_THREADS and the CPUs this process may run on.
/// Fields that do not apply (no GPU) stay empty; nothing here throws.
Environment capture_environment();

/// Whether the CPU computes bf16 (x86 AVX512-BF16 or AMX-BF16; Arm BF16) or fp16 (AVX512-FP16,
/// AMX-FP16) in hardware. Without it CPU autocast emulates the type, far slower than fp32.
bool cpu_has_native_bf16();
bool cpu_has_native_fp16();

}  // namespace ddpbench
