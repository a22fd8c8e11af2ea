#include "strategies/ddp.hpp"

#include <optional>

#include <ATen/ATen.h>

#include "harness/distributed/communicator.hpp"
#include "models/checkpoint.hpp"
#include "models/sync_batch_norm.hpp"
#include "strategies/coalesced.hpp"
#include "strategies/gradient_reducer.hpp"

namespace ddpbench {
namespace {

std::vector<at::Tensor> buffers_of(torch::nn::Module& module) { return module.buffers(/*recurse=*/true); }

class DdpStrategy final : public Strategy {
 public:
  at::Tensor train_step(const Batch& batch) override {
    TrainingSetup& s = setup();
    const at::Tensor loss = forward_loss(batch, [&](const at::Tensor& images) {
      broadcast_from_rank0(*comm_, buffers_of(*s.model.ptr()));
      return s.model.forward<at::Tensor>(images);
    });
    reducer_->prepare_for_backward(s.timer.step());
    return backward_and_step(loss, [&] {
      reducer_->finish();
      s.timer.add(Phase::allreduce, reducer_->last_allreduce_s());
    });
  }

  [[nodiscard]] nlohmann::json details() const override {
    return {{"implementation", "ddpbench GradientReducer over c10d"},
            {"backend", comm_->backend_name()},
            {"overlap", setup().options.overlap},
            {"sync_bn_layers", sync_bn_layers_},
            {"broadcast_buffers", true},
            {"buckets", reducer_->bucket_count()},
            {"bucket_bytes", reducer_->bucket_sizes_bytes()},
            {"gradient_bytes_per_step", reducer_->gradient_bytes()}};
  }

 private:
  void on_prepare() override {
    TrainingSetup& s = setup();
    comm_ = s.dist.comm;
    TORCH_CHECK(comm_ != nullptr, "ddp: no communicator (the run command creates one for every rank)");
    torch::nn::Module& module = *s.model.ptr();
    if (s.options.sync_bn) sync_bn_layers_ = convert_sync_batch_norm(module, comm_);
    std::vector<at::Tensor> state;
    for (const auto& [name, tensor] : state_dict(module)) state.push_back(tensor);
    broadcast_from_rank0(*comm_, state);
    ReducerOptions options;
    options.bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(s.options.bucket_mb * (1 << 20)));
    options.overlap = s.options.overlap;
    reducer_ = std::make_unique<GradientReducer>(parameters(), comm_, options);
  }

  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<GradientReducer> reducer_;
  int64_t sync_bn_layers_ = 0;
};

}  // namespace

void broadcast_from_rank0(Communicator& comm, const std::vector<at::Tensor>& tensors) {
  if (comm.world_size() == 1 || tensors.empty()) return;
  at::NoGradGuard no_grad;
  const auto received = coalesced(tensors, [&](at::Tensor flat) {
    comm.broadcast(flat, 0);
    return flat;
  });
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(received[i]);
}

std::unique_ptr<Strategy> make_ddp_strategy(const StrategyOptions& /*options*/) {
  return std::make_unique<DdpStrategy>();
}

}  // namespace ddpbench
