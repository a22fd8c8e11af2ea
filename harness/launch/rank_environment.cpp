#include "harness/launch/rank_environment.hpp"

#include <cstdlib>
#include <string_view>

#include "harness/base/input_error.hpp"
#include "harness/base/whole_integer.hpp"

namespace ddpbench {
namespace {

struct Names {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;  // may be absent; then derived
};

constexpr Names kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

int64_t parse_variable(const char* name, const char* text, int64_t minimum) {
  const auto parsed = whole_integer<int64_t>(text);
  if (!parsed) throw InputError(std::string("environment variable ") + name + "='" + text + "' is not an integer");
  const int64_t value = *parsed;
  if (value < minimum) {
    throw InputError(std::string("environment variable ") + name + "=" + text + " must be at least " +
                     std::to_string(minimum));
  }
  return value;
}

}  // namespace

bool is_launcher_variable(std::string_view name) {
  for (std::string_view prefix : {"SLURM_", "OMPI_", "PMI_", "PMIX_", "TORCHELASTIC_"}) {
    if (name.starts_with(prefix)) return true;
  }
  for (std::string_view exact : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                                 "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE"}) {
    if (name == exact) return true;
  }
  return false;
}

std::optional<RankEnvironment> rank_environment(const EnvironmentLookup& lookup) {
  for (const Names& names : kLaunchers) {
    const char* rank = lookup(names.rank);
    const char* world = lookup(names.world_size);
    if (rank == nullptr && world == nullptr) continue;
    if (rank == nullptr || world == nullptr) {
      throw InputError(std::string(rank == nullptr ? names.rank : names.world_size) + " is not set, but " +
                       (rank == nullptr ? names.world_size : names.rank) + " is");
    }
    RankEnvironment env;
    env.source = names.source;
    env.rank = parse_variable(names.rank, rank, 0);
    env.world_size = parse_variable(names.world_size, world, 1);
    if (env.rank >= env.world_size) {
      throw InputError(std::string(names.rank) + "=" + rank + " is outside " + names.world_size + "=" + world);
    }
    const char* local_rank = lookup(names.local_rank);
    env.local_rank = local_rank != nullptr ? parse_variable(names.local_rank, local_rank, 0) : env.rank;
    // SLURM's tasks-per-node can read "2(x3)"; only a plain number is taken as the local size.
    const char* local_size = lookup(names.local_world_size);
    const int64_t parsed_local_size = local_size != nullptr ? whole_integer<int64_t>(local_size).value_or(0) : 0;
    // Without a local size, assume one node: the whole world shares this machine.
    env.local_world_size = parsed_local_size > 0 ? parsed_local_size : env.world_size;
    if (env.local_rank >= env.local_world_size) {
      throw InputError(std::string(names.local_rank) + "=" + std::to_string(env.local_rank) +
                       " is outside the local world of " + std::to_string(env.local_world_size));
    }
    if (const char* addr = lookup("MASTER_ADDR"); addr != nullptr && *addr != '\0') env.master_addr = addr;
    if (const char* port = lookup("MASTER_PORT"); port != nullptr) env.master_port = master_port_variable(port);
    if (const char* agent = lookup("TORCHELASTIC_USE_AGENT_STORE"); agent != nullptr) {
      env.store_served_by_launcher = std::string_view(agent) == "True" || std::string_view(agent) == "1";
    }
    if (const char* restarts = lookup("TORCHELASTIC_RESTART_COUNT"); restarts != nullptr) {
      env.restart_count = parse_variable("TORCHELASTIC_RESTART_COUNT", restarts, 0);
    }
    return env;
  }
  return std::nullopt;
}

std::optional<RankEnvironment> rank_environment_from_process() {
  return rank_environment([](const char* name) { return std::getenv(name); });
}

int64_t master_port_variable(const char* text) {
  const int64_t port = parse_variable("MASTER_PORT", text, 1);
  if (port > 65535) throw InputError(std::string("environment variable MASTER_PORT=") + text + " is not a port");
  return port;
}

RankEnvironment local_rank_environment(int64_t rank, int64_t world_size, int64_t master_port) {
  RankEnvironment env;
  env.rank = rank;
  env.world_size = world_size;
  env.local_rank = rank;
  env.local_world_size = world_size;
  env.master_port = master_port;
  env.source = "self";
  return env;
}

}  // namespace ddpbench
