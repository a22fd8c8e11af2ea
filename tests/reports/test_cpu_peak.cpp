// A CPU core's peak from what the CPU says of itself: /proc/cpuinfo as real machines print it,
// cpufreq's kHz files, and the rate, clock and caveats each gives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "reports/cpu_peak.hpp"

namespace ddpbench {
namespace {

// One processor's block of /proc/cpuinfo as the kernel prints it: `head` the lines before its
// place (vendor to cache size), `tail` the lines after it (apicid on).
std::string processor(int number, int physical_id, int core_id, const std::string& head, const std::string& tail) {
  return "processor\t: " + std::to_string(number) + "\n" + head + "physical id\t: " + std::to_string(physical_id) +
         "\n" + "core id\t\t: " + std::to_string(core_id) + "\n" + tail + "\n";
}

// clang-format off
const std::string kEmeraldRapidsKvmHead =
    "vendor_id\t: GenuineIntel\n"
    "cpu family\t: 6\n"
    "model\t\t: 207\n"
    "model name\t: Intel(R) Xeon(R) Processor\n"
    "stepping\t: 2\n"
    "microcode\t: 0x1\n"
    "cpu MHz\t\t: 2100.000\n"
    "cache size\t: 307200 KB\n";
const std::string kEmeraldRapidsKvmTail =
    "cpu cores\t: 2\n"
    "apicid\t\t: 0\n"
    "fpu\t\t: yes\n"
    "cpuid level\t: 32\n"
    "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch cpuid_fault ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd arat avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid bus_lock_detect cldemote movdiri movdir64b fsrm md_clear serialize tsxldtrk ibt amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities\n"
    "bugs\t\t: spectre_v1 spectre_v2 spec_store_bypass swapgs taa eibrs_pbrsb bhi ibpb_no_ret spectre_v2_user\n"
    "bogomips\t: 4200.00\n"
    "address sizes\t: 46 bits physical, 57 bits virtual\n"
    "power management:\n";

// Google Cloud's n2d: Milan, one core with its two hyperthreads.
const std::string kEpyc7B13Head =
    "vendor_id\t: AuthenticAMD\n"
    "cpu family\t: 25\n"
    "model\t\t: 1\n"
    "model name\t: AMD EPYC 7B13\n"
    "stepping\t: 0\n"
    "microcode\t: 0xffffffff\n"
    "cpu MHz\t\t: 2450.000\n"
    "cache size\t: 512 KB\n";
const std::string kEpyc7B13Tail =
    "cpu cores\t: 1\n"
    "apicid\t\t: 0\n"
    "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext invpcid_single ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero xsaveerptr arat npt nrip_save umip vaes vpclmulqdq rdpid fsrm\n"
    "bogomips\t: 4900.00\n"
    "TLB size\t: 2560 4K pages\n"
    "power management:\n";

const std::string kSkylakeSpFlags =
    "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cdp_l3 invpcid_single pti intel_ppin ssbd mba ibrs ibpb stibp tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm mpx rdt_a avx512f avx512dq rdseed adx smap clflushopt clwb intel_pt avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local dtherm ida arat pln pts pku ospke md_clear flush_l1d\n";

const std::string kHaswellHead =
    "vendor_id\t: GenuineIntel\n"
    "cpu family\t: 6\n"
    "model\t\t: 60\n"
    "model name\t: Intel(R) Core(TM) i7-4790K CPU @ 4.00GHz\n"
    "stepping\t: 3\n"
    "microcode\t: 0x28\n"
    "cpu MHz\t\t: 798.340\n"
    "cache size\t: 8192 KB\n";
const std::string kHaswellTail =
    "cpu cores\t: 4\n"
    "apicid\t\t: 0\n"
    "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm cpuid_fault epb invpcid_single pti ssbd ibrs ibpb stibp tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid xsaveopt dtherm ida arat pln pts md_clear flush_l1d\n"
    "bogomips\t: 7981.96\n";

const std::string kEpyc9654Head =
    "vendor_id\t: AuthenticAMD\n"
    "cpu family\t: 25\n"
    "model\t\t: 17\n"
    "model name\t: AMD EPYC 9654 96-Core Processor\n"
    "stepping\t: 1\n"
    "microcode\t: 0xa10113e\n"
    "cpu MHz\t\t: 2400.000\n"
    "cache size\t: 1024 KB\n";
const std::string kEpyc9654Tail =
    "cpu cores\t: 96\n"
    "apicid\t\t: 0\n"
    "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 invpcid_single hw_pstate ssbd mba perfmon_v2 ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local avx512_bf16 clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin cppc arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif x2avic v_spec_ctrl vnmi avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq la57 rdpid overflow_recov succor smca fsrm flush_l1d\n"
    "bogomips\t: 4792.78\n";

// arm64 prints no vendor, model name, clock or physical id: the implementer and part say the core.
const std::string kGraviton3 =
    "processor\t: 0\n"
    "BogoMIPS\t: 2100.00\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng\n"
    "CPU implementer\t: 0x41\n"
    "CPU architecture: 8\n"
    "CPU variant\t: 0x1\n"
    "CPU part\t: 0xd40\n"
    "CPU revision\t: 1\n"
    "\n"
    "processor\t: 1\n"
    "BogoMIPS\t: 2100.00\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng\n"
    "CPU implementer\t: 0x41\n"
    "CPU architecture: 8\n"
    "CPU variant\t: 0x1\n"
    "CPU part\t: 0xd40\n"
    "CPU revision\t: 1\n";

// Graviton2 and Ampere Altra: Neoverse N1, NEON only, fp16 but no bf16.
const std::string kNeoverseN1 =
    "processor\t: 0\n"
    "BogoMIPS\t: 243.75\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\n"
    "CPU implementer\t: 0x41\n"
    "CPU architecture: 8\n"
    "CPU variant\t: 0x3\n"
    "CPU part\t: 0xd0c\n"
    "CPU revision\t: 1\n";
// clang-format on

std::string two_processors(const std::string& head, const std::string& tail) {
  return processor(0, 0, 0, head, tail) + processor(1, 0, 1, head, tail);
}

std::string skylake_sp_head(const std::string& model_name, const std::string& mhz) {
  return "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: " + model_name +
         "\nstepping\t: 4\nmicrocode\t: 0x2006e05\ncpu MHz\t\t: " + mhz + "\ncache size\t: 16896 KB\n";
}

CpuFacts skylake_sp(const std::string& model_name, const std::string& mhz = "2000.000") {
  return parse_cpu_facts(two_processors(skylake_sp_head(model_name, mhz), kSkylakeSpFlags), "", "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CpuPeak, ThisEmeraldRapidsGuestFromItsCpuinfo) {
  const CpuFacts cpu = parse_cpu_facts(two_processors(kEmeraldRapidsKvmHead, kEmeraldRapidsKvmTail), "", "");
  EXPECT_EQ(cpu.architecture, "x86_64");
  EXPECT_EQ(cpu.vendor, "GenuineIntel");
  EXPECT_EQ(cpu.family, 6);
  EXPECT_EQ(cpu.model, 207);
  EXPECT_EQ(cpu.model_name, "Intel(R) Xeon(R) Processor");
  ASSERT_EQ(cpu.flags.size(), 118u);
  EXPECT_EQ(cpu.flags.front(), "fpu");
  EXPECT_EQ(cpu.flags.back(), "arch_capabilities");
  EXPECT_EQ(cpu.logical_processors, 2);
  EXPECT_EQ(cpu.physical_cores, 2);
  EXPECT_DOUBLE_EQ(cpu.cpuinfo_mhz, 2100);
  EXPECT_TRUE(std::isnan(cpu.max_mhz));
  EXPECT_TRUE(std::isnan(cpu.base_mhz));  // "Processor", no "@ GHz"

  const CpuCorePeak fp32 = cpu_core_peak(cpu, "fp32");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 64);
  EXPECT_DOUBLE_EQ(fp32.clock_hz, 2.1e9);
  EXPECT_DOUBLE_EQ(fp32.flops_per_s, 134.4e9);
  EXPECT_EQ(fp32.unit, "AVX-512 FMA");
  EXPECT_EQ(fp32.vector_source,
            "AVX-512 (avx512f): 16 fp32 lanes x 2 FMA units (Emerald Rapids, family 6 model 207) x 2 FLOP = 64 "
            "FLOP/cycle");
  EXPECT_TRUE(contains(fp32.clock_source, "cpu MHz 2.10 GHz")) << fp32.clock_source;
  EXPECT_TRUE(contains(fp32.clock_source, "in a VM the host's")) << fp32.clock_source;
  EXPECT_FALSE(fp32.upper_bound);
  EXPECT_EQ(fp32.missing, "");

  const CpuCorePeak bf16 = cpu_core_peak(cpu, "bf16");
  EXPECT_EQ(bf16.unit, "AMX-BF16");
  EXPECT_DOUBLE_EQ(bf16.flops_per_s, 1024 * 2.1e9);
  EXPECT_TRUE(contains(bf16.vector_source, "TDPBF16PS")) << bf16.vector_source;

  // No amx_fp16 before Granite Rapids: fp16 runs on AVX512-FP16 at twice the fp32 rate.
  const CpuCorePeak fp16 = cpu_core_peak(cpu, "fp16");
  EXPECT_EQ(fp16.unit, "AVX512-FP16");
  EXPECT_DOUBLE_EQ(fp16.flops_per_cycle, 128);
  EXPECT_DOUBLE_EQ(fp16.flops_per_s, 128 * 2.1e9);
}

TEST(CpuPeak, ZenThreeHasAvx2OnTwo256BitPipesAndNoBf16OrFp16) {
  const CpuFacts cpu = parse_cpu_facts(
      processor(0, 0, 0, kEpyc7B13Head, kEpyc7B13Tail) + processor(1, 0, 0, kEpyc7B13Head, kEpyc7B13Tail), "", "");
  EXPECT_EQ(cpu.family, 25);
  EXPECT_EQ(cpu.model, 1);
  EXPECT_EQ(cpu.physical_cores, 1);  // a core and its hyperthread
  EXPECT_TRUE(std::isnan(cpu.base_mhz));

  const CpuCorePeak fp32 = cpu_core_peak(cpu, "fp32");
  EXPECT_EQ(fp32.unit, "AVX2 FMA");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 32);
  EXPECT_DOUBLE_EQ(fp32.flops_per_s, 32 * 2.45e9);
  EXPECT_TRUE(contains(fp32.vector_source, "8 fp32 lanes x 2 FMA units (Zen 3, family 25 model 1)"))
      << fp32.vector_source;

  for (const char* precision : {"bf16", "fp16"}) {
    const CpuCorePeak peak = cpu_core_peak(cpu, precision);
    EXPECT_TRUE(std::isnan(peak.flops_per_s)) << precision;
    EXPECT_TRUE(std::isnan(peak.flops_per_cycle)) << precision;
    EXPECT_TRUE(contains(peak.missing, std::string("no ") + precision + " arithmetic")) << peak.missing;
    EXPECT_DOUBLE_EQ(peak.clock_hz, 2.45e9);  // the clock is known; the arithmetic is not there
  }
}

// Zen and Zen+ split a 256-bit FMA over their two 128-bit pipes: half Zen 3's rate.
TEST(CpuPeak, ZenOneRunsAvx2AtHalfRate) {
  std::string head = kEpyc7B13Head;
  head.replace(head.find("25"), 2, "23");
  head.replace(head.find("AMD EPYC 7B13"), 13, "AMD EPYC 7601 32-Core Processor");
  const CpuCorePeak fp32 = cpu_core_peak(parse_cpu_facts(two_processors(head, kEpyc7B13Tail), "", ""), "fp32");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 16);
  EXPECT_TRUE(contains(fp32.vector_source, "Zen/Zen+")) << fp32.vector_source;
  EXPECT_TRUE(contains(fp32.vector_source, "a 256-bit FMA takes both")) << fp32.vector_source;
}

TEST(CpuPeak, SkylakeSpFmaUnitsComeFromTheModelName) {
  const CpuFacts gold5118 = skylake_sp("Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz", "999.963");
  EXPECT_DOUBLE_EQ(gold5118.base_mhz, 2300);
  EXPECT_EQ(gold5118.base_mhz_source, "model name");
  const CpuCorePeak gold = cpu_core_peak(gold5118, "fp32");
  EXPECT_DOUBLE_EQ(gold.flops_per_cycle, 32);
  EXPECT_TRUE(contains(gold.vector_source, "x 1 FMA unit (")) << gold.vector_source;
  EXPECT_TRUE(contains(gold.vector_source, "one 512-bit FMA unit")) << gold.vector_source;
  // The name's base clock, not the idle core's 1 GHz.
  EXPECT_DOUBLE_EQ(gold.clock_hz, 2.3e9);
  EXPECT_DOUBLE_EQ(gold.flops_per_s, 32 * 2.3e9);
  EXPECT_TRUE(contains(gold.clock_source, "model name 2.30 GHz")) << gold.clock_source;
  EXPECT_TRUE(contains(gold.clock_source, "may read high")) << gold.clock_source;
  EXPECT_FALSE(gold.upper_bound);

  const CpuCorePeak platinum = cpu_core_peak(skylake_sp("Intel(R) Xeon(R) Platinum 8175M CPU @ 2.50GHz"), "fp32");
  EXPECT_DOUBLE_EQ(platinum.flops_per_cycle, 64);
  EXPECT_DOUBLE_EQ(platinum.flops_per_s, 64 * 2.5e9);
  EXPECT_FALSE(contains(platinum.vector_source, "assumed")) << platinum.vector_source;

  EXPECT_DOUBLE_EQ(cpu_core_peak(skylake_sp("Intel(R) Xeon(R) Gold 5122 CPU @ 3.60GHz"), "fp32").flops_per_cycle, 64);
  EXPECT_DOUBLE_EQ(cpu_core_peak(skylake_sp("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"), "fp32").flops_per_cycle, 64);
  EXPECT_DOUBLE_EQ(cpu_core_peak(skylake_sp("Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz"), "fp32").flops_per_cycle, 32);

  // Virtual machines' names say nothing of the SKU: two units, said to be assumed.
  for (const char* name : {"Intel(R) Xeon(R) Processor", "Intel(R) Xeon(R) CPU @ 2.00GHz"}) {
    const CpuCorePeak generic = cpu_core_peak(skylake_sp(name), "fp32");
    EXPECT_DOUBLE_EQ(generic.flops_per_cycle, 64) << name;
    EXPECT_TRUE(contains(generic.vector_source, "assumed")) << generic.vector_source;
  }
  // No bf16 before Cooper Lake.
  EXPECT_TRUE(std::isnan(cpu_core_peak(gold5118, "bf16").flops_per_s));
}

TEST(CpuPeak, HaswellDesktopAtItsTurboClockIsAnUpperBound) {
  const CpuFacts cpu = parse_cpu_facts(two_processors(kHaswellHead, kHaswellTail), "4400000\n", "");
  EXPECT_DOUBLE_EQ(cpu.max_mhz, 4400);
  EXPECT_DOUBLE_EQ(cpu.base_mhz, 4000);  // from the name; cpufreq's max comes first
  const CpuCorePeak fp32 = cpu_core_peak(cpu, "fp32");
  EXPECT_EQ(fp32.unit, "AVX2 FMA");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 32);
  EXPECT_DOUBLE_EQ(fp32.clock_hz, 4.4e9);
  EXPECT_DOUBLE_EQ(fp32.flops_per_s, 140.8e9);
  EXPECT_TRUE(fp32.upper_bound);
  EXPECT_TRUE(contains(fp32.vector_source, "Haswell, family 6 model 60")) << fp32.vector_source;
  EXPECT_TRUE(contains(fp32.clock_source, "cpuinfo_max_freq 4.40 GHz")) << fp32.clock_source;
  EXPECT_TRUE(contains(fp32.clock_source, "turbo")) << fp32.clock_source;
  EXPECT_TRUE(contains(fp32.clock_source, "AVX2 load")) << fp32.clock_source;
  EXPECT_TRUE(std::isnan(cpu_core_peak(cpu, "fp16").flops_per_s));
}

TEST(CpuPeak, ZenFourRunsAvx512OnHalfWidthPipesAndBf16AtTwiceThat) {
  const CpuFacts cpu = parse_cpu_facts(two_processors(kEpyc9654Head, kEpyc9654Tail), "3700000\n", "");
  const CpuCorePeak fp32 = cpu_core_peak(cpu, "fp32");
  EXPECT_EQ(fp32.unit, "AVX-512 FMA");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 32);
  EXPECT_TRUE(contains(fp32.vector_source, "16 fp32 lanes x 1 FMA unit (Zen 4, family 25 model 17"))
      << fp32.vector_source;
  EXPECT_TRUE(fp32.upper_bound);
  EXPECT_DOUBLE_EQ(fp32.flops_per_s, 32 * 3.7e9);

  const CpuCorePeak bf16 = cpu_core_peak(cpu, "bf16");
  EXPECT_EQ(bf16.unit, "AVX512-BF16");  // avx512_bf16 and no AMX
  EXPECT_DOUBLE_EQ(bf16.flops_per_cycle, 64);
  EXPECT_DOUBLE_EQ(bf16.flops_per_s, 64 * 3.7e9);
  EXPECT_TRUE(contains(bf16.vector_source, "VDPBF16PS")) << bf16.vector_source;

  const CpuCorePeak fp16 = cpu_core_peak(cpu, "fp16");
  EXPECT_TRUE(std::isnan(fp16.flops_per_s));
  EXPECT_TRUE(contains(fp16.missing, "avx512_fp16")) << fp16.missing;
}

TEST(CpuPeak, Graviton3IsNeoverseV1With256BitSve) {
  const CpuFacts cpu = parse_cpu_facts(kGraviton3, "2600000\n", "");
  EXPECT_EQ(cpu.architecture, "aarch64");
  EXPECT_EQ(cpu.vendor, "ARM");
  EXPECT_EQ(cpu.model, 0xd40);
  EXPECT_EQ(cpu.family, -1);
  EXPECT_EQ(cpu.model_name, "");
  ASSERT_EQ(cpu.flags.size(), 38u);
  EXPECT_EQ(cpu.flags.front(), "fp");
  EXPECT_EQ(cpu.flags.back(), "rng");
  EXPECT_EQ(cpu.logical_processors, 2);
  EXPECT_EQ(cpu.physical_cores, 0);  // no physical id or core id on arm64
  EXPECT_TRUE(std::isnan(cpu.cpuinfo_mhz));

  const CpuCorePeak fp32 = cpu_core_peak(cpu, "fp32");
  EXPECT_EQ(fp32.unit, "SVE FMA");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 32);
  EXPECT_DOUBLE_EQ(fp32.clock_hz, 2.6e9);
  EXPECT_DOUBLE_EQ(fp32.flops_per_s, 83.2e9);
  EXPECT_TRUE(fp32.upper_bound);
  EXPECT_TRUE(contains(fp32.vector_source, "8 fp32 lanes x 2 FMA pipes (Neoverse V1, CPU part 0xd40: 256-bit"))
      << fp32.vector_source;
  EXPECT_TRUE(contains(fp32.vector_source, "not in cpuinfo")) << fp32.vector_source;

  const CpuCorePeak bf16 = cpu_core_peak(cpu, "bf16");
  EXPECT_DOUBLE_EQ(bf16.flops_per_cycle, 64);
  EXPECT_TRUE(contains(bf16.vector_source, "BFDOT")) << bf16.vector_source;
  EXPECT_DOUBLE_EQ(cpu_core_peak(cpu, "fp16").flops_per_cycle, 64);
}

TEST(CpuPeak, NeoverseN1HasFp16ButNoBf16AndAnUnknownArmCoreIsAssumed) {
  const CpuFacts n1 = parse_cpu_facts(kNeoverseN1, "", "");
  const CpuCorePeak fp32 = cpu_core_peak(n1, "fp32");
  EXPECT_EQ(fp32.unit, "NEON FMA");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 16);
  EXPECT_FALSE(contains(fp32.vector_source, "assumed")) << fp32.vector_source;
  EXPECT_TRUE(std::isnan(fp32.flops_per_s));  // no clock at all
  EXPECT_TRUE(contains(fp32.missing, "no clock known")) << fp32.missing;
  EXPECT_DOUBLE_EQ(cpu_core_peak(n1, "fp16").flops_per_cycle, 32);
  EXPECT_TRUE(contains(cpu_core_peak(n1, "bf16").missing, "no bf16 arithmetic")) << cpu_core_peak(n1, "bf16").missing;

  std::string other = kNeoverseN1;
  other.replace(other.find("0x41"), 4, "0x61");  // Apple
  const CpuFacts apple = parse_cpu_facts(other, "", "");
  EXPECT_EQ(apple.vendor, "0x61");
  const CpuCorePeak assumed = cpu_core_peak(apple, "fp32");
  EXPECT_DOUBLE_EQ(assumed.flops_per_cycle, 16);
  EXPECT_TRUE(contains(assumed.vector_source, "assumed")) << assumed.vector_source;
}

TEST(CpuPeak, AnX86ModelOutsideTheTableFollowsItsFlagsAndSaysAssumed) {
  std::string head = kHaswellHead;
  head.replace(head.find("model\t\t: 60"), 11, "model\t\t: 151");  // Alder Lake: hybrid, not in the table
  const CpuCorePeak fp32 = cpu_core_peak(parse_cpu_facts(two_processors(head, kHaswellTail), "", ""), "fp32");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 32);
  EXPECT_TRUE(contains(fp32.vector_source, "family 6 model 151 is not in the table")) << fp32.vector_source;
  EXPECT_TRUE(contains(fp32.vector_source, "assumed")) << fp32.vector_source;
}

// A hypervisor that hides AVX-512 leaves the AVX2 rate, not the table's AVX-512 one.
TEST(CpuPeak, AvxFiveTwelveHiddenByTheHypervisorGivesTheAvx2Rate) {
  std::string tail = kEmeraldRapidsKvmTail;
  tail.replace(tail.find(" avx512f "), 9, " ");
  const CpuCorePeak fp32 = cpu_core_peak(parse_cpu_facts(two_processors(kEmeraldRapidsKvmHead, tail), "", ""), "fp32");
  EXPECT_EQ(fp32.unit, "AVX2 FMA");
  EXPECT_DOUBLE_EQ(fp32.flops_per_cycle, 32);
  EXPECT_FALSE(contains(fp32.vector_source, "assumed")) << fp32.vector_source;
}

TEST(CpuPeak, NothingKnownIsNaNWithTheReasonsAndNoCrash) {
  const CpuFacts cpu = parse_cpu_facts("", "", "");
  EXPECT_EQ(cpu.architecture, "");
  EXPECT_EQ(cpu.vendor, "");
  EXPECT_EQ(cpu.family, -1);
  EXPECT_EQ(cpu.model, -1);
  EXPECT_TRUE(cpu.flags.empty());
  EXPECT_EQ(cpu.logical_processors, 0);
  EXPECT_EQ(cpu.physical_cores, 0);
  EXPECT_TRUE(std::isnan(cpu.max_mhz));
  EXPECT_TRUE(std::isnan(cpu.base_mhz));
  EXPECT_TRUE(std::isnan(cpu.cpuinfo_mhz));
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    const CpuCorePeak peak = cpu_core_peak(cpu, precision);
    EXPECT_TRUE(std::isnan(peak.flops_per_cycle)) << precision;
    EXPECT_TRUE(std::isnan(peak.clock_hz)) << precision;
    EXPECT_TRUE(std::isnan(peak.flops_per_s)) << precision;
    EXPECT_FALSE(peak.upper_bound) << precision;
    EXPECT_TRUE(contains(peak.missing, "unknown")) << peak.missing;
    EXPECT_TRUE(contains(peak.missing, "no clock known")) << peak.missing;
  }
  // Garbage is unknown too.
  const CpuFacts garbage = parse_cpu_facts(":::\n\n:\nprocessor\nflags\t:\ncpu MHz : fast\nmodel : -3\n", "x", "-1");
  EXPECT_TRUE(std::isnan(garbage.cpuinfo_mhz));
  EXPECT_EQ(garbage.model, -1);
  EXPECT_TRUE(std::isnan(cpu_core_peak(garbage, "fp32").flops_per_s));
}

TEST(CpuPeak, AnUnknownPrecisionHasNoPeak) {
  const CpuFacts cpu = parse_cpu_facts(two_processors(kEmeraldRapidsKvmHead, kEmeraldRapidsKvmTail), "", "");
  for (const char* precision : {"tf32", "fp8", "FP32", ""}) {
    const CpuCorePeak peak = cpu_core_peak(cpu, precision);
    EXPECT_TRUE(std::isnan(peak.flops_per_s)) << precision;
    EXPECT_TRUE(contains(peak.missing, "no CPU peak for precision")) << peak.missing;
  }
}

TEST(CpuPeak, PhysicalCoresCountCoresNotHyperthreads) {
  const std::string head = kEmeraldRapidsKvmHead;
  const std::string tail = kEmeraldRapidsKvmTail;
  const CpuFacts cpu = parse_cpu_facts(processor(0, 0, 0, head, tail) + processor(1, 0, 1, head, tail) +
                                           processor(2, 0, 0, head, tail) + processor(3, 0, 1, head, tail),
                                       "", "");
  EXPECT_EQ(cpu.logical_processors, 4);
  EXPECT_EQ(cpu.physical_cores, 2);
  // Core ids repeat on each socket: the pair counts.
  const CpuFacts two_sockets = parse_cpu_facts(processor(0, 0, 0, head, tail) + processor(1, 1, 0, head, tail), "", "");
  EXPECT_EQ(two_sockets.physical_cores, 2);
  // A processor without its place leaves the count unknown rather than short.
  const CpuFacts unplaced = parse_cpu_facts(processor(0, 0, 0, head, tail) + "processor\t: 1\n" + head + tail, "", "");
  EXPECT_EQ(unplaced.logical_processors, 2);
  EXPECT_EQ(unplaced.physical_cores, 0);
}

TEST(CpuPeak, ClocksFromKilohertzFilesAndTheModelName) {
  const std::string head = kHaswellHead;
  const CpuFacts both = parse_cpu_facts(two_processors(head, kHaswellTail), "4400000\n", "3500000\n");
  EXPECT_DOUBLE_EQ(both.max_mhz, 4400);
  EXPECT_DOUBLE_EQ(both.base_mhz, 3500);  // cpufreq's base_frequency before the name's 4.00 GHz
  EXPECT_EQ(both.base_mhz_source, "cpufreq base_frequency");

  const CpuFacts named = parse_cpu_facts(two_processors(head, kHaswellTail), "", "");
  EXPECT_DOUBLE_EQ(named.base_mhz, 4000);
  EXPECT_EQ(named.base_mhz_source, "model name");
  const CpuCorePeak base = cpu_core_peak(named, "fp32");
  EXPECT_DOUBLE_EQ(base.clock_hz, 4.0e9);  // the base clock before cpu MHz's 798 MHz of an idle core
  EXPECT_FALSE(base.upper_bound);

  EXPECT_DOUBLE_EQ(skylake_sp("Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz").base_mhz, 2300);
  EXPECT_DOUBLE_EQ(skylake_sp("Intel(R) Pentium(R) III CPU family 1266MHz @ 1266MHz").base_mhz, 1266);
  EXPECT_TRUE(std::isnan(skylake_sp("Intel(R) Xeon(R) CPU @ GHz").base_mhz));
  EXPECT_TRUE(std::isnan(skylake_sp("Intel(R) Xeon(R) CPU @ 2.30").base_mhz));

  for (const char* text : {"", "\n", "abc", "-1000", "0", "3500000 kHz", "nan", "inf"}) {
    EXPECT_TRUE(std::isnan(parse_cpu_facts("", text, "").max_mhz)) << text;
  }
  EXPECT_DOUBLE_EQ(parse_cpu_facts("", " 2600000", "").max_mhz, 2600);
}

// A clock outside 0.1-10 GHz is a misread, not a CPU: passed over for the next source, and said.
TEST(CpuPeak, AnImplausibleClockIsPassedOverAndSaid) {
  CpuFacts cpu = parse_cpu_facts(two_processors(kEmeraldRapidsKvmHead, kEmeraldRapidsKvmTail), "1000", "");
  EXPECT_DOUBLE_EQ(cpu.max_mhz, 1);  // 1000 kHz: a hypervisor's placeholder
  const CpuCorePeak peak = cpu_core_peak(cpu, "fp32");
  EXPECT_DOUBLE_EQ(peak.clock_hz, 2.1e9) << "cpu MHz, the next source";
  EXPECT_FALSE(peak.upper_bound);
  EXPECT_NE(peak.clock_source.find("cpufreq cpuinfo_max_freq 1.000000 MHz passed over"), std::string::npos)
      << peak.clock_source;
  cpu.max_mhz = std::numeric_limits<double>::quiet_NaN();
  cpu.cpuinfo_mhz = 1e30;
  const CpuCorePeak absurd = cpu_core_peak(cpu, "fp32");
  EXPECT_TRUE(std::isnan(absurd.flops_per_s));
  EXPECT_NE(absurd.missing.find("passed over"), std::string::npos) << absurd.missing;
}

}  // namespace
}  // namespace ddpbench
