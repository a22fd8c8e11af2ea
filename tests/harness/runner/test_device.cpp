#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "harness/base/input_error.hpp"
#include "harness/runner/device.hpp"

namespace ddpbench {
namespace {

TEST(Device, CpuAndAuto) {
  EXPECT_EQ(resolve_device("cpu"), c10::Device(c10::kCPU));
  const auto expected = torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  EXPECT_EQ(resolve_device("auto"), expected);
}

TEST(Device, MalformedSpellingsAreRejected) {
  for (const char* spec : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "CPU", ""}) {
    EXPECT_THROW(resolve_device(spec), InputError) << spec;
  }
}

TEST(Device, CudaWithoutAGpuIsBadInput) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  try {
    resolve_device("cuda:0");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--device cuda:0: no CUDA device is available on this machine");
  }
}

TEST(Device, PeakMemoryOnTheCpuIsTheResidentSet) {
  EXPECT_GT(peak_memory_bytes(c10::kCPU), 1 << 20);
  EXPECT_STREQ(peak_memory_source(c10::kCPU), "host-rss");
}

TEST(GpuDevice, CudaIndexBeyondTheDevicesIsBadInput) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(resolve_device("cuda"), c10::Device(c10::kCUDA, 0));
  EXPECT_THROW(resolve_device("cuda:" + std::to_string(torch::cuda::device_count())), InputError);
}

// A row resets the device's peak memory before any CUDA tensor exists: the allocator must be
// initialised first. ctest runs each test in a process of its own, so this one starts with
// CUDA untouched, as a row does.
TEST(GpuDevice, PeakMemoryCanBeResetBeforeTheFirstCudaTensor) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  ASSERT_NO_THROW(reset_peak_memory(cuda));
  const auto t = at::ones({1 << 20}, at::TensorOptions().device(cuda));
  EXPECT_GE(peak_memory_bytes(cuda), static_cast<int64_t>(t.nbytes()));
}

}  // namespace
}  // namespace ddpbench
