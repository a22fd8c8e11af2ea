#include "reports/cpu_peak.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ddpbench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// The whole of `s` as a non-negative integer in `base` ("0x" allowed in base 16), else nothing.
std::optional<int64_t> whole_int(std::string_view s, int base) {
  s = trim(s);
  if (base == 16 && (s.starts_with("0x") || s.starts_with("0X"))) s.remove_prefix(2);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (s.empty() || error != std::errc() || end != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

// A clock: finite and positive, else NaN. `rest` gets what follows the number.
double leading_clock(std::string_view s, std::string_view* rest) {
  s = trim(s);
  double value = kNaN;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || error != std::errc() || !std::isfinite(value) || value <= 0) return kNaN;
  *rest = trim(s.substr(static_cast<std::size_t>(end - s.data())));
  return value;
}

double whole_clock(std::string_view s) {
  std::string_view rest;
  const double value = leading_clock(s, &rest);
  return rest.empty() ? value : kNaN;
}

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) { return (x | 0x20) == (y | 0x20); });
}

// Intel's names carry the base clock ("Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz"); AMD's and
// virtual machines' ("Intel(R) Xeon(R) Processor") do not.
double model_name_mhz(std::string_view name) {
  const std::size_t at = name.rfind('@');
  if (at == std::string_view::npos) return kNaN;
  std::string_view unit;
  const double value = leading_clock(name.substr(at + 1), &unit);
  if (iequals(unit, "GHz")) return value * 1000;
  if (iequals(unit, "MHz")) return value;
  return kNaN;
}

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  std::string word;
  for (char c : std::string(s) + " ") {
    if (c == ' ' || c == '\t') {
      if (!word.empty()) out.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return out;
}

bool has(const CpuFacts& cpu, std::string_view flag) {
  return std::find(cpu.flags.begin(), cpu.flags.end(), flag) != cpu.flags.end();
}

std::string number(double value) {
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%g", value);
  return buffer.data();
}

std::string ghz(double mhz) {
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.2f GHz", mhz / 1000);
  return buffer.data();
}

std::string hex(int64_t value) {
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "0x%llx", static_cast<unsigned long long>(value));
  return buffer.data();
}

// x86 cores by (vendor, family, model range): how many FMAs of each width a core starts a
// cycle. From Intel's 64 and IA-32 Architectures Optimization Reference Manual (Haswell to
// Granite Rapids), AMD's Software Optimization Guides for family 17h, 19h and 1Ah, and Intel
// ARK's "# of AVX-512 FMA Units". A 512-bit FMA count of 0: no AVX-512.
struct X86Core {
  std::string_view vendor;
  int64_t family, model_first, model_last;
  std::string_view name;
  int fma256_per_cycle, fma512_per_cycle;
  std::string_view note;  // where the datapaths are not plain units of the instruction's width
};

constexpr std::string_view kIntel = "GenuineIntel";
constexpr std::string_view kAmd = "AuthenticAMD";

constexpr std::array<X86Core, 28> kX86Cores = {{
    {kIntel, 6, 60, 60, "Haswell", 2, 0, ""},
    {kIntel, 6, 63, 63, "Haswell", 2, 0, ""},
    {kIntel, 6, 69, 70, "Haswell", 2, 0, ""},
    {kIntel, 6, 61, 61, "Broadwell", 2, 0, ""},
    {kIntel, 6, 71, 71, "Broadwell", 2, 0, ""},
    {kIntel, 6, 79, 79, "Broadwell", 2, 0, ""},
    {kIntel, 6, 86, 86, "Broadwell", 2, 0, ""},
    {kIntel, 6, 78, 78, "Skylake", 2, 0, ""},
    {kIntel, 6, 94, 94, "Skylake", 2, 0, ""},
    {kIntel, 6, 142, 142, "Kaby Lake/Coffee Lake", 2, 0, ""},
    {kIntel, 6, 158, 158, "Kaby Lake/Coffee Lake", 2, 0, ""},
    {kIntel, 6, 165, 166, "Comet Lake", 2, 0, ""},
    // Model 85's 512-bit FMA count depends on the SKU: skylake_sp_fma512() reads the name.
    {kIntel, 6, 85, 85, "Skylake-SP/Cascade Lake/Cooper Lake", 2, 2, ""},
    {kIntel, 6, 106, 106, "Ice Lake-SP", 2, 2, ""},
    {kIntel, 6, 108, 108, "Ice Lake-D", 2, 2, ""},
    {kIntel, 6, 143, 143, "Sapphire Rapids", 2, 2, ""},
    {kIntel, 6, 207, 207, "Emerald Rapids", 2, 2, ""},
    {kIntel, 6, 173, 174, "Granite Rapids", 2, 2, ""},
    // Client cores fuse ports 0 and 1 into their one 512-bit FMA; there is no port-5 FMA.
    {kIntel, 6, 125, 126, "Ice Lake", 2, 1, "ports 0 and 1 fuse into one 512-bit FMA unit"},
    {kIntel, 6, 140, 141, "Tiger Lake", 2, 1, "ports 0 and 1 fuse into one 512-bit FMA unit"},
    {kIntel, 6, 167, 167, "Rocket Lake", 2, 1, "ports 0 and 1 fuse into one 512-bit FMA unit"},
    {kAmd, 23, 0, 47, "Zen/Zen+", 1, 0, "two 128-bit FMA pipes: a 256-bit FMA takes both"},
    {kAmd, 23, 48, 255, "Zen 2", 2, 0, ""},
    {kAmd, 25, 0, 15, "Zen 3", 2, 0, ""},
    {kAmd, 25, 32, 95, "Zen 3", 2, 0, ""},
    // Zen 4 runs AVX-512 on its two 256-bit FMA pipes, one 512-bit FMA a cycle.
    {kAmd, 25, 16, 31, "Zen 4", 2, 1, "two 256-bit FMA pipes: a 512-bit FMA takes both"},
    {kAmd, 25, 96, 127, "Zen 4", 2, 1, "two 256-bit FMA pipes: a 512-bit FMA takes both"},
    {kAmd, 25, 160, 175, "Zen 4", 2, 1, "two 256-bit FMA pipes: a 512-bit FMA takes both"},
}};

// Zen 5 is family 26 whatever the model; its desktop and server parts have full 512-bit pipes.
constexpr X86Core kZen5 = {kAmd, 26, 0, 255, "Zen 5", 2, 2, "mobile Zen 5 has 256-bit datapaths: half this"};

const X86Core* x86_core(const CpuFacts& cpu) {
  if (cpu.vendor == kAmd && cpu.family == 26 && cpu.model >= 0) return &kZen5;
  for (const X86Core& core : kX86Cores) {
    if (cpu.vendor == core.vendor && cpu.family == core.family && cpu.model >= core.model_first &&
        cpu.model <= core.model_last)
      return &core;
  }
  return nullptr;
}

// Skylake-SP, Cascade Lake and Cooper Lake (6/85) SKUs have one or two 512-bit FMA units, which
// only the name tells (Intel ARK): Platinum and Gold 6xxx two, Gold 5xxx one but for the 5122
// and 5222 and the Cooper Lake Gold 53xxH (the one 6/85 with avx512_bf16), Silver and Bronze
// one. Virtual machines print "Intel(R) Xeon(R) Processor": two, assumed.
std::pair<int, std::string> skylake_sp_fma512(const CpuFacts& cpu) {
  const std::string& name = cpu.model_name;
  const auto says = [&](std::string_view word) { return name.find(word) != std::string::npos; };
  if (says("Platinum")) return {2, "Xeon Platinum: two 512-bit FMA units"};
  if (says("Gold 6")) return {2, "Xeon Gold 6xxx: two 512-bit FMA units"};
  if (says("Gold 5122") || says("Gold 5222")) return {2, "Xeon Gold 5122/5222: two 512-bit FMA units"};
  if (says("Gold 5") && has(cpu, "avx512_bf16")) return {2, "Cooper Lake Xeon Gold 5xxx: two 512-bit FMA units"};
  if (says("Gold 5")) return {1, "Xeon Gold 5xxx: one 512-bit FMA unit"};
  if (says("Silver")) return {1, "Xeon Silver: one 512-bit FMA unit"};
  if (says("Bronze")) return {1, "Xeon Bronze: one 512-bit FMA unit"};
  return {2, "two 512-bit FMA units assumed: the model name does not say whether it has one or two"};
}

// Arm Neoverse cores by CPU part: their FP/ASIMD pipes, from Arm's Software Optimization
// Guides. cpuinfo does not give the SVE vector length, so it is the part's.
struct ArmCore {
  int64_t part;
  std::string_view name;
  int sve_bits, sve_pipes;  // 0: no SVE
  int neon_pipes;           // 128-bit FMA pipes for NEON
};

constexpr std::array<ArmCore, 4> kArmCores = {{
    {0xd40, "Neoverse V1", 256, 2, 4},  // four 128-bit pipes, paired for 256-bit SVE
    {0xd4f, "Neoverse V2", 128, 4, 4},
    {0xd0c, "Neoverse N1", 0, 0, 2},
    {0xd49, "Neoverse N2", 128, 2, 2},
}};

// One core's vector arithmetic for a precision, without the clock.
struct Arithmetic {
  double flops_per_cycle = kNaN;
  std::string unit;
  std::string source;
  std::string load;  // what runs, for the clock's caveat ("AVX-512")
  std::string missing;
};

std::string fma_source(std::string_view isa, std::string_view flag, int lanes, int units, std::string_view where,
                       std::string_view unit_word) {
  const double flops = lanes * units * 2.0;
  return std::string(isa) + " (" + std::string(flag) + "): " + std::to_string(lanes) + " fp32 lanes x " +
         std::to_string(units) + " FMA " + std::string(unit_word) + (units == 1 ? "" : "s") + " (" +
         std::string(where) + ") x 2 FLOP = " + number(flops) + " FLOP/cycle";
}

// x86 fp32: lanes x FMAs a cycle x 2 (an FMA is a multiply and an add). `avx512_only`: the
// AVX-512 rate or nothing (what the bf16 and fp16 instructions double).
Arithmetic x86_fp32(const CpuFacts& cpu, bool avx512_only) {
  Arithmetic a;
  const bool avx512 = has(cpu, "avx512f");
  const bool avx2 = has(cpu, "avx2") && has(cpu, "fma");
  if (!avx512 && (avx512_only || !avx2)) {
    a.missing = avx512_only ? "no avx512f in the flags" : "no FMA vector unit in the flags (avx512f, or avx2 and fma)";
    return a;
  }
  const int lanes = avx512 ? 16 : 8;
  const std::string family_model = "family " + std::to_string(cpu.family) + " model " + std::to_string(cpu.model);
  int units = 2;
  std::string where;
  const X86Core* core = x86_core(cpu);
  if (core != nullptr && (!avx512 || core->fma512_per_cycle > 0)) {
    units = avx512 ? core->fma512_per_cycle : core->fma256_per_cycle;
    where = std::string(core->name) + ", " + family_model;
    std::string note(core->note);
    if (avx512 && cpu.vendor == kIntel && cpu.family == 6 && cpu.model == 85) {
      std::tie(units, note) = skylake_sp_fma512(cpu);
    }
    if (!note.empty() && (avx512 || core->fma512_per_cycle == 0)) where += "; " + note;
  } else if (core != nullptr) {
    where =
        std::string(core->name) + ", " + family_model + ", has no AVX-512 though the flags say so: 2 FMA units assumed";
  } else {
    where = (cpu.vendor.empty() ? std::string("unknown vendor") : cpu.vendor) + " " + family_model +
            " is not in the table: 2 FMA units assumed";
  }
  a.flops_per_cycle = lanes * units * 2.0;
  a.unit = avx512 ? "AVX-512 FMA" : "AVX2 FMA";
  a.load = avx512 ? "AVX-512" : "AVX2";
  a.source = fma_source(avx512 ? "AVX-512" : "AVX2", avx512 ? "avx512f" : "avx2, fma", lanes, units, where, "unit");
  return a;
}

Arithmetic arm_fp32(const CpuFacts& cpu) {
  Arithmetic a;
  const bool sve = has(cpu, "sve");
  if (!sve && !has(cpu, "asimd")) {
    a.missing = "no vector unit in the Features (asimd, sve)";
    return a;
  }
  const ArmCore* core = nullptr;
  for (const ArmCore& c : kArmCores) {
    if (cpu.vendor == "ARM" && cpu.model == c.part) core = &c;
  }
  const bool sve_known = sve && core != nullptr && core->sve_bits > 0;
  const int bits = sve_known ? core->sve_bits : 128;
  const int pipes = core == nullptr ? 2 : sve_known ? core->sve_pipes : core->neon_pipes;
  const std::string part = "CPU part " + (cpu.model >= 0 ? hex(cpu.model) : std::string("unknown"));
  std::string where;
  if (core == nullptr) {
    where = "implementer " + (cpu.vendor.empty() ? std::string("unknown") : cpu.vendor) + " " + part +
            " is not in the table: 128-bit x 2 pipes assumed";
  } else {
    where = std::string(core->name) + ", " + part + ": " + std::to_string(bits) + "-bit";
    if (sve_known) where += "; the SVE vector length is not in cpuinfo: the part's";
  }
  a.flops_per_cycle = bits / 32 * pipes * 2.0;
  a.unit = sve ? "SVE FMA" : "NEON FMA";
  a.load = "vector";
  a.source = fma_source(sve ? "SVE" : "NEON", sve ? "sve" : "asimd", bits / 32, pipes, where, "pipe");
  return a;
}

Arithmetic unknown_arithmetic() {
  Arithmetic a;
  a.missing = "the CPU's architecture and flags are unknown";
  return a;
}

Arithmetic fp32_arithmetic(const CpuFacts& cpu) {
  if (cpu.architecture == "x86_64") return x86_fp32(cpu, false);
  if (cpu.architecture == "aarch64") return arm_fp32(cpu);
  return unknown_arithmetic();
}

// Instructions that do twice the fp32 FMA's FLOP a cycle: two bf16 or fp16 products a fp32 lane.
Arithmetic doubled(Arithmetic a, std::string unit, std::string how) {
  if (!std::isfinite(a.flops_per_cycle)) return a;
  a.flops_per_cycle *= 2;
  a.unit = std::move(unit);
  a.source = how + ", twice the fp32 FMA rate: 2 x [" + a.source + "] = " + number(a.flops_per_cycle) + " FLOP/cycle";
  return a;
}

// Intel's figure for AMX (Optimization Reference Manual, "Intel AMX"): TDPBF16PS and TDPFP16PS
// do 16x16x32 multiply-adds in 16 cycles, 1024 FLOP a cycle a core.
Arithmetic amx(std::string_view flag, std::string_view instruction, std::string unit) {
  Arithmetic a;
  a.flops_per_cycle = 1024;
  a.unit = std::move(unit);
  a.load = "AMX";
  a.source = "AMX (" + std::string(flag) + "): " + std::string(instruction) +
             ", 16x16x32 multiply-adds in 16 cycles x 2 FLOP = 1024 FLOP/cycle (Intel's figure)";
  return a;
}

Arithmetic bf16_arithmetic(const CpuFacts& cpu) {
  Arithmetic a;
  if (cpu.architecture == "x86_64") {
    if (has(cpu, "amx_bf16")) return amx("amx_bf16", "TDPBF16PS", "AMX-BF16");
    // VDPBF16PS: a 512-bit instruction multiplies 32 bf16 pairs and adds them into 16 fp32 lanes.
    if (has(cpu, "avx512_bf16"))
      return doubled(x86_fp32(cpu, true), "AVX512-BF16", "AVX512-BF16 (avx512_bf16): VDPBF16PS, 32 bf16 products");
    a.missing = "no bf16 arithmetic (avx512_bf16, amx_bf16): autocast emulates it";
    return a;
  }
  if (cpu.architecture == "aarch64") {
    // BFDOT: two bf16 products summed into each fp32 lane.
    if (has(cpu, "bf16")) {
      const bool sve = has(cpu, "sve");
      return doubled(arm_fp32(cpu), sve ? "SVE BFDOT" : "NEON BFDOT", "BFDOT (bf16): two bf16 products a fp32 lane");
    }
    a.missing = "no bf16 arithmetic (bf16 in the Features): autocast emulates it";
    return a;
  }
  return unknown_arithmetic();
}

Arithmetic fp16_arithmetic(const CpuFacts& cpu) {
  Arithmetic a;
  if (cpu.architecture == "x86_64") {
    if (has(cpu, "amx_fp16")) return amx("amx_fp16", "TDPFP16PS", "AMX-FP16");
    if (has(cpu, "avx512_fp16"))
      return doubled(x86_fp32(cpu, true), "AVX512-FP16", "AVX512-FP16 (avx512_fp16): 32 fp16 lanes a 512-bit FMA");
    a.missing = "no fp16 arithmetic (avx512_fp16, amx_fp16): autocast emulates it";
    return a;
  }
  if (cpu.architecture == "aarch64") {
    // fphp alone is scalar: the vector rate needs asimdhp (SVE's fp16 comes with it).
    if (has(cpu, "asimdhp")) {
      const bool sve = has(cpu, "sve");
      return doubled(arm_fp32(cpu), sve ? "SVE FP16 FMA" : "NEON FP16 FMA",
                     "FP16 FMA (asimdhp): 8 fp16 lanes a 128-bit vector");
    }
    a.missing = "no fp16 vector arithmetic (asimdhp in the Features): autocast emulates it";
    return a;
  }
  return unknown_arithmetic();
}

struct Clock {
  double hz = kNaN;
  std::string source;
  bool upper_bound = false;
  std::string missing;
};

// The highest clock the core may run, else the base clock, else what the kernel calls it:
// the first of those found plausible.
Clock core_clock_from(const CpuFacts& cpu, std::string_view load, bool max_ok, bool base_ok, bool cpuinfo_ok) {
  Clock c;
  if (max_ok) {
    c.hz = cpu.max_mhz * 1e6;
    c.upper_bound = true;
    c.source =
        "cpufreq cpuinfo_max_freq " + ghz(cpu.max_mhz) +
        (cpu.architecture == "aarch64" ? " (the highest clock: an upper bound; the clock under load may be lower)"
                                       : " (turbo: an upper bound; the all-core clock under " +
                                             std::string(load.empty() ? "vector" : load) + " load is lower)");
  } else if (base_ok) {
    c.hz = cpu.base_mhz * 1e6;
    const std::string from = cpu.base_mhz_source.empty() ? std::string("base clock") : cpu.base_mhz_source;
    c.source = from + " " + ghz(cpu.base_mhz) +
               " (the base clock: turbo may exceed it, so utilisation against it may read high)";
  } else if (cpuinfo_ok) {
    c.hz = cpu.cpuinfo_mhz * 1e6;
    c.source = "/proc/cpuinfo cpu MHz " + ghz(cpu.cpuinfo_mhz) +
               " (the kernel's nominal/TSC clock, in a VM the host's; turbo may exceed it, so utilisation "
               "against it may read high)";
  } else {
    c.missing =
        "no clock known (no cpufreq cpuinfo_max_freq or base_frequency, no \"@ GHz\" in the model "
        "name, no cpu MHz)";
  }
  return c;
}

// A clock outside 0.1-10 GHz is a misread (a kHz file taken for MHz, a hypervisor's
// placeholder), not a CPU: it is passed over, and said so.
constexpr double kLowestMhz = 100;
constexpr double kHighestMhz = 10'000;

Clock core_clock(const CpuFacts& cpu, std::string_view load) {
  std::string ignored;
  const auto plausible = [&](double mhz, const char* what) {
    if (!std::isfinite(mhz)) return false;
    if (mhz >= kLowestMhz && mhz <= kHighestMhz) return true;
    ignored += std::string("; ") + what + " " + std::to_string(mhz) + " MHz passed over (outside 0.1-10 GHz)";
    return false;
  };
  const bool max_ok = plausible(cpu.max_mhz, "cpufreq cpuinfo_max_freq");
  const bool base_ok = !max_ok && plausible(cpu.base_mhz, "base clock");
  const bool cpuinfo_ok = !max_ok && !base_ok && plausible(cpu.cpuinfo_mhz, "cpu MHz");
  Clock c = core_clock_from(cpu, load, max_ok, base_ok, cpuinfo_ok);
  (c.missing.empty() ? c.source : c.missing) += ignored;
  return c;
}

}  // namespace

namespace {

using CpuinfoFields = std::map<std::string, std::string, std::less<>>;

// The processors of /proc/cpuinfo: their count, their physical cores where every one says
// which it is, and the first value of each field. Every processor repeats the CPU's fields:
// the first of each is the CPU's. Older arm64 kernels print the fields once, after the
// processor lines; the first is theirs too.
CpuinfoFields read_processors(std::string_view proc_cpuinfo, CpuFacts& cpu) {
  CpuinfoFields first;
  std::set<std::pair<std::string, std::string>> cores;
  bool every_processor_placed = true;
  std::optional<std::string> physical_id, core_id;
  const auto place_processor = [&] {
    if (cpu.logical_processors == 0) return;
    if (physical_id && core_id) {
      cores.emplace(*physical_id, *core_id);
    } else {
      every_processor_placed = false;
    }
  };
  std::size_t start = 0;
  while (start < proc_cpuinfo.size()) {
    std::size_t end = proc_cpuinfo.find('\n', start);
    if (end == std::string_view::npos) end = proc_cpuinfo.size();
    const std::string_view line = proc_cpuinfo.substr(start, end - start);
    start = end + 1;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string key(trim(line.substr(0, colon)));
    const std::string value(trim(line.substr(colon + 1)));
    if (key == "processor") {
      place_processor();
      ++cpu.logical_processors;
      physical_id.reset();
      core_id.reset();
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      core_id = value;
    }
    first.try_emplace(key, value);
  }
  place_processor();
  if (every_processor_placed && !cores.empty()) cpu.physical_cores = static_cast<int64_t>(cores.size());
  return first;
}

// Architecture, vendor, family, model and flags, as an arm64 or an x86 kernel names them.
void identify_cpu(const CpuinfoFields& first, CpuFacts& cpu) {
  const auto field = [&](std::string_view key) -> std::optional<std::string> {
    const auto it = first.find(key);
    if (it == first.end()) return std::nullopt;
    return it->second;
  };
  if (const auto implementer = field("CPU implementer"); implementer || field("Features")) {
    cpu.architecture = "aarch64";
    if (implementer) cpu.vendor = whole_int(*implementer, 16) == 0x41 ? "ARM" : *implementer;
    if (const auto part = field("CPU part")) cpu.model = whole_int(*part, 16).value_or(-1);
    if (const auto features = field("Features")) cpu.flags = words(*features);
  } else if (field("vendor_id") || field("flags")) {
    cpu.architecture = "x86_64";
    cpu.vendor = field("vendor_id").value_or("");
    if (const auto family = field("cpu family")) cpu.family = whole_int(*family, 10).value_or(-1);
    if (const auto model = field("model")) cpu.model = whole_int(*model, 10).value_or(-1);
    if (const auto flags = field("flags")) cpu.flags = words(*flags);
  }
  cpu.model_name = field("model name").value_or("");
  if (const auto mhz = field("cpu MHz")) cpu.cpuinfo_mhz = whole_clock(*mhz);
}

}  // namespace

CpuFacts parse_cpu_facts(std::string_view proc_cpuinfo, std::string_view max_freq_khz, std::string_view base_freq_khz) {
  CpuFacts cpu;
  identify_cpu(read_processors(proc_cpuinfo, cpu), cpu);
  cpu.max_mhz = whole_clock(max_freq_khz) / 1000;
  if (const double base_khz = whole_clock(base_freq_khz); std::isfinite(base_khz)) {
    cpu.base_mhz = base_khz / 1000;
    cpu.base_mhz_source = "cpufreq base_frequency";
  } else if (const double name_mhz = model_name_mhz(cpu.model_name); std::isfinite(name_mhz)) {
    cpu.base_mhz = name_mhz;
    cpu.base_mhz_source = "model name";
  }
  return cpu;
}

CpuCorePeak cpu_core_peak(const CpuFacts& cpu, std::string_view precision) {
  CpuCorePeak peak;
  Arithmetic arithmetic;
  if (precision == "fp32") {
    arithmetic = fp32_arithmetic(cpu);
  } else if (precision == "bf16") {
    arithmetic = bf16_arithmetic(cpu);
  } else if (precision == "fp16") {
    arithmetic = fp16_arithmetic(cpu);
  } else {
    peak.missing = "no CPU peak for precision \"" + std::string(precision) +
                   "\" (fp32, bf16, fp16; TF32 is a CUDA mode: CPU rows compute in fp32)";
    return peak;
  }
  const Clock clock = core_clock(cpu, arithmetic.load);
  peak.flops_per_cycle = arithmetic.flops_per_cycle;
  peak.unit = arithmetic.unit;
  peak.vector_source = arithmetic.source;
  peak.clock_hz = clock.hz;
  peak.clock_source = clock.source;
  peak.upper_bound = clock.upper_bound;
  peak.flops_per_s = peak.flops_per_cycle * peak.clock_hz;
  if (!std::isfinite(peak.flops_per_s)) peak.flops_per_s = kNaN;
  for (const std::string& why : {arithmetic.missing, clock.missing}) {
    if (why.empty()) continue;
    peak.missing += (peak.missing.empty() ? "" : "; ") + why;
  }
  return peak;
}

}  // namespace ddpbench
