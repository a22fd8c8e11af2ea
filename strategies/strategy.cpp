#include "strategies/strategy.hpp"

#include <torch/nn/functional/loss.h>

namespace ddpbench {

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

at::Tensor forward_loss(TrainingSetup& setup, const Batch& batch,
                        const std::function<at::Tensor(const at::Tensor& images)>& forward) {
  PhaseScope phase(setup.timer, Phase::forward);
  setup.optimizer.zero_grad();
  auto autocast = setup.precision.autocast();
  return classification_loss(forward(batch.images), batch.labels);
}

at::Tensor backward_and_step(TrainingSetup& setup, const at::Tensor& loss, const std::vector<at::Tensor>& parameters,
                             const std::function<void()>& communicate) {
  {
    PhaseScope phase(setup.timer, Phase::backward);
    setup.precision.scale(loss).backward();
  }
  if (communicate) {
    PhaseScope phase(setup.timer, Phase::comm);
    communicate();
  }
  {
    // Under DDP the gradients were averaged above, so unscaling sees the same values on every
    // rank and all agree on skipping a step with inf/NaN.
    PhaseScope phase(setup.timer, Phase::optimizer);
    setup.precision.step(setup.optimizer, parameters);
  }
  return loss.detach();
}

}  // namespace ddpbench
