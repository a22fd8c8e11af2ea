#pragma once
// Model weights as a file of named tensors: a pickled {name: tensor} dict in PyTorch's zip
// format, so Python reads it with torch.load(path) and loads it into torchvision's model
// with load_state_dict; and torch.save(dict(model.state_dict()), path) loads back here (a
// plain dict: LibTorch cannot unpickle the OrderedDict that state_dict() returns).
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

namespace ddpbench {

/// Parameters and buffers by their state-dict names, in the order Python's state_dict() gives.
std::vector<std::pair<std::string, at::Tensor>> state_dict(const torch::nn::Module& module);

/// Writes host copies of the state dict atomically.
void save_checkpoint(const torch::nn::Module& module, const std::filesystem::path& path);

/// The record that marks a checkpoint as --save-checkpoint's, in the archive's folder beside its
/// tensors (torch.load reads past it). The PyTorch twin adds it to its torch.save archive too.
inline constexpr const char* kCheckpointMarkerRecord = "ddpbench_checkpoint";
inline constexpr std::string_view kCheckpointMarkerText = "written by ddpbench --save-checkpoint\n";

/// Whether `path` holds a checkpoint --save-checkpoint wrote (a PyTorch archive holding
/// kCheckpointMarkerRecord): an earlier one, which --save-checkpoint may replace (the output
/// rule, harness/base/output_rule.hpp); any other file, a user's own torch.save archive
/// included, it may not.
bool is_checkpoint_file(const std::filesystem::path& path);

/// Copies a saved state dict into `module`. Throws InputError naming the file when it cannot
/// be read, is not a dict of tensors, or its names or shapes differ from the module's.
void load_checkpoint(torch::nn::Module& module, const std::filesystem::path& path);

}  // namespace ddpbench
