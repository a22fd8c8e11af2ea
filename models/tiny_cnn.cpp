#include "models/tiny_cnn.hpp"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>

namespace ddpbench {

namespace F = torch::nn::functional;

TinyCnnImpl::TinyCnnImpl(int64_t num_classes_) : num_classes(num_classes_) { reset(); }

void TinyCnnImpl::reset() {
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).stride(2).padding(1).bias(false)));
  bn1 = register_module("bn1", SyncBatchNorm2d(8));
  conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).stride(2).padding(1).bias(false)));
  bn2 = register_module("bn2", SyncBatchNorm2d(16));
  fc = register_module("fc", torch::nn::Linear(16, num_classes));
}

at::Tensor TinyCnnImpl::forward(const at::Tensor& x) {
  auto out = F::relu(bn1(conv1(x)));
  out = F::relu(bn2(conv2(out)));
  out = F::adaptive_avg_pool2d(out, F::AdaptiveAvgPool2dFuncOptions(1)).flatten(1);
  return fc(out);
}

}  // namespace ddpbench
