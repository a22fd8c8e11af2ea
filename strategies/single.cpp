#include "strategies/single.hpp"

#include <optional>

namespace ddpbench {
namespace {

class SingleStrategy final : public Strategy {
 public:
  void prepare(TrainingSetup& setup) override {
    setup_.emplace(setup);
    parameters_ = setup.model.ptr()->parameters();
  }

  at::Tensor train_step(const Batch& batch) override {
    TrainingSetup& s = *setup_;
    const at::Tensor loss =
        forward_loss(s, batch, [&](const at::Tensor& images) { return s.model.forward<at::Tensor>(images); });
    return backward_and_step(s, loss, parameters_);
  }

  torch::nn::AnyModule eval_model() override { return setup_->model; }

 private:
  std::optional<TrainingSetup> setup_;
  std::vector<at::Tensor> parameters_;
};

}  // namespace

std::unique_ptr<Strategy> make_single_strategy() { return std::make_unique<SingleStrategy>(); }

}  // namespace ddpbench
