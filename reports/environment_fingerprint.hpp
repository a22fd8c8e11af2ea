#pragma once
// What makes two result files comparable: the one rule both modes of compare judge environments
// by. The build type, the threads each rank ran with (and OMP_NUM_THREADS), the CPUs it could
// use, the CPU, the GPUs, LibTorch, CUDA, cuDNN, NCCL, the driver and each row's dataset: a
// difference is "cannot judge", naming it, unless --allow-env-mismatch names its aspect. What a
// file's writer did not record yet (OMP_NUM_THREADS, the affinity, the threads per rank, in files
// from before) is compared where both files say it: a build that begins recording it must not
// make every comparison with the builds before it unjudgeable. Host name, OS, compiler and git
// revision are not compared: they change between runs of one gate without changing what is
// measured. No LibTorch.
#include <string>
#include <vector>

#include "reports/run_result.hpp"

namespace ddpbench {

/// One way two results' environments differ: the aspect --allow-env-mismatch names, and the
/// difference in words ("build type: Debug vs Release").
struct EnvironmentDifference {
  std::string aspect;
  std::string text;
};

/// The aspects, as --allow-env-mismatch names them: build-type, threads, cpu-affinity, cpu, gpu,
/// libtorch, cuda, cudnn, nccl, driver, dataset.
const std::vector<std::string>& environment_aspects();
/// --allow-env-mismatch's word for every aspect.
inline constexpr const char* kEveryAspect = "all";

/// Each way `current`'s machine and software differ from `baseline`'s: every aspect but the rows'.
/// Empty when they match.
std::vector<EnvironmentDifference> environment_differences(const Environment& baseline, const Environment& current);

/// Each way the runs of one row (`label`) differ in what they ran with: the threads each rank
/// computed with (where both files recorded them), the dataset. Only runs that finished (ok) count.
std::vector<EnvironmentDifference> row_environment_differences(const std::string& label,
                                                               const std::vector<const RunResult*>& baseline,
                                                               const std::vector<const RunResult*>& current);

/// The differences `allowed` (aspects, or kEveryAspect) does not name, each as the line a verdict's
/// CANNOT JUDGE list prints, saying which --allow-env-mismatch would compare them anyway.
std::vector<std::string> unallowed_differences(const std::vector<EnvironmentDifference>& differences,
                                               const std::vector<std::string>& allowed);

/// Throws InputError for a word of --allow-env-mismatch that is no aspect.
void check_allowed_aspects(const std::vector<std::string>& allowed);

/// A verdict (compare's Comparison, --paired's PairedResult) where the environments differ only
/// as `allowed` names: `judged`, listing them; else one that judged nothing and cannot judge,
/// naming each difference, with the rows the files' proofs failed. Both modes decide so.
template <class Verdict>
Verdict judged_in_one_environment(Verdict judged, const std::vector<EnvironmentDifference>& differences,
                                  const std::vector<std::string>& allowed) {
  std::vector<std::string> unallowed = unallowed_differences(differences, allowed);
  if (unallowed.empty()) {
    for (const auto& d : differences) judged.environment_differences.push_back(d.text);
    return judged;
  }
  Verdict not_judged;
  not_judged.cannot_judge = std::move(unallowed);
  not_judged.failed_by_proof = std::move(judged.failed_by_proof);
  return not_judged;
}

}  // namespace ddpbench
