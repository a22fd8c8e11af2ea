#pragma once
// Collectives among the ranks of a run, over one c10d::ProcessGroup (the object PyTorch's
// DDP and SyncBatchNorm use): ProcessGroupNCCL for CUDA devices, ProcessGroupGloo for CPUs
// (and for CUDA tensors when asked), joined through a TCPStore at MASTER_ADDR:MASTER_PORT.
// Waits order streams, never the host: on NCCL a wait makes the current CUDA stream wait;
// a dead or frozen peer becomes an error through the group's timeout (Gloo's own, or
// NCCL's watchdog), not through host-blocking waits. Every rank beats a heartbeat into the
// store, so a collective that fails names its phase and the ranks that stopped answering.
// The c10d headers stay in the .cpp.
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include "harness/distributed/comm_backend.hpp"
#include "harness/distributed/cross_process_sum.hpp"
#include "harness/launch/rank_environment.hpp"

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace ddpbench {

struct CommunicatorOptions {
  RankEnvironment rank;
  CommBackend backend = CommBackend::auto_select;  // auto: NCCL on CUDA, Gloo on CPU
  c10::Device device = c10::Device(c10::kCPU);
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

/// A collective, the rendezvous or a barrier that did not complete. Its message names the
/// phase ("allreduce of bucket 3", "SyncBN backward", "rendezvous") and the ranks that
/// stopped answering, where any did.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator final : public CrossProcessSum {
 public:
  /// Joins the group: rank 0 serves the store (listening on MASTER_ADDR only: loopback
  /// unless told otherwise), the others connect to it, all within the timeout. Throws
  /// CollectiveError (phase "rendezvous", naming ranks that never joined) when it cannot form.
  explicit Communicator(const CommunicatorOptions& options);
  ~Communicator() override;

  /// In place; Gloo returns when the sum is done, NCCL once the current stream waits for it.
  void sum(at::Tensor& tensor, std::string_view phase) override;
  void broadcast(at::Tensor& tensor, int64_t root);
  void barrier();

  /// Runs `collectives` (waits on this group) as `phase`: a failure becomes a CollectiveError
  /// naming the phase and the ranks that stopped answering. A CollectiveError passes as is.
  void guarded(std::string_view phase, const std::function<void()>& collectives);
  /// Why `failure` happened in `phase`, as CollectiveError's message says it.
  [[nodiscard]] std::string describe_failure(std::string_view phase, const std::exception& failure) const;

  [[nodiscard]] int64_t rank() const override;
  [[nodiscard]] int64_t world_size() const override;
  [[nodiscard]] std::string backend_name() const;
  /// The network interface Gloo uses (chosen, or GLOO_SOCKET_IFNAME); empty for NCCL.
  [[nodiscard]] std::string network_interface() const;
  /// The process group itself, for c10d's own users (the DDP Reducer, broadcast_coalesced).
  [[nodiscard]] c10::intrusive_ptr<c10d::ProcessGroup> process_group() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// auto resolved for `device`; throws InputError for NCCL without a CUDA device or Gloo
/// missing from this build.
CommBackend resolve_backend(CommBackend requested, const c10::Device& device);

/// The network interface that routes to `address` (its name, as `ip` shows it); empty
/// when the address does not resolve or routes nowhere.
std::string interface_towards(const std::string& address);

}  // namespace ddpbench
