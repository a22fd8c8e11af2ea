#pragma once
// Where a process learns that it is one rank of a distributed run: the variables torchrun
// sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or
// SLURM's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or Open MPI's (OMPI_COMM_WORLD_*).
// Under SLURM without MASTER_ADDR the master is the step's first node, on a port taken from
// the job id (as PyTorch Lightning does); ranks that span nodes with no master to be found are
// bad input at once, never a wait on 127.0.0.1. No LibTorch: the launcher and its tests use it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddpbench {

struct RankEnvironment {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;  // torchrun's default
  std::string source;           // torchrun | slurm | mpi | self
  // Where master_addr and master_port came from, for the log and the errors: "MASTER_ADDR",
  // "the first host of SLURM_STEP_NODELIST=node[1-2]", "the default".
  std::string master_addr_origin = "the default";
  std::string master_port_origin = "the default";
  // The nodes the ranks run on, as the launcher lists them, and how many ranks each holds
  // (SLURM's node list and task layout); empty where the launcher does not say.
  std::vector<std::string> nodes;
  std::vector<int64_t> ranks_per_node;
  int64_t node_count = 1;  // nodes the ranks span (1: they share this machine)
  bool ranks_in_node_order = true;  // SLURM's block distribution: a node's ranks follow the previous node's
  // The run's own name where the launcher gives one ("slurm-<job>.<step>"): its store keys go
  // under it, so that two runs sharing a port can never join each other.
  std::string run_id;
  // torchrun's agent serves the TCP store itself (TORCHELASTIC_USE_AGENT_STORE=True): then
  // every rank connects as a client, under a prefix per restart (TORCHELASTIC_RESTART_COUNT).
  bool store_served_by_launcher = false;
  int64_t restart_count = 0;
};

using EnvironmentLookup = std::function<const char*(const char*)>;

/// The rank this process is, from the first launcher whose variables are set (torchrun's,
/// then SLURM's, then Open MPI's); nullopt when none are. Throws InputError naming the
/// variable when one is malformed or the set is inconsistent (rank outside the world).
/// MASTER_ADDR and MASTER_PORT, when set, override the defaults under every launcher. Under
/// SLURM without them: the first host of SLURM_STEP_NODELIST (else SLURM_NODELIST, else
/// SLURM_JOB_NODELIST) and port 15000 + (37 x SLURM_JOB_ID + SLURM_STEP_ID) % 10000. Ranks
/// that span nodes with no master to be found (MASTER_ADDR unset and no node list, one that
/// cannot be read, or an arbitrary distribution, where rank 0 need not be on the first node)
/// are InputError naming MASTER_ADDR.
std::optional<RankEnvironment> rank_environment(const EnvironmentLookup& lookup);

/// The node rank `rank` runs on, where the launcher's layout says (SLURM's node list and
/// task layout, block distribution); empty where it does not.
std::string node_of_rank(const RankEnvironment& env, int64_t rank);

/// This machine's host name (gethostname), as the errors name a rank's side.
std::string this_host_name();

/// Whether `address` is this machine's loopback (127.x, ::1, localhost).
bool is_loopback_address(std::string_view address);

/// Where the master was found, for a log line: "node1:15123 (address: the first host of
/// SLURM_STEP_NODELIST=node[1-2]; port: SLURM_JOB_ID=5123)".
std::string describe_master(const RankEnvironment& env);

/// The same, from this process's environment.
std::optional<RankEnvironment> rank_environment_from_process();

/// The world a launcher made this process a rank of, as a command that runs once sees it (a
/// sweep, a row's --nproc, a one-process strategy): torchrun's, Open MPI's, or a step srun
/// started; SLURM's batch step (SLURM_NTASKS the allocation's, no step of tasks:
/// SLURM_STEP_NUM_TASKS unset) is none, nor are variables that cannot be read (a command that
/// uses them says so itself). Its world_size may be 1.
std::optional<RankEnvironment> launcher_world_from_process();

/// Whether `name` is a variable another launcher gives its ranks (SLURM's, Open MPI's, PMI's,
/// torchrun's): ranks that ddpbench starts itself get none of them.
bool is_launcher_variable(std::string_view name);

/// MASTER_PORT's value as a port; throws InputError naming the variable when it is not one.
int64_t master_port_variable(const char* text);

/// Rank `rank` of `world_size` ranks that ddpbench forms on this machine itself (a world of
/// one, or threads in the tests and microbenchmarks), meeting at 127.0.0.1:`master_port`.
RankEnvironment local_rank_environment(int64_t rank, int64_t world_size, int64_t master_port);

}  // namespace ddpbench
