#pragma once
// Choosing and synchronising the training device.
#include <cstdint>
#include <string_view>

#include <c10/core/Device.h>

namespace ddpbench {

/// auto (cuda:0 when a GPU is visible, else cpu), cpu, cuda, cuda:N. Throws InputError when
/// the spelling is wrong or the GPU is not there.
c10::Device resolve_device(std::string_view spec);

/// Waits for all work queued on `device` (nothing to wait for on the CPU).
void synchronize(const c10::Device& device);

/// Peak bytes in use since reset_peak_memory: the CUDA caching allocator's peak on a GPU,
/// the process's peak resident set on the CPU.
void reset_peak_memory(const c10::Device& device);
int64_t peak_memory_bytes(const c10::Device& device);
const char* peak_memory_source(const c10::Device& device);

}  // namespace ddpbench
