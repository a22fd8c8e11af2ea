// Compiled twice: into test_control_reports with NVTX, and into test_nvtx_disabled with
// DDPBENCH_NVTX_DISABLED, so both builds of the wrapper are exercised. The recorder library
// beside the test binary stands in for Nsight Systems.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "harness/timing/nvtx.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

// NVTX reads NVTX_INJECTION64_PATH at its first call: set it before any range, once.
class NvtxRecording : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto here = std::filesystem::read_symlink("/proc/self/exe").parent_path();
    ::setenv("NVTX_INJECTION64_PATH", (here / "libnvtx_recorder.so").c_str(), 1);
    ::setenv("DDPBENCH_NVTX_LOG", log_path().c_str(), 1);
  }
  static std::string log_path() {
    static const std::string path = (std::filesystem::temp_directory_path() /
                                     ("ddpbench-nvtx-" + std::to_string(::getpid()) + ".log")).string();
    return path;
  }
  void SetUp() override { std::filesystem::remove(log_path()); }
  void TearDown() override { std::filesystem::remove(log_path()); }
  static std::string recorded() { return testing::read_text(log_path()); }
};

TEST_F(NvtxRecording, RangesReachTheToolOnlyWhenCompiledInAndEnabled) {
#ifdef DDPBENCH_NVTX_DISABLED
  EXPECT_FALSE(nvtx::compiled_in());
#else
  EXPECT_TRUE(nvtx::compiled_in());
#endif
  nvtx::set_enabled(true);
  EXPECT_EQ(nvtx::enabled(), nvtx::compiled_in());
  {
    nvtx::ScopedRange range("forward", 12);
    nvtx::mark("profiler start");
  }
  const nvtx::RangeId bucket = nvtx::start_range("allreduce bucket 0", 3);
  EXPECT_EQ(bucket != 0, nvtx::compiled_in());
  std::thread([&] { nvtx::end_range(bucket); }).join();
  nvtx::set_enabled(false);
  { nvtx::ScopedRange hidden("hidden", 1); }
  nvtx::set_enabled(true);

  const std::string log = recorded();
  if (nvtx::compiled_in()) {
    EXPECT_NE(log.find("push ddpbench forward 12"), std::string::npos) << log;
    EXPECT_NE(log.find("pop ddpbench"), std::string::npos) << log;
    EXPECT_NE(log.find("mark ddpbench profiler start"), std::string::npos) << log;
    EXPECT_NE(log.find("start ddpbench allreduce bucket 0 3"), std::string::npos) << log;
    EXPECT_NE(log.find("end ddpbench"), std::string::npos) << log;
    EXPECT_EQ(log.find("hidden"), std::string::npos) << "ranges while disabled: " << log;
  } else {
    EXPECT_EQ(log, "");
  }
}

}  // namespace
}  // namespace ddpbench
