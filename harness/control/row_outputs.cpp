#include "harness/control/row_outputs.hpp"

#include "reports/result_file.hpp"
#include "reports/trace_merge.hpp"

namespace ddpbench {

std::string trace_file_name(const std::filesystem::path& result_file, int64_t rank) {
  const std::string stem = result_file.extension() == ".json" ? result_file.stem().string() : result_file.filename().string();
  return stem + ".rank" + std::to_string(rank) + ".trace.json";
}

std::vector<CommandOutput> row_outputs(const RunConfig& config, int64_t world, bool traces, const OwnKind& is_checkpoint,
                                       const std::string& who) {
  const auto named = [&who](const std::string& flag, const std::string& as_a_row) {
    return who.empty() ? flag : who + "'s " + as_a_row;
  };
  std::vector<CommandOutput> outputs{
      {named("--out", "result file"), config.out, "a row's result file", own_kind_by_text(is_row_result_document)},
      {named("--save-checkpoint", "--save-checkpoint"), config.save_checkpoint,
       "a checkpoint (PyTorch's zip of named tensors)", is_checkpoint}};
  if (!traces || !trace_step_range(config) || config.out.empty()) return outputs;
  const std::filesystem::path result_file = std::filesystem::absolute(config.out);
  for (int64_t rank = 0; rank < world; ++rank) {
    const std::string name = trace_file_name(result_file, rank);
    const std::string flag = "--trace-steps (rank " + std::to_string(rank) + "'s trace)";
    for (const std::string& file : {name, name + ".gz"}) {
      outputs.push_back({named(flag, flag), result_file.parent_path() / file, "a rank's trace of a traced row",
                         own_kind_by_text(is_rank_trace)});
    }
  }
  return outputs;
}

}  // namespace ddpbench
