#include "models/flop_count.hpp"

#include <cstring>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

namespace ddpbench {
namespace {

// RecordFunction callbacks are plain functions: the count lives here, for the one thread
// that counts.
thread_local double counted_flops = 0;
thread_local int counted_depth = 0;

bool is_counted(const char* name) {
  for (const char* op : {"aten::convolution", "aten::addmm", "aten::mm", "aten::bmm"}) {
    if (std::strcmp(name, op) == 0) return true;
  }
  return false;
}

// What the start of a counted op knows (its inputs are only valid then): the multiply-adds
// per output element.
struct CountedOp : at::ObserverContext {
  double macs_per_output = 0;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!is_counted(fn.name())) return nullptr;
  auto op = std::make_unique<CountedOp>();
  if (++counted_depth == 1) {
    const auto inputs = fn.inputs();
    if (std::strcmp(fn.name(), "aten::convolution") == 0) {
      const at::Tensor weight = inputs[1].toTensor();  // [out, in / groups, kh, kw]
      op->macs_per_output = static_cast<double>(weight.numel() / weight.size(0));
    } else {
      // addmm(bias, a, b), mm(a, b), bmm(a, b): a's last dimension is contracted.
      const at::Tensor a = inputs[std::strcmp(fn.name(), "aten::addmm") == 0 ? 1 : 0].toTensor();
      op->macs_per_output = static_cast<double>(a.size(-1));
    }
  }
  return op;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (!is_counted(fn.name())) return;
  const auto* op = static_cast<CountedOp*>(context);
  const auto& outputs = fn.outputs();
  if (--counted_depth == 0 && op != nullptr && !outputs.empty() && outputs.front().isTensor()) {
    counted_flops += 2.0 * static_cast<double>(outputs.front().toTensor().numel()) * op->macs_per_output;
  }
}

}  // namespace

double forward_flops_per_image(const ModelOptions& options, int64_t image_side) {
  ModelOptions counted = options;
  counted.init_from.clear();  // shapes only: the weights do not change the count
  torch::nn::AnyModule model = build_model(counted, c10::Device(c10::kCPU));
  model.ptr()->eval();
  const at::NoGradGuard no_grad;
  counted_flops = 0;
  counted_depth = 0;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_start, on_end).needsInputs(true).needsOutputs(true));
  try {
    model.forward<at::Tensor>(at::zeros({1, 3, image_side, image_side}));
  } catch (...) {
    at::removeCallback(handle);
    throw;
  }
  at::removeCallback(handle);
  return counted_flops;
}

double train_flops_per_image(const ModelOptions& options, int64_t image_side) {
  return 3.0 * forward_flops_per_image(options, image_side);
}

}  // namespace ddpbench
