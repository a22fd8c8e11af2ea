#include "models/registry.hpp"

#include <vector>

#include "harness/input_error.hpp"
#include "models/resnet.hpp"
#include "models/tiny_cnn.hpp"

namespace ddpbench {

std::span<const ModelInfo> model_registry() {
  static const std::vector<ModelInfo> models = {
      {"resnet50", "torchvision resnet50: Bottleneck [3, 4, 6, 3]; the tutorial's model",
       [](int64_t classes) { return torch::nn::AnyModule(resnet50(classes)); }},
      {"resnet18", "torchvision resnet18: BasicBlock [2, 2, 2, 2]",
       [](int64_t classes) { return torch::nn::AnyModule(resnet18(classes)); }},
      {"tiny", "two convolutions with batch norm and a linear head; for tests",
       [](int64_t classes) { return torch::nn::AnyModule(TinyCnn(classes)); }},
  };
  return models;
}

const ModelInfo& find_model(std::string_view name) {
  std::string known;
  for (const auto& model : model_registry()) {
    if (model.name == name) return model;
    known += (known.empty() ? "" : "|") + model.name;
  }
  throw InputError("--model: unknown model '" + std::string(name) + "' (expected " + known + ")");
}

}  // namespace ddpbench
