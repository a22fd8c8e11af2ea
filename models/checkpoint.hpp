#pragma once
// Model weights as a file of named tensors: a pickled {name: tensor} dict in PyTorch's zip
// format, so Python reads it with torch.load(path) and loads it into torchvision's model
// with load_state_dict; and torch.save(dict(model.state_dict()), path) loads back here (a
// plain dict: LibTorch cannot unpickle the OrderedDict that state_dict() returns).
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

namespace ddpbench {

/// Parameters and buffers by their state-dict names, in the order Python's state_dict() gives.
std::vector<std::pair<std::string, at::Tensor>> state_dict(const torch::nn::Module& module);

/// Writes host copies of the state dict atomically.
void save_checkpoint(const torch::nn::Module& module, const std::filesystem::path& path);

/// Whether `path` holds a PyTorch archive (a zip whose first entry is, in the archive's folder,
/// its pickle "data.pkl" or a tensor "data/N"), as torch.save and save_checkpoint write: an
/// earlier checkpoint, which --save-checkpoint may replace (the output rule,
/// harness/base/output_rule.hpp); any other file it may not.
bool is_checkpoint_file(const std::filesystem::path& path);

/// Copies a saved state dict into `module`. Throws InputError naming the file when it cannot
/// be read, is not a dict of tensors, or its names or shapes differ from the module's.
void load_checkpoint(torch::nn::Module& module, const std::filesystem::path& path);

}  // namespace ddpbench
