#pragma once
// ResNet as torchvision builds it (v1.5: the stride on the 3x3 convolution), with the same
// module names and state-dict keys (conv1.weight, layer1.0.downsample.1.running_mean, fc.bias)
// and the same initialisation. resnet50: 25,557,032 parameters with 1000 classes.
#include <array>
#include <cstdint>

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "models/sync_batch_norm.hpp"

namespace ddpbench {

class BasicBlockImpl : public torch::nn::Cloneable<BasicBlockImpl> {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  int64_t in_planes, planes, stride;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  SyncBatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

class BottleneckImpl : public torch::nn::Cloneable<BottleneckImpl> {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in_planes, int64_t planes, int64_t stride);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  int64_t in_planes, planes, stride;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  SyncBatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Bottleneck);

enum class ResNetBlock { basic, bottleneck };

struct ResNetOptions {
  ResNetBlock block = ResNetBlock::bottleneck;
  std::array<int64_t, 4> layers = {3, 4, 6, 3};
  int64_t num_classes = 1000;
};

class ResNetImpl : public torch::nn::Cloneable<ResNetImpl> {
 public:
  explicit ResNetImpl(ResNetOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  ResNetOptions options;
  torch::nn::Conv2d conv1{nullptr};
  SyncBatchNorm2d bn1{nullptr};
  std::array<torch::nn::Sequential, 4> layers{torch::nn::Sequential{nullptr}, torch::nn::Sequential{nullptr},
                                              torch::nn::Sequential{nullptr}, torch::nn::Sequential{nullptr}};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

ResNet resnet18(int64_t num_classes);
ResNet resnet50(int64_t num_classes);

}  // namespace ddpbench
