#pragma once
// Where a process learns that it is one rank of a distributed run: the variables torchrun
// sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or
// SLURM's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or Open MPI's (OMPI_COMM_WORLD_*).
// No LibTorch: the launcher and its tests use it too.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ddpbench {

struct RankEnvironment {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;  // torchrun's default
  std::string source;           // torchrun | slurm | mpi | self
  // torchrun's agent serves the TCP store itself (TORCHELASTIC_USE_AGENT_STORE=True): then
  // every rank connects as a client, under a prefix per restart (TORCHELASTIC_RESTART_COUNT).
  bool store_served_by_launcher = false;
  int64_t restart_count = 0;
};

using EnvironmentLookup = std::function<const char*(const char*)>;

/// The rank this process is, from the first launcher whose variables are set (torchrun's,
/// then SLURM's, then Open MPI's); nullopt when none are. Throws InputError naming the
/// variable when one is malformed or the set is inconsistent (rank outside the world).
/// MASTER_ADDR and MASTER_PORT, when set, override the defaults under every launcher.
std::optional<RankEnvironment> rank_environment(const EnvironmentLookup& lookup);

/// The same, from this process's environment.
std::optional<RankEnvironment> rank_environment_from_process();

/// Whether `name` is a variable another launcher gives its ranks (SLURM's, Open MPI's, PMI's,
/// torchrun's): ranks that ddpbench starts itself get none of them.
bool is_launcher_variable(std::string_view name);

/// MASTER_PORT's value as a port; throws InputError naming the variable when it is not one.
int64_t master_port_variable(const char* text);

/// Rank `rank` of `world_size` ranks that ddpbench forms on this machine itself (a world of
/// one, or threads in the tests and microbenchmarks), meeting at 127.0.0.1:`master_port`.
RankEnvironment local_rank_environment(int64_t rank, int64_t world_size, int64_t master_port);

}  // namespace ddpbench
