#pragma once
// The dense peak FLOP/s of one CPU core, computed from what the CPU says of itself (its
// flags, family and model, its clocks) by the vendors' optimisation manuals, with where each
// factor came from; CPU rows' utilisation is reported against it. No I/O: the caller reads the files.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace ddpbench {

/// What the CPU says of itself, as /proc/cpuinfo and cpufreq's sysfs files give it; recorded in
/// results.json's environment so that a report computes the peak from data.
struct CpuFacts {
  // "x86_64" (vendor_id or flags seen), "aarch64" (CPU implementer or Features seen), "" unknown.
  std::string architecture;
  // vendor_id ("GenuineIntel", "AuthenticAMD"); Arm: "ARM" when "CPU implementer : 0x41", else its value ("0x61").
  std::string vendor;
  int64_t family = -1;             // "cpu family"; -1 unknown
  int64_t model = -1;              // "model" (decimal in cpuinfo); Arm: "CPU part" (hex in cpuinfo, stored as a number)
  std::string model_name;          // "model name"
  std::vector<std::string> flags;  // the "flags" (x86) or "Features" (Arm) of the first processor, every one, in order
  int64_t logical_processors = 0;  // "processor" entries; 0 unknown
  int64_t physical_cores = 0;      // distinct (physical id, core id) pairs over all processors; 0 unknown
  // cpufreq cpuinfo_max_freq (kHz in the file): the highest (turbo) clock.
  double max_mhz = std::numeric_limits<double>::quiet_NaN();
  // cpufreq base_frequency (kHz), else the model name's "@ 2.10GHz"; base_mhz_source says which ("" unknown).
  double base_mhz = std::numeric_limits<double>::quiet_NaN();
  std::string base_mhz_source;  // "cpufreq base_frequency" or "model name"
  // "cpu MHz" of the first processor (in a VM: usually the host's nominal clock).
  double cpuinfo_mhz = std::numeric_limits<double>::quiet_NaN();
};

/// Parses the texts (any may be empty: then that part is unknown). kHz texts as the sysfs files
/// hold them ("3500000\n"). Never throws: what does not parse is unknown.
CpuFacts parse_cpu_facts(std::string_view proc_cpuinfo, std::string_view max_freq_khz, std::string_view base_freq_khz);

/// One core's dense peak for one precision ("fp32", "bf16", "fp16"), and where each factor came from.
struct CpuCorePeak {
  double flops_per_cycle = std::numeric_limits<double>::quiet_NaN();  // per core
  double clock_hz = std::numeric_limits<double>::quiet_NaN();
  // The product; NaN where either is unknown or the CPU has no such arithmetic.
  double flops_per_s = std::numeric_limits<double>::quiet_NaN();
  // What does the arithmetic: "AVX-512 FMA", "AVX2 FMA", "AMX-BF16", "AVX512-FP16", "NEON FMA", "SVE FMA" ...
  std::string unit;
  // "AVX-512 (avx512f): 16 fp32 lanes x 2 FMA units (Sapphire Rapids, family 6 model 143) x 2 FLOP = 64 FLOP/cycle"
  std::string vector_source;
  // "cpufreq cpuinfo_max_freq 3.80 GHz (turbo: an upper bound; the all-core clock under AVX-512 load is lower)"
  std::string clock_source;
  bool upper_bound = false;  // true where the clock is a turbo clock
  // Why flops_per_s is NaN, in words ("no bf16 arithmetic (avx512_bf16, amx_bf16): autocast emulates it").
  std::string missing;
};

/// The peak of one core of `cpu` for `precision`. Where the family and model are not in the
/// table, the rate follows the flags with two FMA units assumed, and vector_source says "assumed".
CpuCorePeak cpu_core_peak(const CpuFacts& cpu, std::string_view precision);

}  // namespace ddpbench
