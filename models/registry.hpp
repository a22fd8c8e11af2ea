#pragma once
// The models ddpbench trains, by name. Models are handed around as torch::nn::AnyModule:
// forward(Tensor) -> Tensor, clonable onto other devices, and every norm layer a
// SyncBatchNorm2d that DDP can synchronise.
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <torch/nn/modules/container/any.h>

namespace ddpbench {

struct ModelInfo {
  /// Runs its argument as one part of the caller's work (the caller times it).
  using Section = std::function<void(const std::function<void()>&)>;
  /// LibTorch's torch::nn::parallel::data_parallel over the model, which needs its concrete
  /// type: forward of `input` scattered over `devices`, gathered on the first. Its replicate
  /// (a clone of the whole module onto each device, made on every call) runs inside
  /// `replicating`. On CPU devices chunk and cat stand in for Scatter and Gather, which are
  /// CUDA-only; replicate and parallel_apply are LibTorch's own everywhere.
  using DataParallelForward = std::function<at::Tensor(torch::nn::AnyModule&, const at::Tensor&,
                                                       const std::vector<c10::Device>&, const Section& replicating)>;

  std::string name;
  std::string description;
  std::function<torch::nn::AnyModule(int64_t num_classes)> make;
  DataParallelForward data_parallel;
};

/// A model to build: which, its head, and how its weights and memory are laid out.
struct ModelOptions {
  std::string name = "resnet50";
  int64_t num_classes = 1000;
  std::string init_from;       // weights to start from (models/checkpoint.hpp); empty: fresh init
  bool channels_last = false;  // NHWC parameters
};

std::span<const ModelInfo> model_registry();

/// Throws InputError listing the known models when `name` is not one of them.
const ModelInfo& find_model(std::string_view name);

/// The model `options` names on `device`, in training mode, initialised from the global
/// generator (so the same seed gives the same weights) or from `init_from`.
torch::nn::AnyModule build_model(const ModelOptions& options, const c10::Device& device);

}  // namespace ddpbench
