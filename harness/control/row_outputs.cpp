#include "harness/control/row_outputs.hpp"

#include "data/cifar10_files.hpp"
#include "data/synthetic_cache_files.hpp"
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

std::vector<CommandOutput> synthetic_cache_outputs(const RunConfig& config) {
  const std::string cache_dir = resolved_cache_dir(config);
  const bool cifar10 = config.dataset == DatasetKind::cifar10 ||
                       (config.dataset == DatasetKind::auto_detect && !find_cifar10(config.data_dir).empty());
  if (cifar10 || cache_dir.empty()) return {};
  const auto folder =
      synthetic_cache_folder(cache_dir, config.seed, config.synthetic_train_images, config.synthetic_test_images);
  std::vector<CommandOutput> outputs;
  for (const char* file : kSyntheticCacheFiles) {
    // The cache's folder is its own: whatever lies at its names is its to replace (a damaged file
    // is regenerated, never trained on).
    outputs.push_back({"the synthetic cache's " + std::string(file), folder / file, "the synthetic set's cache",
                       [](const std::filesystem::path&) { return true; }});
  }
  return outputs;
}

}  // namespace ddpbench
