// What Nsight Systems would see: NVTX ranges from the real binary, recorded by the test
// injection library, and the profiler capture range of --profile-steps.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/process.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

std::string recorded_ranges(const std::vector<std::string>& extra) {
  TempDir dir;
  const auto here = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  std::vector<std::string> args = {testing::ddpbench_binary(), "run", "--model", "tiny", "--num-classes", "10",
                                   "--dataset", "synthetic", "--synthetic-train-images", "256",
                                   "--synthetic-test-images", "64", "--batch-size", "32", "--max-steps", "4",
                                   "--workers", "0", "--device", "cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = testing::run_process(args, {"NVTX_INJECTION64_PATH=" + (here / "libnvtx_recorder.so").string(),
                                             "DDPBENCH_NVTX_LOG=" + (dir / "nvtx.log").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return testing::read_text(dir / "nvtx.log");
}

TEST(Profiling, EveryPhaseIsAnNvtxRangeInTheDdpbenchDomain) {
  const std::string log = recorded_ranges({"--strategy", "ddp", "--nproc", "2", "--bucket-mb", "0.001",
                                           "--profile-steps", "1:2"});
  for (const char* range : {"push ddpbench row ddp 0", "push ddpbench row ddp 1", "push ddpbench epoch 0",
                            "push ddpbench step 3", "push ddpbench data 3", "push ddpbench forward 3",
                            "push ddpbench backward 3", "push ddpbench comm 3", "push ddpbench optimizer 3",
                            "push ddpbench evaluation 0", "push ddpbench evaluation 1",
                            "start ddpbench allreduce bucket 0 3", "start ddpbench allreduce bucket 1 3",
                            "mark ddpbench profiler start", "mark ddpbench profiler stop"}) {
    EXPECT_NE(log.find(range), std::string::npos) << "missing \"" << range << "\" in:\n" << log.substr(0, 3000);
  }
}

TEST(Profiling, NvtxOffEmitsNoRanges) {
  // The positive control: with NVTX on, the same run records the recorder's load and ranges.
  const std::string on = recorded_ranges({});
  EXPECT_NE(on.find("injection loaded"), std::string::npos) << on.substr(0, 2000);
  EXPECT_NE(on.find("push ddpbench forward"), std::string::npos) << on.substr(0, 2000);
  // Off: the recorder was loaded (ddpbench initialises NVTX whatever the mode), and saw none.
  const std::string off = recorded_ranges({"--nvtx", "off"});
  EXPECT_NE(off.find("injection loaded"), std::string::npos) << "the recorder never loaded, so \"no ranges\" proves nothing";
  EXPECT_EQ(off.find("ddpbench"), std::string::npos) << off.substr(0, 2000);
}

TEST(Profiling, NvtxOpsAddsLibTorchsPerOpRanges) {
  const std::string log = recorded_ranges({"--nvtx", "ops"});
  EXPECT_NE(log.find("push ddpbench forward"), std::string::npos);
  EXPECT_NE(log.find("op aten::"), std::string::npos) << log.substr(0, 2000);
}

}  // namespace
}  // namespace ddpbench
