#pragma once
// Every file a row's run writes, in one list that `run` and `sweep` both check by the output rule
// (harness/base/output_rule.hpp) before any work: its result file, its checkpoint, and where it
// traces, each rank's trace under either name it may take. No LibTorch.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/base/output_rule.hpp"
#include "harness/control/run_config.hpp"

namespace ddpbench {

/// Rank `rank`'s trace beside `result_file` (ROW.json: ROW.rank<N>.trace.json, before any gzip):
/// named after the result file, so that rows and repetitions sharing a folder keep their own.
std::string trace_file_name(const std::filesystem::path& result_file, int64_t rank);

/// The outputs of a row run as `config` says, over `world` ranks: --out, --save-checkpoint (an
/// earlier one recognised by `is_checkpoint`, LibTorch's side's) and, where `traces` (the ranks
/// write beside --out) and --trace-steps is set, each rank's trace, plain and gzipped. Named as
/// `run` names its flags where `who` is empty, else "WHO's result file", "WHO's --save-checkpoint".
std::vector<CommandOutput> row_outputs(const RunConfig& config, int64_t world, bool traces, const OwnKind& is_checkpoint,
                                       const std::string& who = "");

/// The synthetic set's cache files a row of `config` reads its data through (none where it reads
/// CIFAR-10 or keeps the set in memory): outputs of the row, which no input may be (a sweep file
/// or a checkpoint put there was overwritten by the generated set). Rows of one sweep share them.
std::vector<CommandOutput> synthetic_cache_outputs(const RunConfig& config);

}  // namespace ddpbench
