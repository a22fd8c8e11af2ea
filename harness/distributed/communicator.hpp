#pragma once
// Collectives among the ranks of a run, over c10d: ProcessGroupNCCL for CUDA devices,
// ProcessGroupGloo for CPUs, both joined through a TCPStore at MASTER_ADDR:MASTER_PORT.
// The c10d headers stay in communicator.cpp.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "harness/distributed/comm_backend.hpp"
#include "harness/distributed/cross_process_sum.hpp"
#include "harness/launch/rank_environment.hpp"

namespace ddpbench {

/// An allreduce in flight.
class PendingSum {
 public:
  virtual ~PendingSum() = default;
  /// Gloo: blocks until the sum is done. NCCL: makes the current CUDA stream wait for it.
  /// Throws when a peer is gone or the collective times out.
  virtual void wait() = 0;
  /// Seconds the collective took, once it is done (Gloo: launch to completion, measured on
  /// the host; NCCL: its GPU time when TORCH_NCCL_ENABLE_TIMING is on); NaN if unknown.
  [[nodiscard]] virtual double duration_s() const = 0;
};

struct CommunicatorOptions {
  RankEnvironment rank;
  CommBackend backend = CommBackend::auto_select;  // auto: NCCL on CUDA, Gloo on CPU
  c10::Device device = c10::Device(c10::kCPU);
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

class Communicator final : public CrossProcessSum {
 public:
  /// Joins the group: rank 0 serves the store, the others connect to it, all within the
  /// timeout. Throws (naming the address) when the group cannot form.
  explicit Communicator(const CommunicatorOptions& options);
  ~Communicator() override;

  void sum(at::Tensor& tensor) override;
  std::unique_ptr<PendingSum> sum_async(at::Tensor& tensor);
  void broadcast(at::Tensor& tensor, int64_t root);
  void barrier();

  [[nodiscard]] int64_t rank() const override;
  [[nodiscard]] int64_t world_size() const override;
  [[nodiscard]] std::string backend_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// auto resolved for `device`; throws InputError for NCCL without a CUDA device or Gloo
/// missing from this build.
CommBackend resolve_backend(CommBackend requested, const c10::Device& device);

}  // namespace ddpbench
