#include "harness/distributed/communicator.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "harness/base/clock.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

class C10dPendingSum final : public PendingSum {
 public:
  C10dPendingSum(c10::intrusive_ptr<c10d::Work> work, bool gpu, std::chrono::milliseconds timeout)
      : work_(std::move(work)), gpu_(gpu), timeout_(timeout), launched_(Clock::now()) {
    if (!gpu_) {
      // Gloo completes on its own threads; the future's callback marks the moment.
      work_->getFuture()->addCallback([state = state_](c10::ivalue::Future&) {
        std::lock_guard lock(state->mutex);
        state->done = Clock::now();
        state->finished = true;
      });
    }
  }

  void wait() override { work_->wait(timeout_); }

  [[nodiscard]] double duration_s() const override {
    if (gpu_) {
      try {
        return static_cast<double>(work_->getDuration()) / 1e3;
      } catch (const std::exception&) {
        return std::numeric_limits<double>::quiet_NaN();
      }
    }
    std::lock_guard lock(state_->mutex);
    if (!state_->finished) return std::numeric_limits<double>::quiet_NaN();
    return std::chrono::duration<double>(state_->done - launched_).count();
  }

 private:
  struct State {
    std::mutex mutex;
    Clock::time_point done;
    bool finished = false;
  };
  c10::intrusive_ptr<c10d::Work> work_;
  bool gpu_;
  std::chrono::milliseconds timeout_;
  Clock::time_point launched_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace

struct Communicator::Impl {
  RankEnvironment rank;
  CommBackend backend = CommBackend::gloo;
  std::chrono::milliseconds timeout{};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> group;
};

CommBackend resolve_backend(CommBackend requested, const c10::Device& device) {
  const CommBackend backend =
      requested != CommBackend::auto_select ? requested : (device.is_cuda() ? CommBackend::nccl : CommBackend::gloo);
  if (backend == CommBackend::nccl && !device.is_cuda()) {
    throw InputError("--backend nccl needs CUDA devices; this run uses " + device.str());
  }
#ifndef USE_C10D_GLOO
  if (backend == CommBackend::gloo) throw InputError("--backend gloo: this build has no Gloo (see README, Gloo)");
#endif
#ifndef USE_C10D_NCCL
  if (backend == CommBackend::nccl) throw InputError("--backend nccl: this build has no NCCL");
#endif
  return backend;
}

Communicator::Communicator(const CommunicatorOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->rank = options.rank;
  impl_->backend = resolve_backend(options.backend, options.device);
  impl_->timeout = options.timeout;
  const RankEnvironment& r = options.rank;

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(r.master_port);
  store_options.isServer = r.rank == 0 && !r.store_served_by_launcher;
  store_options.numWorkers = static_cast<std::size_t>(r.world_size);
  store_options.timeout = options.timeout;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(r.master_addr, store_options);
    impl_->store = c10::make_intrusive<c10d::PrefixStore>("ddpbench/attempt_" + std::to_string(r.restart_count), store);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(r.rank) + " could not join the store at " + r.master_addr + ":" +
                             std::to_string(r.master_port) + ": " + e.what());
  }

  if (impl_->backend == CommBackend::gloo) {
#ifdef USE_C10D_GLOO
    auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (is_loopback(r.master_addr)) {
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(r.rank),
                                                                static_cast<int>(r.world_size), gloo);
#endif
  } else {
#ifdef USE_C10D_NCCL
    c10::cuda::set_device(options.device.index());
    auto nccl = c10d::ProcessGroupNCCL::Options::create();
    nccl->timeout = options.timeout;
    impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, static_cast<int>(r.rank),
                                                                static_cast<int>(r.world_size), nccl);
#endif
  }
  // Every rank leaves the constructor with the group formed, or with an error.
  barrier();
}

Communicator::~Communicator() = default;

void Communicator::sum(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  impl_->group->allreduce(tensors)->wait(impl_->timeout);
}

std::unique_ptr<PendingSum> Communicator::sum_async(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  return std::make_unique<C10dPendingSum>(impl_->group->allreduce(tensors), impl_->backend == CommBackend::nccl,
                                          impl_->timeout);
}

void Communicator::broadcast(at::Tensor& tensor, int64_t root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  impl_->group->broadcast(tensors, options)->wait(impl_->timeout);
}

void Communicator::barrier() { impl_->group->barrier()->wait(impl_->timeout); }

int64_t Communicator::rank() const { return impl_->rank.rank; }
int64_t Communicator::world_size() const { return impl_->rank.world_size; }
std::string Communicator::backend_name() const {
  return std::string(enum_name(kCommBackendNames, impl_->backend));
}

}  // namespace ddpbench
