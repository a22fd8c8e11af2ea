#include "harness/runner/device.hpp"

#include <sys/resource.h>

#include <string>

#include <ATen/Context.h>
#include <torch/cuda.h>

#ifdef DDPBENCH_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "harness/base/input_error.hpp"
#include "harness/base/whole_integer.hpp"

namespace ddpbench {

c10::Device resolve_device(std::string_view spec) {
  const std::string flag = "--device " + std::string(spec);
  if (spec == "cpu") return c10::Device(c10::kCPU);
  const bool have_cuda = torch::cuda::is_available();
  if (spec == "auto") return have_cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (spec == "cuda" || spec.starts_with("cuda:")) {
    int index = 0;
    if (spec.size() > 4) {
      const auto parsed = whole_integer<int>(spec.substr(5));
      if (!parsed || *parsed < 0) throw InputError(flag + ": expected auto|cpu|cuda[:N]");
      index = *parsed;
    }
    if (!have_cuda) throw InputError(flag + ": no CUDA device is available on this machine");
    const auto count = static_cast<int>(torch::cuda::device_count());
    if (index >= count) {
      throw InputError(flag + ": only " + std::to_string(count) + " CUDA device(s) are visible");
    }
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw InputError(flag + ": expected auto|cpu|cuda[:N]");
}

void synchronize(const c10::Device& device) {
#ifdef DDPBENCH_HAVE_CUDA
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
#else
  (void)device;
#endif
}

#ifdef DDPBENCH_HAVE_CUDA
namespace {

// The caching allocator knows a device only once CUDA is initialised, which the first CUDA
// tensor does: asked before that (a row resets its peak before building its model), it throws
// "Invalid device argument 0: did you call init?". Python's torch.cuda.set_device does both.
void initialise_cuda(const c10::Device& device) {
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  c10::cuda::set_device(device.index());
}

}  // namespace
#endif

void reset_peak_memory(const c10::Device& device) {
#ifdef DDPBENCH_HAVE_CUDA
  if (device.is_cuda()) {
    initialise_cuda(device);
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  }
#else
  (void)device;
#endif
}

int64_t peak_memory_bytes(const c10::Device& device) {
#ifdef DDPBENCH_HAVE_CUDA
  if (device.is_cuda()) {
    initialise_cuda(device);
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

const char* peak_memory_source(const c10::Device& device) {
  return device.is_cuda() ? "cuda-allocator" : "host-rss";
}

}  // namespace ddpbench
