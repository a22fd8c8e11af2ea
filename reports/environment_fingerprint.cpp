#include "reports/environment_fingerprint.hpp"

#include <algorithm>

namespace ddpbench {
namespace {

std::string shown(const std::string& value) { return value.empty() ? "unknown" : value; }

}  // namespace

std::vector<std::string> environment_differences(const Environment& baseline, const Environment& current) {
  std::vector<std::string> out;
  const auto differ = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(std::string(what) + ": " + shown(a) + " vs " + shown(b));
  };
  if (baseline.gpus.size() != current.gpus.size()) {
    out.push_back("GPU count: " + std::to_string(baseline.gpus.size()) + " vs " + std::to_string(current.gpus.size()));
  }
  for (std::size_t i = 0; i < std::min(baseline.gpus.size(), current.gpus.size()); ++i) {
    differ(("GPU " + std::to_string(i)).c_str(), baseline.gpus[i].name, current.gpus[i].name);
  }
  differ("CPU model", baseline.cpu_model, current.cpu_model);
  if (baseline.cpu_cores != current.cpu_cores) {
    out.push_back("CPU cores: " + std::to_string(baseline.cpu_cores) + " vs " + std::to_string(current.cpu_cores));
  }
  differ("LibTorch", baseline.libtorch_version, current.libtorch_version);
  differ("CUDA", baseline.cuda_runtime_version, current.cuda_runtime_version);
  differ("cuDNN", baseline.cudnn_version, current.cudnn_version);
  differ("NCCL", baseline.nccl_version, current.nccl_version);
  differ("driver", baseline.driver_version, current.driver_version);
  return out;
}

}  // namespace ddpbench
