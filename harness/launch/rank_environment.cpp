#include "harness/launch/rank_environment.hpp"

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "harness/base/input_error.hpp"
#include "harness/base/whole_integer.hpp"
#include "harness/launch/slurm_hostlist.hpp"

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

namespace {

// The first set variable of `names`, with its name; {nullptr, ""} when none is.
std::pair<const char*, std::string> first_set(const EnvironmentLookup& lookup, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const char* value = lookup(name); value != nullptr && *value != '\0') return {value, name};
  }
  return {nullptr, ""};
}

// The node list SLURM gave: where it came from ("SLURM_STEP_NODELIST=node[1-2]"), and why it
// could not be read, if it could not.
struct SlurmNodeList {
  std::string origin;
  std::string error;
};

// SLURM's nodes and tasks per node for this step, and the local world they give this node.
// A node list that cannot be read matters only where the master must come from it: its
// error is returned, for the caller to throw then.
SlurmNodeList read_slurm_layout(const EnvironmentLookup& lookup, RankEnvironment& env) {
  SlurmNodeList node_list;
  if (const auto [list, name] = first_set(lookup, {"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"});
      list != nullptr) {
    node_list.origin = name + "=" + list;
    try {
      env.nodes = expand_hostlist(list, name);
    } catch (const InputError& e) {
      node_list.error = e.what();
    }
  }
  if (const char* distribution = lookup("SLURM_DISTRIBUTION");
      distribution != nullptr && *distribution != '\0' && !std::string_view(distribution).starts_with("block")) {
    env.ranks_in_node_order = false;  // cyclic or arbitrary: which node holds a rank is not known here
  }
  if (const auto [layout, name] = first_set(lookup, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
      layout != nullptr) {
    env.ranks_per_node = expand_tasks_per_node(layout, name);
  }
  if (const auto [count, name] = first_set(lookup, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
      count != nullptr) {
    env.node_count = parse_variable(name.c_str(), count, 1);
  } else if (!env.ranks_per_node.empty()) {
    env.node_count = static_cast<int64_t>(env.ranks_per_node.size());
  } else if (!env.nodes.empty()) {
    env.node_count = static_cast<int64_t>(env.nodes.size());
  }
  const char* node_id = lookup("SLURM_NODEID");
  if (node_id != nullptr && !env.ranks_per_node.empty()) {
    const int64_t id = parse_variable("SLURM_NODEID", node_id, 0);
    if (id >= static_cast<int64_t>(env.ranks_per_node.size())) {
      throw InputError("SLURM_NODEID=" + std::string(node_id) + " is outside the step's " +
                       std::to_string(env.ranks_per_node.size()) + " nodes");
    }
    env.local_world_size = env.ranks_per_node[static_cast<std::size_t>(id)];
  }
  return node_list;
}

// Without MASTER_ADDR, SLURM's ranks meet on the step's first node (where task 0 runs under
// every distribution but arbitrary), on a port of the job's and the step's: two jobs, or two
// steps of one job, sharing a node seldom collide, and when they do, the store's keys are the
// run's own (run_id), so that a rank can fail but never join another run.
void derive_slurm_master(const EnvironmentLookup& lookup, const SlurmNodeList& node_list, RankEnvironment& env,
                         bool addr_given, bool port_given) {
  const char* job = lookup("SLURM_JOB_ID");
  const char* step = lookup("SLURM_STEP_ID");
  const bool has_job = job != nullptr && *job != '\0';
  const int64_t job_id = has_job ? parse_variable("SLURM_JOB_ID", job, 0) : 0;
  const int64_t step_id = step != nullptr && *step != '\0' ? parse_variable("SLURM_STEP_ID", step, 0) : 0;
  if (has_job) env.run_id = "slurm-" + std::to_string(job_id) + "." + std::to_string(step_id);
  // One node's ranks meet on loopback: a node's own name need not resolve on it.
  if (!addr_given && !env.nodes.empty() && env.node_count > 1) {
    env.master_addr = env.nodes.front();
    env.master_addr_origin = "the first host of " + node_list.origin;
  } else if (!addr_given && !env.nodes.empty()) {
    env.master_addr = "127.0.0.1";
    env.master_addr_origin = "loopback: the step's ranks share one node (" + env.nodes.front() + ")";
  }
  if (!port_given && has_job) {
    env.master_port = 15000 + (37 * (job_id % 10000) + step_id) % 10000;
    env.master_port_origin = "SLURM_JOB_ID=" + std::to_string(job_id) + " and SLURM_STEP_ID=" +
                             std::to_string(step_id) + " (15000 + (37 x job + step) % 10000)";
  }
}

// This rank, its world and its local world as the launcher's variables `names` give them
// (`rank` and `world` already read), SLURM's layout included. Throws InputError naming a
// variable that is malformed or out of range.
RankEnvironment read_ranks(const EnvironmentLookup& lookup, const Names& names, const char* rank, const char* world,
                           SlurmNodeList& node_list) {
  RankEnvironment env;
  env.source = names.source;
  env.rank = parse_variable(names.rank, rank, 0);
  env.world_size = parse_variable(names.world_size, world, 1);
  if (env.rank >= env.world_size) {
    throw InputError(std::string(names.rank) + "=" + rank + " is outside " + names.world_size + "=" + world);
  }
  const char* local_rank = lookup(names.local_rank);
  env.local_rank = local_rank != nullptr ? parse_variable(names.local_rank, local_rank, 0) : env.rank;
  // SLURM's tasks-per-node can read "2(x3)"; only a plain number is taken as the local size
  // here (SLURM's own layout, read below, knows this node's).
  const char* local_size = lookup(names.local_world_size);
  const int64_t parsed_local_size = local_size != nullptr ? whole_integer<int64_t>(local_size).value_or(0) : 0;
  // Without a local size, assume one node: the whole world shares this machine.
  env.local_world_size = parsed_local_size > 0 ? parsed_local_size : env.world_size;
  if (env.source == std::string_view("slurm")) node_list = read_slurm_layout(lookup, env);
  if (env.local_rank >= env.local_world_size) {
    throw InputError(std::string(names.local_rank) + "=" + std::to_string(env.local_rank) +
                     " is outside the local world of " + std::to_string(env.local_world_size));
  }
  if (env.local_world_size < env.world_size && env.node_count == 1) {
    env.node_count = (env.world_size + env.local_world_size - 1) / env.local_world_size;
  }
  return env;
}

// Where MASTER_ADDR and MASTER_PORT are set, they name the master.
struct MasterVariables {
  bool addr_given = false;
  bool port_given = false;
};

MasterVariables read_master_variables(const EnvironmentLookup& lookup, RankEnvironment& env) {
  MasterVariables given;
  const char* addr = lookup("MASTER_ADDR");
  given.addr_given = addr != nullptr && *addr != '\0';
  if (given.addr_given) {
    env.master_addr = addr;
    env.master_addr_origin = "MASTER_ADDR";
  }
  const char* port = lookup("MASTER_PORT");
  given.port_given = port != nullptr;
  if (given.port_given) {
    env.master_port = master_port_variable(port);
    env.master_port_origin = "MASTER_PORT";
  }
  return given;
}

// The master SLURM's variables give (derive_slurm_master). Throws InputError, naming
// MASTER_ADDR, where ranks across nodes need it and the node list cannot give it: unreadable,
// an arbitrary distribution, or rank 0 on another node than the one derived.
void find_slurm_master(const EnvironmentLookup& lookup, const SlurmNodeList& node_list, RankEnvironment& env,
                       const MasterVariables& given) {
  // What matters only where the master must come from SLURM: ranks across nodes.
  const bool master_needed = !given.addr_given && env.node_count > 1;
  if (master_needed && !node_list.error.empty()) {
    throw InputError(node_list.error + "; the master is its first host unless MASTER_ADDR names it: export MASTER_ADDR=<an "
                     "address of the node that runs rank 0>");
  }
  if (const char* distribution = lookup("SLURM_DISTRIBUTION");
      master_needed && distribution != nullptr && std::string_view(distribution).starts_with("arbitrary")) {
    throw InputError("SLURM_DISTRIBUTION=" + std::string(distribution) + ": rank 0 need not run on the step's first "
                     "node, so the master cannot be taken from the node list; export MASTER_ADDR=<an address of the "
                     "node that runs rank 0>");
  }
  derive_slurm_master(lookup, node_list, env, given.addr_given, given.port_given);
  // Rank 0 serves the store on the master: where SLURM names rank 0's node otherwise, the
  // derivation is wrong for this step, said at once rather than as an address it cannot bind.
  if (const char* here = lookup("SLURMD_NODENAME");
      master_needed && !env.nodes.empty() && env.rank == 0 && here != nullptr && *here != '\0' &&
      env.master_addr != here) {
    throw InputError("rank 0 runs on " + std::string(here) + ", not on " + env.master_addr + " (" +
                     env.master_addr_origin + "); export MASTER_ADDR=<an address of " + here + ">");
  }
}

// Ranks across nodes with no master found would each wait on their own loopback until the
// timeout: bad input, naming MASTER_ADDR.
void check_master_found(const RankEnvironment& env, const MasterVariables& given) {
  const bool slurm = env.source == std::string_view("slurm");
  if (env.node_count > 1 && !given.addr_given && is_loopback_address(env.master_addr)) {
    throw InputError("the " + std::to_string(env.world_size) + " ranks span " + std::to_string(env.node_count) +
                     " nodes, and no master address was found (" +
                     (slurm ? "MASTER_ADDR is not set, nor SLURM_STEP_NODELIST, SLURM_NODELIST or SLURM_JOB_NODELIST"
                            : "MASTER_ADDR is not set") +
                     "): every rank would wait on its own 127.0.0.1; export MASTER_ADDR=<an address of the node "
                     "that runs rank 0>");
  }
}

// torchrun's agent: whether it serves the store, and how often it restarted the ranks.
void read_torchelastic(const EnvironmentLookup& lookup, RankEnvironment& env) {
  if (const char* agent = lookup("TORCHELASTIC_USE_AGENT_STORE"); agent != nullptr) {
    env.store_served_by_launcher = std::string_view(agent) == "True" || std::string_view(agent) == "1";
  }
  if (const char* restarts = lookup("TORCHELASTIC_RESTART_COUNT"); restarts != nullptr) {
    env.restart_count = parse_variable("TORCHELASTIC_RESTART_COUNT", restarts, 0);
  }
}

}  // namespace

std::optional<RankEnvironment> rank_environment(const EnvironmentLookup& lookup) {
  for (const Names& names : kLaunchers) {
    const char* rank = lookup(names.rank);
    const char* world = lookup(names.world_size);
    if (rank == nullptr && world == nullptr) continue;
    if (rank == nullptr || world == nullptr) {
      throw InputError(std::string(rank == nullptr ? names.rank : names.world_size) + " is not set, but " +
                       (rank == nullptr ? names.world_size : names.rank) + " is");
    }
    SlurmNodeList node_list;
    RankEnvironment env = read_ranks(lookup, names, rank, world, node_list);
    const MasterVariables given = read_master_variables(lookup, env);
    if (env.source == std::string_view("slurm")) find_slurm_master(lookup, node_list, env, given);
    check_master_found(env, given);
    read_torchelastic(lookup, env);
    return env;
  }
  return std::nullopt;
}

std::string node_of_rank(const RankEnvironment& env, int64_t rank) {
  if (!env.ranks_in_node_order || env.nodes.empty() || env.ranks_per_node.empty() ||
      env.nodes.size() < env.ranks_per_node.size()) {
    return "";
  }
  // SLURM's default block distribution: the first node's tasks first.
  int64_t first = 0;
  for (std::size_t node = 0; node < env.ranks_per_node.size(); ++node) {
    if (rank < first + env.ranks_per_node[node]) return env.nodes[node];
    first += env.ranks_per_node[node];
  }
  return "";
}

std::string this_host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "this host";
  return host;
}

bool is_loopback_address(std::string_view address) {
  return address == "localhost" || address.starts_with("127.") || address == "::1";
}

std::string describe_master(const RankEnvironment& env) {
  return env.master_addr + ":" + std::to_string(env.master_port) + " (address: " + env.master_addr_origin +
         "; port: " + env.master_port_origin + ")";
}

std::optional<RankEnvironment> rank_environment_from_process() {
  return rank_environment([](const char* name) { return std::getenv(name); });
}

std::optional<RankEnvironment> launcher_world_from_process() {
  try {
    auto env = rank_environment_from_process();
    if (env && env->source == "slurm" && std::getenv("SLURM_STEP_NUM_TASKS") == nullptr) return std::nullopt;
    return env;
  } catch (const InputError&) {
    return std::nullopt;
  }
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
