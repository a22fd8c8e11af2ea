#pragma once
// The dense peak FLOP/s of the GPUs the tutorial's table and the lent machines use, by
// precision, from NVIDIA's data sheets; utilisation is only reported against these.
#include <string>
#include <string_view>

namespace ddpbench {

/// "fp32", "tf32", "bf16" or "fp16": the arithmetic a row's convolutions and matrix
/// products run in (--amp, else --tf32, else fp32).
std::string row_precision(std::string_view amp, bool tf32);

/// The GPU's dense peak in FLOP/s for `precision` (A100, H100 SXM and PCIe, H200 SXM: the
/// device name's model word and form factor, its memory words aside); NaN where it is not in
/// the table (other variants such as H100 NVL, and CPUs: never guessed).
double peak_flops_per_s(std::string_view device_name, std::string_view precision);

}  // namespace ddpbench
