#pragma once
// The run's c10d TCP store: where the ranks meet (rank 0 serves it, or the launcher that
// started them, as torchrun's agent does), under one prefix per attempt, and where every rank
// keeps its progress record (harness/launch/rank_progress.hpp) for whoever diagnoses a stall.
// It listens on MASTER_ADDR only, never on every interface: c10d's traffic is
// unauthenticated. The c10d headers stay in the .cpp.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "harness/launch/rank_environment.hpp"
#include "harness/launch/rank_progress.hpp"

namespace c10d {
class Store;
}  // namespace c10d

namespace ddpbench {

/// The keys of one attempt of a run (TORCHELASTIC_RESTART_COUNT), shared by the ranks and
/// the launcher, under the run's own name where the launcher gives one (SLURM's job and step):
/// a rank that reaches another run's store, on a port two runs share, never joins that run.
std::string run_store_prefix(int64_t restart_count, const std::string& run_id = "");
/// Where rank `rank` keeps its progress record, under the run's prefix.
std::string progress_key(int64_t rank);

/// The store as `rank` sees it: rank 0 serves it unless a launcher does; the others connect.
/// Throws std::runtime_error naming the address when it cannot be served or reached.
c10::intrusive_ptr<c10d::Store> open_run_store(const RankEnvironment& rank, std::chrono::milliseconds timeout);

/// Every rank's progress record in `store` (the run's prefixed store; nullopt for a rank
/// that published none).
std::vector<std::optional<RankProgress>> read_progress(c10d::Store& store, int64_t world_size);

/// Whom the progress records in the launcher's store blame, as rank `rank.rank` reads them: twice,
/// `silence` apart, this rank left out of blame for silence (it reads; a PyTorch rank's records are
/// its Python's, which may have ended). nullopt where the launcher serves no store (a rank of
/// another launcher), the store does not answer, or no rank published a record.
std::optional<ProgressVerdict> judge_run_progress(const RankEnvironment& rank, std::chrono::milliseconds silence);

/// The store a launcher serves for the ranks it starts, so that their progress records
/// outlive any of them: the launcher can then name the rank to blame even when the backend
/// aborted the others (NCCL's watchdog).
class LauncherStore {
 public:
  /// Serves on `address`:`port` (0: a free port) for `world_size` ranks.
  LauncherStore(const std::string& address, int64_t port, int64_t world_size);
  ~LauncherStore();
  LauncherStore(const LauncherStore&) = delete;
  LauncherStore& operator=(const LauncherStore&) = delete;

  [[nodiscard]] int64_t port() const;
  /// The ranks' progress records now.
  [[nodiscard]] std::vector<std::optional<RankProgress>> progress() const;
  /// What the ranks need to connect to it (TORCHELASTIC_USE_AGENT_STORE, as under torchrun).
  [[nodiscard]] std::vector<std::string> rank_variables() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddpbench
