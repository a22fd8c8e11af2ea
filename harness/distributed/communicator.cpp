#include "harness/distributed/communicator.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

}  // namespace

struct Communicator::Impl {
  RankEnvironment rank;
  CommBackend backend = CommBackend::gloo;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
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

  impl_->group = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, static_cast<int>(r.rank),
                                                        static_cast<int>(r.world_size));
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
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(r.rank),
                                                               static_cast<int>(r.world_size), gloo);
    // As init_process_group("gloo"): the backend serves CPU tensors, and CUDA tensors too
    // (SyncBatchNorm's CUDA kernels can then be tested with two ranks on one GPU).
    impl_->group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
    impl_->group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, backend);
    impl_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#endif
  } else {
#ifdef USE_C10D_NCCL
    c10::cuda::set_device(options.device.index());
    auto nccl = c10d::ProcessGroupNCCL::Options::create();
    nccl->timeout = options.timeout;
    auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, static_cast<int>(r.rank),
                                                               static_cast<int>(r.world_size), nccl);
    impl_->group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend);
    impl_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#endif
  }
  // Every rank leaves the constructor with the group formed, or with an error.
  barrier();
}

Communicator::~Communicator() = default;

// wait() without a timeout: Gloo's collectives time out on their own (the group's
// timeout), and NCCL's wait then only orders the current stream after the collective,
// leaving a dead peer to the watchdog; wait(timeout) would block the host every time.
void Communicator::sum(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  impl_->group->allreduce(tensors)->wait();
}

void Communicator::broadcast(at::Tensor& tensor, int64_t root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  impl_->group->broadcast(tensors, options)->wait();
}

void Communicator::barrier() { impl_->group->barrier()->wait(); }

c10::intrusive_ptr<c10d::ProcessGroup> Communicator::process_group() const { return impl_->group; }

int64_t Communicator::rank() const { return impl_->rank.rank; }
int64_t Communicator::world_size() const { return impl_->rank.world_size; }
std::string Communicator::backend_name() const {
  return std::string(enum_name(kCommBackendNames, impl_->backend));
}

}  // namespace ddpbench
