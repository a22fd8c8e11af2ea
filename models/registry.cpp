#include "models/registry.hpp"

#include <vector>

#include <torch/nn/parallel/data_parallel.h>

#include "harness/base/enum_names.hpp"
#include "models/checkpoint.hpp"
#include "models/layout.hpp"
#include "models/resnet.hpp"
#include "models/tiny_cnn.hpp"

namespace ddpbench {

namespace {

template <class Impl>
at::Tensor libtorch_data_parallel(torch::nn::AnyModule& model, const at::Tensor& input,
                                  const std::vector<c10::Device>& devices) {
  return torch::nn::parallel::data_parallel(model.ptr<Impl>(), input, devices, devices.front(), 0);
}

}  // namespace

std::span<const ModelInfo> model_registry() {
  static const std::vector<ModelInfo> models = {
      {"resnet50", "torchvision resnet50: Bottleneck [3, 4, 6, 3]; the tutorial's model",
       [](int64_t classes) { return torch::nn::AnyModule(resnet50(classes)); }, libtorch_data_parallel<ResNetImpl>},
      {"resnet18", "torchvision resnet18: BasicBlock [2, 2, 2, 2]",
       [](int64_t classes) { return torch::nn::AnyModule(resnet18(classes)); }, libtorch_data_parallel<ResNetImpl>},
      {"tiny", "two convolutions with batch norm and a linear head; for tests",
       [](int64_t classes) { return torch::nn::AnyModule(TinyCnn(classes)); }, libtorch_data_parallel<TinyCnnImpl>},
  };
  return models;
}

const ModelInfo& find_model(std::string_view name) { return find_named(model_registry(), name, "--model", "model"); }

torch::nn::AnyModule build_model(const ModelOptions& options, const c10::Device& device) {
  torch::nn::AnyModule model = find_model(options.name).make(options.num_classes);
  if (!options.init_from.empty()) load_checkpoint(*model.ptr(), options.init_from);
  model.ptr()->to(device);
  if (options.channels_last) to_channels_last(*model.ptr());
  model.ptr()->train();
  return model;
}

}  // namespace ddpbench
