#pragma once
// Collectives among the ranks of a run, over one c10d::ProcessGroup (the object PyTorch's
// DDP and SyncBatchNorm use): ProcessGroupNCCL for CUDA devices, ProcessGroupGloo for CPUs
// (and for CUDA tensors when asked), joined through the run's TCP store
// (harness/distributed/run_store.hpp). Waits order streams, never the host: on NCCL a wait
// makes the current CUDA stream wait; a dead or frozen peer becomes an error through the
// group's timeout (Gloo's own, or NCCL's watchdog), not through host-blocking waits. Every
// rank publishes its progress through the collectives with each heartbeat, so a collective
// that fails names the ranks that are behind or stopped, and where each is.
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
  // NCCL: where PyTorch's flight recorder dumps each rank's last collectives when one times
  // out (the file prefix, the rank appended); empty: no dump.
  std::string flight_recorder_prefix = {};
};

/// A collective, the rendezvous or a barrier that did not complete. Its message names the
/// phase ("allreduce of bucket 3", "SyncBN backward", "rendezvous") and the ranks that
/// stopped answering, where any did.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// This rank's marks of the collectives it enters and leaves, which its heartbeat publishes
/// as its progress record. Shared with code that launches collectives completed elsewhere
/// (DDP's bucket allreduces), and safe to hold from the backend's threads: it owns no group.
class CollectiveMarks {
 public:
  virtual ~CollectiveMarks() = default;
  /// A collective named `phase` is entered; returns its sequence number. Thread-safe.
  virtual int64_t enter(std::string_view phase) = 0;
  /// The collective with this number has completed on this rank. Thread-safe.
  virtual void leave(int64_t sequence) = 0;
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

  /// Runs `collectives` (waits on this group) as one collective named `phase`: entered and
  /// left in the progress record, its host time counted as blocked, a failure turned into a
  /// CollectiveError naming the ranks to blame. A CollectiveError passes as is.
  void guarded(std::string_view phase, const std::function<void()>& collectives);
  /// The marks of collectives launched here and completed elsewhere (a DDP bucket's
  /// allreduce): enter() when launched, leave() when complete.
  [[nodiscard]] std::shared_ptr<CollectiveMarks> marks() const;
  /// Seconds this rank's host has spent blocked in guarded() collectives so far.
  [[nodiscard]] double blocked_s() const;
  /// The time guarded() collectives took since the last call, where this rank's work runs: on
  /// a CPU the host's blocked time; on a CUDA device the device stream's, between events
  /// recorded around each collective (on NCCL the host does not wait, and with Gloo on CUDA
  /// tensors the host's wait also holds the kernels queued before the collective). The
  /// function gives it once the device has finished those collectives (call it then).
  [[nodiscard]] std::function<double()> take_collective_wait();
  /// Test only (fault injection): `action` runs once, inside the next collective this rank
  /// enters, once its progress record holds it as entered, on the thread that enters it.
  void on_next_collective(std::function<void()> action);
  /// How often each rank publishes its progress record.
  [[nodiscard]] static std::chrono::milliseconds heartbeat_period();
  /// Why `failure` happened in `phase`, as CollectiveError's message says it: the ranks that
  /// stopped answering or are behind (progress, not liveness), each with its phase.
  [[nodiscard]] std::string describe_failure(std::string_view phase, const std::exception& failure) const;

  [[nodiscard]] int64_t rank() const override;
  [[nodiscard]] int64_t world_size() const override;
  [[nodiscard]] std::string backend_name() const;
  /// The network interface Gloo uses (chosen, or GLOO_SOCKET_IFNAME); empty for NCCL.
  [[nodiscard]] std::string network_interface() const;
  /// The process group itself, for c10d's own users (the DDP Reducer, broadcast_coalesced).
  [[nodiscard]] c10::intrusive_ptr<c10d::ProcessGroup> process_group() const;
  /// NCCL: the prefix of the flight recorder's dump files; empty otherwise.
  [[nodiscard]] std::string flight_recorder_prefix() const;

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
