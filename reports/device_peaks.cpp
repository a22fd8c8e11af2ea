#include "reports/device_peaks.hpp"

#include <array>
#include <limits>

namespace ddpbench {
namespace {

struct Peak {
  std::string_view name_part;  // matched in the device's name; the more specific first
  double fp32, tf32, bf16, fp16;  // TFLOP/s, dense (no structured sparsity)
};

// NVIDIA's data sheets: A100 (SXM and PCIe alike), H100 SXM5, H100 PCIe, H200 (SXM).
constexpr std::array<Peak, 4> kPeaks = {{
    {"H100 PCIe", 51.2, 378.0, 756.0, 756.0},
    {"H100", 66.9, 494.7, 989.4, 989.4},
    {"H200", 66.9, 494.7, 989.4, 989.4},
    {"A100", 19.5, 156.0, 312.0, 312.0},
}};

}  // namespace

std::string row_precision(std::string_view amp, bool tf32) {
  if (amp == "fp16" || amp == "bf16") return std::string(amp);
  return tf32 ? "tf32" : "fp32";
}

double peak_flops_per_s(std::string_view device_name, std::string_view precision) {
  for (const Peak& p : kPeaks) {
    if (device_name.find(p.name_part) == std::string_view::npos) continue;
    const double tera = precision == "fp32"   ? p.fp32
                        : precision == "tf32" ? p.tf32
                        : precision == "bf16" ? p.bf16
                        : precision == "fp16" ? p.fp16
                                              : std::numeric_limits<double>::quiet_NaN();
    return tera * 1e12;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace ddpbench
