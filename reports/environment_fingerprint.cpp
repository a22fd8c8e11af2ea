#include "reports/environment_fingerprint.hpp"

#include <algorithm>
#include <set>
#include <string_view>

#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

std::string shown(const std::string& value) { return value.empty() ? "not recorded" : value; }

// Said of an aspect only one file records: its writer predates the aspect, or the file was edited.
constexpr const char* kRecordedInOneFile = "recorded only in the ";

// The threads a row's runs that finished computed with, as their files recorded them, as a list
// ("2", "1, 2", "not recorded": a PyTorch twin's, or a file edited to escape the check); empty
// where none finished.
std::string threads_of(const std::vector<const RunResult*>& runs) {
  std::set<int64_t> threads;
  for (const RunResult* r : runs) {
    if (r->status == RunStatus::ok) threads.insert(std::max<int64_t>(0, r->threads_per_rank));
  }
  std::string text;
  for (const int64_t t : threads) text += (text.empty() ? "" : ", ") + (t > 0 ? std::to_string(t) : "not recorded");
  return text;
}

// The datasets a row's runs that finished trained on, as a list ("synthetic", "cifar10, synthetic":
// under --dataset auto the data found decides, repetition by repetition); empty where none finished.
std::string dataset_of(const std::vector<const RunResult*>& runs) {
  std::set<std::string> datasets;
  for (const RunResult* r : runs) {
    if (r->status == RunStatus::ok) datasets.insert(r->dataset.empty() ? "not recorded" : r->dataset);
  }
  std::string text;
  for (const auto& d : datasets) text += (text.empty() ? "" : ", ") + d;
  return text;
}

bool cpu_recorded(const CpuFacts& c) {
  return !c.architecture.empty() || !c.vendor.empty() || c.family != -1 || c.model != -1 || !c.model_name.empty() ||
         !c.flags.empty() || c.logical_processors != 0 || c.physical_cores != 0;
}

// What the CPU says of itself beyond its brand string, which a virtual machine keeps the same
// across CPUs ("Intel(R) Xeon(R) Processor"): vendor, family, model, its instruction sets, its
// processors and cores. What one file says and the other does not is a difference too: absence
// cannot tell an older writer from an edited file, so it never reads as agreement.
void cpu_identity_differences(const CpuFacts& a, const CpuFacts& b, std::vector<EnvironmentDifference>& out) {
  if (cpu_recorded(a) != cpu_recorded(b)) {
    out.push_back({"cpu", std::string("CPU identity (vendor, family, model, instruction sets, cores): ") +
                              kRecordedInOneFile + (cpu_recorded(a) ? "baseline's" : "current's") + " file"});
    return;
  }
  const auto differ_number = [&](const char* what, int64_t x, int64_t y, int64_t unknown) {
    const auto said = [unknown](int64_t v) { return v == unknown ? std::string("not recorded") : std::to_string(v); };
    if (x != y) out.push_back({"cpu", std::string(what) + ": " + said(x) + " vs " + said(y)});
  };
  if (a.vendor != b.vendor) out.push_back({"cpu", "CPU vendor: " + shown(a.vendor) + " vs " + shown(b.vendor)});
  differ_number("CPU family", a.family, b.family, -1);
  differ_number("CPU model number", a.model, b.model, -1);
  differ_number("logical processors", a.logical_processors, b.logical_processors, 0);
  differ_number("physical cores", a.physical_cores, b.physical_cores, 0);
  // The instruction sets a step computes with; a kernel's or hypervisor's other flags (mitigations,
  // "hypervisor") change between boots of one machine and say nothing of its speed.
  const auto compute_flags = [](const std::vector<std::string>& flags) {
    std::set<std::string> kept;
    for (const auto& f : flags) {
      for (const std::string_view isa : {"avx", "amx", "fma", "f16c", "sse", "ssse", "vnni", "bf16", "fp16", "asimd", "sve"}) {
        if (std::string_view(f).starts_with(isa)) kept.insert(f);
      }
    }
    return kept;
  };
  const std::set<std::string> first = compute_flags(a.flags);
  const std::set<std::string> second = compute_flags(b.flags);
  std::string only_first;
  std::string only_second;
  for (const auto& f : first) {
    if (second.count(f) == 0) only_first += (only_first.empty() ? "" : " ") + f;
  }
  for (const auto& f : second) {
    if (first.count(f) == 0) only_second += (only_second.empty() ? "" : " ") + f;
  }
  if (!only_first.empty() || !only_second.empty()) {
    out.push_back({"cpu", "CPU instruction sets: only the baseline's has [" + only_first + "], only the current's [" +
                              only_second + "]"});
  }
}

}  // namespace

const std::vector<std::string>& environment_aspects() {
  static const std::vector<std::string> aspects{"build-type", "threads", "cpu-affinity", "cpu",    "gpu",    "libtorch",
                                                "cuda",       "cudnn",   "nccl",         "driver", "dataset"};
  return aspects;
}

std::vector<EnvironmentDifference> environment_differences(const Environment& baseline, const Environment& current) {
  std::vector<EnvironmentDifference> out;
  const auto differ = [&](const char* aspect, const std::string& what, const std::string& a, const std::string& b) {
    if (a != b) out.push_back({aspect, what + ": " + shown(a) + " vs " + shown(b)});
  };
  differ("build-type", "build type", baseline.build_type, current.build_type);
  differ("threads", "OMP_NUM_THREADS", baseline.omp_num_threads, current.omp_num_threads);
  differ("cpu-affinity", "CPUs the process could use", baseline.cpu_affinity, current.cpu_affinity);
  differ("cpu", "CPU model", baseline.cpu_model, current.cpu_model);
  if (baseline.cpu_cores != current.cpu_cores) {
    out.push_back(
        {"cpu", "CPU cores: " + std::to_string(baseline.cpu_cores) + " vs " + std::to_string(current.cpu_cores)});
  }
  cpu_identity_differences(baseline.cpu, current.cpu, out);
  if (baseline.gpus.size() != current.gpus.size()) {
    out.push_back({"gpu", "GPU count: " + std::to_string(baseline.gpus.size()) + " vs " +
                              std::to_string(current.gpus.size())});
  }
  for (std::size_t i = 0; i < std::min(baseline.gpus.size(), current.gpus.size()); ++i) {
    differ("gpu", "GPU " + std::to_string(i), baseline.gpus[i].name, current.gpus[i].name);
  }
  differ("libtorch", "LibTorch", baseline.libtorch_version, current.libtorch_version);
  differ("cuda", "CUDA", baseline.cuda_runtime_version, current.cuda_runtime_version);
  differ("cudnn", "cuDNN", baseline.cudnn_version, current.cudnn_version);
  differ("nccl", "NCCL", baseline.nccl_version, current.nccl_version);
  differ("driver", "driver", baseline.driver_version, current.driver_version);
  return out;
}

std::vector<EnvironmentDifference> row_environment_differences(const std::string& label,
                                                               const std::vector<const RunResult*>& baseline,
                                                               const std::vector<const RunResult*>& current) {
  std::vector<EnvironmentDifference> out;
  const std::string base_threads = threads_of(baseline);
  const std::string current_threads = threads_of(current);
  if (!base_threads.empty() && !current_threads.empty() && base_threads != current_threads) {
    out.push_back({"threads", "threads per rank of " + label + ": " + base_threads + " vs " + current_threads});
  }
  const std::string base_dataset = dataset_of(baseline);
  const std::string current_dataset = dataset_of(current);
  if (!base_dataset.empty() && !current_dataset.empty() && base_dataset != current_dataset) {
    out.push_back({"dataset", "dataset of " + label + ": " + base_dataset + " vs " + current_dataset});
  }
  return out;
}

std::vector<std::string> unallowed_differences(const std::vector<EnvironmentDifference>& differences,
                                               const std::vector<std::string>& allowed) {
  const bool every = std::find(allowed.begin(), allowed.end(), kEveryAspect) != allowed.end();
  std::vector<std::string> out;
  for (const auto& d : differences) {
    if (every || std::find(allowed.begin(), allowed.end(), d.aspect) != allowed.end()) continue;
    out.push_back("measured in another environment: " + d.text + " (--allow-env-mismatch " + d.aspect +
                  " compares them anyway)");
  }
  return out;
}

void check_allowed_aspects(const std::vector<std::string>& allowed) {
  for (const auto& word : allowed) {
    const auto& aspects = environment_aspects();
    if (word == kEveryAspect || std::find(aspects.begin(), aspects.end(), word) != aspects.end()) continue;
    std::string known;
    for (const auto& a : aspects) known += a + ", ";
    throw InputError("--allow-env-mismatch: '" + word + "' is no aspect of the environment (" + known + "or " +
                     kEveryAspect + ")");
  }
}

}  // namespace ddpbench
