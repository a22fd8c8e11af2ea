#include "strategies/strategy.hpp"

#include "harness/distributed/communicator.hpp"

#include <torch/nn/functional/loss.h>

namespace ddpbench {

void Strategy::prepare(TrainingSetup& setup) {
  setup_.emplace(setup);
  parameters_ = setup.model.ptr()->parameters();
  on_prepare();
}

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

at::Tensor Strategy::forward_loss(const Batch& batch, const std::function<at::Tensor(const at::Tensor& images)>& forward) {
  TrainingSetup& s = setup();
  PhaseScope phase(s.timer, Phase::forward);
  // As Python's optimizer.zero_grad() (set_to_none): LibTorch's detaches the gradient first,
  // which DDP's gradient_as_bucket_view forbids (the gradients are views of its buckets).
  for (const auto& p : parameters_) p.mutable_grad().reset();
  auto autocast = s.precision.autocast();
  at::Tensor loss = classification_loss(forward(batch.images), batch.labels);
  if (s.slow_down) s.slow_down(Phase::forward);
  // The collectives inside forward (SyncBatchNorm's, the buffers' broadcast), told apart from
  // those inside backward: the models take each out of its own phase's compute. The runner
  // takes the rest after the step.
  if (s.dist.comm) {
    s.timer.add([wait = s.dist.comm->take_collective_wait()](PhaseSeconds& phases) {
      const double seconds = wait();
      phases.collective_wait_s += seconds;
      phases.forward_collective_wait_s += seconds;
    });
  }
  return loss;
}

at::Tensor Strategy::backward_and_step(const at::Tensor& loss, const std::function<void()>& communicate) {
  TrainingSetup& s = setup();
  {
    PhaseScope phase(s.timer, Phase::backward);
    const at::Tensor scaled = s.precision.scale(loss);
    // The loss's gradient is backward's first: work there delays every gradient, as a slower rank's would.
    if (s.slow_down) scaled.register_hook([&s](const at::Tensor&) { s.slow_down(Phase::backward); });
    scaled.backward();
  }
  if (communicate) {
    PhaseScope phase(s.timer, Phase::comm);
    communicate();
  }
  {
    // Under DDP the gradients were averaged above, so unscaling sees the same values on every
    // rank and all agree on skipping a step with inf/NaN.
    PhaseScope phase(s.timer, Phase::optimizer);
    s.precision.step(s.optimizer, parameters_);
  }
  return loss.detach();
}

}  // namespace ddpbench
