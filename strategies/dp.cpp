#include "strategies/dp.hpp"

#include <thread>

#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/DeviceGuard.h>
#include <torch/cuda.h>

#include "harness/base/input_error.hpp"
#include "models/layout.hpp"
#include "models/registry.hpp"
#include "strategies/coalesced.hpp"

namespace ddpbench {
namespace {

// One copy per dtype rather than one per tensor.
std::vector<at::Tensor> coalesced_copy(const std::vector<at::Tensor>& tensors, const c10::Device& device) {
  return coalesced(tensors, [&](const at::Tensor& flat) { return flat.to(device, /*non_blocking=*/true); });
}

nlohmann::json device_names(const std::vector<c10::Device>& devices) {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& d : devices) names.push_back(d.str());
  return names;
}

class ReplicasDataParallel final : public Strategy {
 public:
  at::Tensor train_step(const Batch& batch) override {
    const at::Tensor loss = forward_loss(batch, [&](const at::Tensor& images) { return replicated_forward(images); });
    return backward_and_step(loss, [&] { reduce_gradients(); });
  }

  [[nodiscard]] std::vector<c10::Device> devices() const override { return devices_; }

  [[nodiscard]] nlohmann::json details() const override {
    int64_t bytes = 0;
    for (const auto& t : primary_state_) bytes += t.numel() * static_cast<int64_t>(t.element_size());
    return {{"implementation", "replicas"}, {"devices", device_names(devices_)}, {"broadcast_bytes_per_replica", bytes}};
  }

 private:
  void on_prepare() override {
    TrainingSetup& s = setup();
    devices_ = dp_devices(s.options);
    TORCH_CHECK(devices_.front() == s.dist.device, "dp: the model must live on the first device");
    primary_state_ = state_of(*s.model.ptr());
    for (std::size_t i = 1; i < devices_.size(); ++i) {
      replicas_.push_back(s.model.clone(devices_[i]));
      if (s.options.channels_last) to_channels_last(*replicas_.back().ptr());
    }
  }

  // Scatter, replicas forward on their own threads, gather on the first device. A batch
  // smaller than the device count scatters over fewer devices, as PyTorch's scatter does:
  // chunk() then returns fewer chunks, and only their replicas run.
  at::Tensor replicated_forward(const at::Tensor& images) {
    broadcast_state();
    const auto chunks = images.chunk(static_cast<int64_t>(devices_.size()), 0);
    used_devices_ = chunks.size();
    std::vector<at::Tensor> outputs(used_devices_);
    const at::ThreadLocalState state;  // grad mode and autocast, for the replica threads
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(used_devices_);
    for (std::size_t i = 1; i < used_devices_; ++i) {
      threads.emplace_back([&, i] {
        try {
          at::ThreadLocalStateGuard tls(state);
          c10::DeviceGuard device(devices_[i]);
          const auto input = chunks[i].to(devices_[i], /*non_blocking=*/true);
          outputs[i] = replicas_[i - 1].forward<at::Tensor>(input).to(devices_.front());
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
    try {
      outputs[0] = setup().model.forward<at::Tensor>(chunks[0]);
    } catch (...) {
      errors[0] = std::current_exception();  // the threads must be joined before it leaves
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    return at::cat(outputs, 0);
  }

  static std::vector<at::Tensor> state_of(torch::nn::Module& m) {
    auto state = m.parameters();
    for (const auto& b : m.buffers()) state.push_back(b);
    return state;
  }

  void broadcast_state() {
    at::NoGradGuard no_grad;
    for (std::size_t i = 1; i < devices_.size(); ++i) {
      const auto copies = coalesced_copy(primary_state_, devices_[i]);
      const auto targets = state_of(*replicas_[i - 1].ptr());
      for (std::size_t k = 0; k < targets.size(); ++k) targets[k].copy_(copies[k]);
    }
  }

  void reduce_gradients() {
    at::NoGradGuard no_grad;
    for (std::size_t i = 1; i < used_devices_; ++i) {
      std::vector<at::Tensor> grads;
      for (const auto& p : replicas_[i - 1].ptr()->parameters()) grads.push_back(p.grad());
      const auto on_primary = coalesced_copy(grads, devices_.front());
      for (std::size_t k = 0; k < parameters().size(); ++k) parameters()[k].mutable_grad().add_(on_primary[k]);
      for (auto& g : grads) g.zero_();
    }
  }

  std::vector<c10::Device> devices_;
  std::vector<torch::nn::AnyModule> replicas_;  // devices 1..n-1; device 0 runs the model
  std::vector<at::Tensor> primary_state_;
  std::size_t used_devices_ = 0;  // this step's: fewer than devices_ for a small last batch
};

class LibTorchDataParallel final : public Strategy {
 public:
  [[nodiscard]] std::vector<c10::Device> devices() const override { return devices_; }

  at::Tensor train_step(const Batch& batch) override {
    // data_parallel re-makes its replicas on every call: that part of forward is timed apart.
    const ModelInfo::Section replicating = [this](const std::function<void()>& replicate) {
      PhaseScope scope(setup().timer, Phase::replicate);
      replicate();
    };
    const at::Tensor loss = forward_loss(
        batch, [&](const at::Tensor& images) { return forward_(setup().model, images, devices_, replicating); });
    // The replicas' gradients flow back into the module's through LibTorch's grad edges.
    return backward_and_step(loss);
  }

  [[nodiscard]] nlohmann::json details() const override {
    nlohmann::json details = {{"implementation", "libtorch data_parallel"},
                              {"devices", device_names(devices_)},
                              {"note", "clones the module on every forward (the replicate part of forward); replicas' "
                                       "batch-norm statistics are lost"}};
    if (devices_.size() > 1) {
      details["notes"].push_back("LibTorch's parallel_apply runs the replicas' forwards one after another on one "
                                 "thread (at::parallel_for, a header template, is serial in code built without "
                                 "OpenMP, as TorchConfig leaves it): on GPUs only their kernels overlap");
    }
    if (devices_.size() > 1 && devices_.front().is_cpu()) {
      details["notes"].push_back("on CPU devices chunk and cat stand in for data_parallel's Scatter and Gather, which "
                                 "are CUDA-only; replicate and parallel_apply are LibTorch's own");
    }
    return details;
  }

 private:
  void on_prepare() override {
    devices_ = dp_devices(setup().options);
    forward_ = find_model(setup().options.model).data_parallel;
  }

  std::vector<c10::Device> devices_;
  ModelInfo::DataParallelForward forward_;
};

}  // namespace

std::vector<c10::Device> dp_devices(const StrategyOptions& options) {
  const std::vector<int64_t>& listed = options.devices;
  const int64_t visible = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  std::vector<c10::Device> devices;
  if (listed.empty()) {
    for (int64_t i = 0; i < visible; ++i) devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
    return devices;
  }
  for (int64_t d : listed) {
    if (d < 0) {
      devices.emplace_back(c10::kCPU);
      continue;
    }
    if (d >= visible) {
      throw InputError("--devices " + options.devices_flag + ": cuda:" + std::to_string(d) + " is not visible (" +
                       std::to_string(visible) + " CUDA devices)");
    }
    devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(d));
  }
  return devices;
}

std::optional<std::string> dp_preflight(const StrategyOptions& options) {
  const auto devices = dp_devices(options);
  if (devices.empty()) return "needs CUDA devices (none visible); --devices cpu,cpu runs it on CPU replicas";
  if (devices.size() < 2 && !options.allow_single_device) {
    return "needs at least 2 devices, " + std::to_string(devices.size()) +
           " available (--allow-single-device runs it on one)";
  }
  if (options.batch_size % static_cast<int64_t>(devices.size()) != 0) {
    throw InputError("--batch-size " + std::to_string(options.batch_size) + " does not divide over " +
                     std::to_string(devices.size()) + " dp devices");
  }
  return std::nullopt;
}

std::optional<std::string> torch_dp_preflight(const StrategyOptions& options) {
  const auto devices = dp_devices(options);
  if (!devices.empty() && devices.front().is_cpu()) {
    return "torch.nn.DataParallel scatters over CUDA devices only (--devices " + options.devices_flag + ")";
  }
  return dp_preflight(options);
}

std::optional<std::string> torch_ddp_preflight(const StrategyOptions& options) {
  const bool cpu = options.device == "cpu" || (options.device == "auto" && !torch::cuda::is_available());
  if (cpu && options.sync_bn) {
    return "PyTorch's SyncBatchNorm runs on CUDA only, so PyTorch cannot run this row on CPUs (--no-sync-bn "
           "compares both sides without it)";
  }
  return std::nullopt;
}

std::unique_ptr<Strategy> make_dp_strategy(const StrategyOptions& options) {
  // The implementation is an option of the row; the registry names one strategy.
  if (options.dp_impl == DpImpl::libtorch) return std::make_unique<LibTorchDataParallel>();
  return std::make_unique<ReplicasDataParallel>();
}

}  // namespace ddpbench
