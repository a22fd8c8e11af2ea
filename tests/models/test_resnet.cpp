#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>

#include "models/checkpoint.hpp"
#include "models/registry.hpp"
#include "models/resnet.hpp"

namespace ddpbench {
namespace {

int64_t parameter_count(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(ResNet, ParameterCountsMatchTorchvision) {
  EXPECT_EQ(parameter_count(*resnet50(1000)), 25557032);
  EXPECT_EQ(parameter_count(*resnet50(10)), 23528522);
  EXPECT_EQ(parameter_count(*resnet18(1000)), 11689512);
}

TEST(ResNet, StateDictNamesAndShapesMatchTorchvision) {
  const auto model = resnet50(1000);
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<std::string> order;
  for (const auto& [name, t] : state_dict(*model)) {
    shapes[name] = t.sizes().vec();
    order.push_back(name);
  }
  // torchvision's resnet50().state_dict() holds 320 entries: 161 parameters, 159 buffers.
  EXPECT_EQ(shapes.size(), 320u);
  EXPECT_EQ(shapes["conv1.weight"], (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(shapes["bn1.running_mean"], (std::vector<int64_t>{64}));
  EXPECT_EQ(shapes["bn1.num_batches_tracked"], (std::vector<int64_t>{}));
  EXPECT_EQ(shapes["layer1.0.conv2.weight"], (std::vector<int64_t>{64, 64, 3, 3}));
  EXPECT_EQ(shapes["layer1.0.downsample.0.weight"], (std::vector<int64_t>{256, 64, 1, 1}));
  EXPECT_EQ(shapes["layer1.0.downsample.1.running_var"], (std::vector<int64_t>{256}));
  EXPECT_EQ(shapes["layer2.0.conv2.weight"], (std::vector<int64_t>{128, 128, 3, 3}));
  EXPECT_EQ(shapes["layer3.5.bn3.weight"], (std::vector<int64_t>{1024}));
  EXPECT_EQ(shapes["layer4.2.conv3.weight"], (std::vector<int64_t>{2048, 512, 1, 1}));
  EXPECT_EQ(shapes["fc.weight"], (std::vector<int64_t>{1000, 2048}));
  EXPECT_EQ(shapes["fc.bias"], (std::vector<int64_t>{1000}));
  EXPECT_EQ(shapes.count("layer1.1.downsample.0.weight"), 0u);
  EXPECT_EQ(shapes.count("layer3.6.conv1.weight"), 0u);
  EXPECT_EQ(order.front(), "conv1.weight");
  EXPECT_EQ(order[1], "bn1.weight");
  EXPECT_EQ(order[3], "bn1.running_mean");  // torchvision interleaves each module's buffers
  EXPECT_EQ(order.back(), "fc.bias");
}

TEST(ResNet, StrideSitsOnTheThreeByThreeConvolution) {
  const auto model = resnet50(10);
  const auto& block = model->layers[1]->ptr(0)->as<BottleneckImpl>();
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(block->conv1->options.stride()->at(0), 1);
  EXPECT_EQ(block->conv2->options.stride()->at(0), 2);
}

TEST(ResNet, ForwardOnCifarImages) {
  auto model = resnet18(10);
  const auto out = model->forward(at::randn({2, 3, 32, 32}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_TRUE(at::isfinite(out).all().item<bool>());
}

TEST(ResNet, InitialisationIsTorchvisions) {
  const auto model = resnet50(1000);
  // Kaiming normal, fan_out, ReLU gain: std = sqrt(2 / (out_channels * k * k)).
  const auto& w = model->layers[3]->ptr(0)->as<BottleneckImpl>()->conv2->weight;  // 512x512x3x3
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / (512 * 9)), 0.002);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.001);
  EXPECT_TRUE(at::equal(model->bn1->weight, at::ones({64})));
  EXPECT_TRUE(at::equal(model->bn1->bias, at::zeros({64})));
  // nn.Linear's default: uniform within 1/sqrt(fan_in) = 1/sqrt(2048).
  EXPECT_LE(model->fc->weight.abs().max().item<double>(), 1.0 / std::sqrt(2048.0));
  EXPECT_GT(model->fc->weight.abs().max().item<double>(), 0.9 / std::sqrt(2048.0));
}

TEST(ResNet, NormLayersBehaveAsBatchNorm2dWhenLocal) {
  torch::manual_seed(0);
  SyncBatchNorm2d ours(6);
  torch::nn::BatchNorm2d reference(6);
  const auto x = torch::randn({4, 6, 5, 5}, torch::requires_grad());
  const auto y = ours(x);
  const auto expected = reference(x);
  EXPECT_TRUE(at::allclose(y, expected, 1e-6, 1e-6));
  const auto g = at::randn_like(y);
  const auto grads = torch::autograd::grad({y}, {x, ours->weight}, {g});
  const auto expected_grads = torch::autograd::grad({expected}, {x, reference->weight}, {g});
  EXPECT_TRUE(at::allclose(grads[0], expected_grads[0], 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(grads[1], expected_grads[1], 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(ours->running_var, reference->running_var));
  EXPECT_EQ(ours->num_batches_tracked.item<int64_t>(), 1);
  ours->eval();
  reference->eval();
  EXPECT_TRUE(at::allclose(ours(x), reference(x), 1e-6, 1e-6));
}

TEST(ModelRegistry, KnowsTheModelsAndRejectsOthers) {
  for (const char* name : {"resnet50", "resnet18", "tiny"}) {
    auto model = find_model(name).make(10);
    EXPECT_EQ(model.forward<at::Tensor>(at::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10})) << name;
  }
  try {
    find_model("vgg16");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), "--model: unknown model 'vgg16' (expected resnet50|resnet18|tiny)");
  }
}

TEST(ModelRegistry, ClonesAreIndependentCopies) {
  auto model = find_model("tiny").make(10);
  auto copy = model.clone();
  const auto first = model.ptr()->parameters()[0];
  const auto copied = copy.ptr()->parameters()[0];
  EXPECT_TRUE(at::equal(first, copied));
  copied.data().add_(1);
  EXPECT_FALSE(at::equal(first, copied));
}

}  // namespace
}  // namespace ddpbench
