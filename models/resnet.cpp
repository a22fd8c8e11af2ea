#include "models/resnet.hpp"

#include <string>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>

namespace ddpbench {
namespace {

namespace F = torch::nn::functional;

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

torch::nn::Sequential make_downsample(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out) return torch::nn::Sequential{nullptr};
  return torch::nn::Sequential(conv(in, out, 1, stride, 0), SyncBatchNorm2d(out));
}

template <class Block>
torch::nn::Sequential make_layer(int64_t& in_planes, int64_t planes, int64_t blocks, int64_t stride) {
  torch::nn::Sequential layer;
  layer->push_back(Block(in_planes, planes, stride));
  in_planes = planes * Block::Impl::kExpansion;
  for (int64_t i = 1; i < blocks; ++i) layer->push_back(Block(in_planes, planes, 1));
  return layer;
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t in_planes_, int64_t planes_, int64_t stride_)
    : in_planes(in_planes_), planes(planes_), stride(stride_) {
  reset();
}

void BasicBlockImpl::reset() {
  conv1 = register_module("conv1", conv(in_planes, planes, 3, stride, 1));
  bn1 = register_module("bn1", SyncBatchNorm2d(planes));
  conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
  bn2 = register_module("bn2", SyncBatchNorm2d(planes));
  downsample = make_downsample(in_planes, planes * kExpansion, stride);
  if (downsample) register_module("downsample", downsample);
}

at::Tensor BasicBlockImpl::forward(const at::Tensor& x) {
  auto out = F::relu(bn1(conv1(x)), F::ReLUFuncOptions().inplace(true));
  out = bn2(conv2(out));
  out += downsample ? downsample->forward(x) : x;
  return F::relu(out, F::ReLUFuncOptions().inplace(true));
}

BottleneckImpl::BottleneckImpl(int64_t in_planes_, int64_t planes_, int64_t stride_)
    : in_planes(in_planes_), planes(planes_), stride(stride_) {
  reset();
}

void BottleneckImpl::reset() {
  conv1 = register_module("conv1", conv(in_planes, planes, 1, 1, 0));
  bn1 = register_module("bn1", SyncBatchNorm2d(planes));
  conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
  bn2 = register_module("bn2", SyncBatchNorm2d(planes));
  conv3 = register_module("conv3", conv(planes, planes * kExpansion, 1, 1, 0));
  bn3 = register_module("bn3", SyncBatchNorm2d(planes * kExpansion));
  downsample = make_downsample(in_planes, planes * kExpansion, stride);
  if (downsample) register_module("downsample", downsample);
}

at::Tensor BottleneckImpl::forward(const at::Tensor& x) {
  auto out = F::relu(bn1(conv1(x)), F::ReLUFuncOptions().inplace(true));
  out = F::relu(bn2(conv2(out)), F::ReLUFuncOptions().inplace(true));
  out = bn3(conv3(out));
  out += downsample ? downsample->forward(x) : x;
  return F::relu(out, F::ReLUFuncOptions().inplace(true));
}

ResNetImpl::ResNetImpl(ResNetOptions options_) : options(options_) { reset(); }

void ResNetImpl::reset() {
  conv1 = register_module("conv1", conv(3, 64, 7, 2, 3));
  bn1 = register_module("bn1", SyncBatchNorm2d(64));
  int64_t in_planes = 64;
  const std::array<int64_t, 4> planes = {64, 128, 256, 512};
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const int64_t stride = i == 0 ? 1 : 2;
    layers[i] = options.block == ResNetBlock::bottleneck
                    ? make_layer<Bottleneck>(in_planes, planes[i], options.layers[i], stride)
                    : make_layer<BasicBlock>(in_planes, planes[i], options.layers[i], stride);
    register_module("layer" + std::to_string(i + 1), layers[i]);
  }
  fc = register_module("fc", torch::nn::Linear(in_planes, options.num_classes));

  // torchvision's init: Kaiming-normal (fan_out, ReLU) convolutions, unit/zero norms
  // (SyncBatchNorm2d starts so), and nn.Linear's own default for the head.
  torch::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    }
  }
}

at::Tensor ResNetImpl::forward(const at::Tensor& x) {
  auto out = F::relu(bn1(conv1(x)), F::ReLUFuncOptions().inplace(true));
  out = F::max_pool2d(out, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
  for (auto& layer : layers) out = layer->forward(out);
  out = F::adaptive_avg_pool2d(out, F::AdaptiveAvgPool2dFuncOptions(1)).flatten(1);
  return fc(out);
}

ResNet resnet18(int64_t num_classes) {
  return ResNet(ResNetOptions{ResNetBlock::basic, {2, 2, 2, 2}, num_classes});
}

ResNet resnet50(int64_t num_classes) {
  return ResNet(ResNetOptions{ResNetBlock::bottleneck, {3, 4, 6, 3}, num_classes});
}

}  // namespace ddpbench
