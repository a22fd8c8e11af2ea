#include "strategies/single.hpp"

namespace ddpbench {
namespace {

class SingleStrategy final : public Strategy {
 public:
  at::Tensor train_step(const Batch& batch) override {
    return backward_and_step(
        forward_loss(batch, [&](const at::Tensor& images) { return setup().model.forward<at::Tensor>(images); }));
  }
};

}  // namespace

std::unique_ptr<Strategy> make_single_strategy(const StrategyOptions& /*options*/) {
  return std::make_unique<SingleStrategy>();
}

}  // namespace ddpbench
