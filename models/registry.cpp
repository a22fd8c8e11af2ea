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

// ddpbench's code is compiled without OpenMP, as TorchConfig leaves a LibTorch user: the
// at::parallel_for inside parallel_apply (a header template) then runs the replicas one after
// another on the caller's thread, which keeps autocast. With OpenMP it would run them on
// worker threads that start without autocast (fp32 replicas under --amp): refuse to build so.
#ifdef _OPENMP
#error "models/registry.cpp must be compiled without OpenMP: see the comment above (tests/strategies/test_dp.cpp)"
#endif

// torch::nn::parallel::data_parallel(module, input, devices, devices.front(), 0), its steps
// taken one by one as data_parallel.h (2.11) takes them, so that replicate can be timed apart.
template <class Impl>
at::Tensor libtorch_data_parallel(torch::nn::AnyModule& model, const at::Tensor& input,
                                  const std::vector<c10::Device>& devices, const ModelInfo::Section& replicating) {
  const std::shared_ptr<Impl> module = model.ptr<Impl>();
  const c10::Device output_device = devices.front();
  if (devices.size() == 1) {
    module->to(output_device);
    return module->forward(input.to(output_device)).to(output_device);
  }
  const bool on_cpus = output_device.is_cpu();
  std::vector<at::Tensor> inputs =
      on_cpus ? input.chunk(static_cast<int64_t>(devices.size()), 0)
              : torch::fmap<at::Tensor>(torch::autograd::Scatter(devices, std::nullopt, 0).apply({input}));
  // A batch smaller than the device count scatters over fewer devices.
  const std::vector<c10::Device> used(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(inputs.size()));
  std::vector<std::shared_ptr<Impl>> replicas;
  replicating([&] { replicas = torch::nn::parallel::replicate(module, used); });
  auto outputs = torch::nn::parallel::parallel_apply(replicas, inputs, used);
  if (on_cpus) return at::cat(outputs, 0);
  return torch::autograd::Gather(output_device, 0)
      .apply(torch::fmap<torch::autograd::Variable>(std::move(outputs)))
      .front();
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
