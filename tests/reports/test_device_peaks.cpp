// The peak table: the precision a row computes in, and the peaks it is held against.
#include <gtest/gtest.h>

#include <cmath>

#include "reports/device_peaks.hpp"

namespace ddpbench {
namespace {

TEST(DevicePeaks, APrecisionIsTheAutocastTypeElseTf32ElseFp32) {
  EXPECT_EQ(row_precision("fp16", true), "fp16");
  EXPECT_EQ(row_precision("bf16", false), "bf16");
  EXPECT_EQ(row_precision("off", true), "tf32");
  EXPECT_EQ(row_precision("off", false), "fp32");
}

TEST(DevicePeaks, KnownGpusHaveTheirDataSheetPeaksAndNothingElseIsGuessed) {
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA A100-SXM4-40GB", "fp32"), 19.5e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA A100-SXM4-80GB", "fp16"), 312e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA H200", "bf16"), 989.4e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA H100 80GB HBM3", "tf32"), 494.7e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA H100 PCIe", "fp16"), 756e12);
  EXPECT_TRUE(std::isnan(peak_flops_per_s("AMD EPYC 7B13", "fp32")));
  EXPECT_TRUE(std::isnan(peak_flops_per_s("NVIDIA GeForce RTX 4090", "fp16")));
  EXPECT_TRUE(std::isnan(peak_flops_per_s("NVIDIA H200", "fp8")));
}

// The model and its form factor, never a part of the name: NVL boards and Grace Hopper run at
// other clocks than the SXM parts whose names they contain.
TEST(DevicePeaks, AVariantOfAKnownChipIsNotTakenForIt) {
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA H200 141GB HBM3e", "bf16"), 989.4e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA H100 SXM5 80GB", "fp32"), 66.9e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA A100 80GB PCIe", "tf32"), 156e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s("NVIDIA A100-PCIE-40GB", "fp32"), 19.5e12);
  for (const char* name : {"NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA H800",
                           "NVIDIA H100 PCIe NVL", "H1000", "NVIDIA", ""}) {
    EXPECT_TRUE(std::isnan(peak_flops_per_s(name, "bf16"))) << name;
  }
}

}  // namespace
}  // namespace ddpbench
