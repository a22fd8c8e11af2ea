#include "harness/runner/environment.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <torch/cuda.h>
#include <torch/version.h>

#ifdef DDPBENCH_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#endif

#include "harness/runner/build_info.hpp"

namespace ddpbench {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

// The "flags" (x86) or "Features" (Arm) line of the first processor.
std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) return line + " ";
  }
  return "";
}

std::string file_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The driver's own version (e.g. 570.124.06) comes from NVML, opened at run time so that the
// binary does not depend on a library that only GPU machines have.
std::string nvml_driver_version() {
  void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (nvml == nullptr) return "";
  using Init = int (*)();
  using GetVersion = int (*)(char*, unsigned);
  auto init = reinterpret_cast<Init>(::dlsym(nvml, "nvmlInit_v2"));
  auto get = reinterpret_cast<GetVersion>(::dlsym(nvml, "nvmlSystemGetDriverVersion"));
  std::string version;
  char buf[96] = {};
  if (init != nullptr && get != nullptr && init() == 0 && get(buf, sizeof buf) == 0) version = buf;
  ::dlclose(nvml);
  return version;
}

// The CPUs this process may run on (its affinity, which taskset or a cgroup's cpuset narrows),
// as a list of ranges: "0-1", "0,2-3".
std::string cpu_affinity_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return "unknown";
  std::string list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    list += (list.empty() ? "" : ",") + std::to_string(cpu) + (last > cpu ? "-" + std::to_string(last) : "");
    cpu = last;
  }
  return list;
}

}  // namespace

bool cpu_has_native_bf16() {
  const std::string flags = cpu_flags();
  for (const char* flag : {" avx512_bf16 ", " amx_bf16 ", " bf16 "}) {
    if (flags.find(flag) != std::string::npos) return true;
  }
  return false;
}

bool cpu_has_native_fp16() {
  const std::string flags = cpu_flags();
  for (const char* flag : {" avx512_fp16 ", " amx_fp16 "}) {
    if (flags.find(flag) != std::string::npos) return true;
  }
  return false;
}

Environment capture_environment() {
  Environment env;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) env.host = host;
  utsname uts{};
  if (::uname(&uts) == 0) env.os = std::string(uts.sysname) + " " + uts.release + " " + uts.machine;
  env.cpu_model = cpu_model();
  env.cpu = parse_cpu_facts(file_text("/proc/cpuinfo"), file_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
                            file_text("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency"));
  env.cpu_cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  env.cpu_affinity = cpu_affinity_list();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  env.omp_num_threads = omp == nullptr ? "unset" : *omp == '\0' ? "empty" : omp;
  env.libtorch_version = TORCH_VERSION;
  const BuildInfo& build = build_info();
  env.compiler = build.compiler;
  env.build_type = build.build_type;
  env.git_revision = build.git_revision;

#ifdef DDPBENCH_HAVE_CUDA
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) env.cuda_runtime_version = cuda_version_text(runtime);
  try {
    if (at::detail::getCUDAHooks().hasCuDNN()) {
      const long v = at::detail::getCUDAHooks().versionCuDNN();
      env.cudnn_version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                          std::to_string(v % 100);
    }
  } catch (const std::exception&) {
  }
  if (torch::cuda::is_available()) {
    env.driver_version = nvml_driver_version();
    int driver = 0;
    if (env.driver_version.empty() && cudaDriverGetVersion(&driver) == cudaSuccess) {
      env.driver_version = "CUDA " + cuda_version_text(driver);
    }
    for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) {
      const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
      env.gpus.push_back({p->name, static_cast<int64_t>(p->totalGlobalMem),
                          std::to_string(p->major) + "." + std::to_string(p->minor)});
    }
  }
#endif
#ifdef USE_C10D_NCCL
  env.nccl_version = c10d::getNcclVersion();
#endif
  return env;
}

}  // namespace ddpbench
