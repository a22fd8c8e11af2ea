#include <gtest/gtest.h>

#include <map>

#include "harness/base/input_error.hpp"
#include "harness/launch/rank_environment.hpp"

namespace ddpbench {
namespace {

std::optional<RankEnvironment> from(const std::map<std::string, std::string>& vars) {
  return rank_environment([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnvironment, NoLauncherVariablesMeansNotARank) { EXPECT_FALSE(from({{"HOME", "/root"}}).has_value()); }

TEST(RankEnvironment, TorchrunVariables) {
  const auto env = from({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                         {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "10.0.0.7");
  EXPECT_EQ(env->master_port, 29400);
}

TEST(RankEnvironment, TorchrunsAgentServesTheStore) {
  const auto own = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_FALSE(own->store_served_by_launcher);
  const auto agent = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                           {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(agent->store_served_by_launcher);
  EXPECT_EQ(agent->restart_count, 2);
}

TEST(RankEnvironment, DefaultsForASingleNode) {
  const auto env = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(RankEnvironment, SlurmAndOpenMpi) {
  const auto slurm = from({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"},
                           {"SLURM_NTASKS_PER_NODE", "2"}, {"MASTER_ADDR", "node1"}});
  ASSERT_TRUE(slurm.has_value());
  EXPECT_EQ(slurm->source, "slurm");
  EXPECT_EQ(slurm->rank, 3);
  EXPECT_EQ(slurm->local_rank, 1);
  EXPECT_EQ(slurm->local_world_size, 2);
  EXPECT_EQ(slurm->master_addr, "node1");
  // SLURM_NTASKS_PER_NODE can read "2(x3)": without the step's layout and node id the world
  // is assumed to share the node.
  const auto uneven = from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}, {"SLURM_NTASKS_PER_NODE", "2(x3)"}});
  EXPECT_EQ(uneven->local_world_size, 6);
  const auto mpi = from({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                         {"MASTER_ADDR", "node1"}});
  ASSERT_TRUE(mpi.has_value());
  EXPECT_EQ(mpi->source, "mpi");
  EXPECT_EQ(mpi->rank, 2);
  EXPECT_EQ(mpi->world_size, 3);
  EXPECT_EQ(mpi->local_world_size, 1);
}

// What srun gives each task of `srun -N 2 -n 3` on node[1-2] (block layout: 2 then 1).
std::map<std::string, std::string> srun_task(int rank, int node, std::map<std::string, std::string> more = {}) {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_NTASKS", "3"},
                                             {"SLURM_LOCALID", std::to_string(rank == 2 ? 0 : rank)},
                                             {"SLURM_NODEID", std::to_string(node)}, {"SLURM_NNODES", "2"},
                                             {"SLURM_NODELIST", "node[1-2]"}, {"SLURM_STEP_NODELIST", "node[1-2]"},
                                             {"SLURM_STEP_TASKS_PER_NODE", "2,1"}, {"SLURM_TASKS_PER_NODE", "2,1"},
                                             {"SLURM_JOB_ID", "123456"}, {"SLURM_STEP_ID", "0"}};
  for (auto& [k, v] : more) vars[k] = v;
  return vars;
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    from(vars);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(RankEnvironment, UnderSlurmTheMasterIsTheStepsFirstNodeOnAPortOfTheJob) {
  const auto third = from(srun_task(2, 1));
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->master_addr, "node1");
  EXPECT_EQ(third->master_port, 15000 + (37 * 3456 + 0) % 10000);
  EXPECT_EQ(third->master_addr_origin, "the first host of SLURM_STEP_NODELIST=node[1-2]");
  EXPECT_EQ(third->master_port_origin, "SLURM_JOB_ID=123456 and SLURM_STEP_ID=0 (15000 + (37 x job + step) % 10000)");
  EXPECT_EQ(third->run_id, "slurm-123456.0");
  // The step's layout gives each node its own local world.
  EXPECT_EQ(third->local_world_size, 1);
  EXPECT_EQ(from(srun_task(0, 0))->local_world_size, 2);
  EXPECT_EQ(third->node_count, 2);
  EXPECT_EQ(node_of_rank(*third, 0), "node1");
  EXPECT_EQ(node_of_rank(*third, 1), "node1");
  EXPECT_EQ(node_of_rank(*third, 2), "node2");
  EXPECT_EQ(node_of_rank(*third, 3), "");
  EXPECT_EQ(describe_master(*third),
            "node1:22872 (address: the first host of SLURM_STEP_NODELIST=node[1-2]; port: SLURM_JOB_ID=123456 and "
            "SLURM_STEP_ID=0 (15000 + (37 x job + step) % 10000))");
  // Two jobs on one node, or two steps of one job: two ports, and two runs' keys.
  EXPECT_NE(from(srun_task(0, 0, {{"SLURM_JOB_ID", "123457"}}))->master_port, third->master_port);
  const auto next_step = from(srun_task(0, 0, {{"SLURM_STEP_ID", "1"}}));
  EXPECT_EQ(next_step->master_port, third->master_port + 1);
  EXPECT_EQ(next_step->run_id, "slurm-123456.1");
  // The step's list wins over the job's; SLURM_NODELIST serves where there is no step's.
  auto job_only = srun_task(0, 0, {{"SLURM_JOB_NODELIST", "big[1-8]"}});
  job_only.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(from(job_only)->master_addr, "node1");
  // Cyclic distribution: which node holds a rank is not guessed.
  EXPECT_EQ(node_of_rank(*from(srun_task(2, 1, {{"SLURM_DISTRIBUTION", "cyclic"}})), 2), "");
  EXPECT_EQ(node_of_rank(*from(srun_task(2, 1, {{"SLURM_DISTRIBUTION", "block:cyclic"}})), 2), "node2");
}

TEST(RankEnvironment, UnderSlurmOnOneNodeTheMasterIsLoopbackNotTheNodesName) {
  // `srun -N 1 -n 2` on node7: the node's name need not resolve on it; its ranks meet on loopback.
  const auto env = from({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "0"},
                         {"SLURM_NNODES", "1"}, {"SLURM_NODELIST", "node7"}, {"SLURM_STEP_NODELIST", "node7"},
                         {"SLURM_STEP_TASKS_PER_NODE", "2"}, {"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "0"},
                         {"SLURMD_NODENAME", "node7"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->node_count, 1);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_addr_origin, "loopback: the step's ranks share one node (node7)");
  // The port still comes from the job: two jobs on the node do not collide.
  EXPECT_EQ(env->master_port, 15000 + 37 * 42 % 10000);
  // MASTER_ADDR still wins.
  auto given = *from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "1"}, {"SLURM_NODELIST", "node7"},
                      {"MASTER_ADDR", "10.0.0.3"}});
  EXPECT_EQ(given.master_addr, "10.0.0.3");
}

TEST(RankEnvironment, MasterAddrAndMasterPortWinOverSlurms) {
  const auto env = from(srun_task(1, 0, {{"MASTER_ADDR", "10.0.0.9"}, {"MASTER_PORT", "29411"}}));
  EXPECT_EQ(env->master_addr, "10.0.0.9");
  EXPECT_EQ(env->master_port, 29411);
  EXPECT_EQ(env->master_addr_origin, "MASTER_ADDR");
  EXPECT_EQ(env->master_port_origin, "MASTER_PORT");
  // A node list the binary cannot read matters not when MASTER_ADDR names the master.
  const auto unread = from(srun_task(1, 0, {{"MASTER_ADDR", "10.0.0.9"}, {"SLURM_STEP_NODELIST", "node[2-1]"}}));
  EXPECT_EQ(unread->master_addr, "10.0.0.9");
  // The address alone given: the port still comes from the job.
  EXPECT_EQ(from(srun_task(1, 0, {{"MASTER_ADDR", "10.0.0.9"}}))->master_port, 22872);
  // An arbitrary distribution, or a rank 0 that SLURM places elsewhere, needs no master from
  // the list when MASTER_ADDR gives it.
  EXPECT_EQ(from(srun_task(0, 0, {{"MASTER_ADDR", "10.0.0.9"}, {"SLURM_DISTRIBUTION", "arbitrary"},
                                  {"SLURMD_NODENAME", "node2"}}))->master_addr,
            "10.0.0.9");
}

TEST(RankEnvironment, RanksAcrossNodesWithNoMasterToBeFoundAreBadInputNamingMasterAddr) {
  auto no_list = srun_task(1, 0);
  no_list.erase("SLURM_NODELIST");
  no_list.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(error_of(no_list),
            "the 3 ranks span 2 nodes, and no master address was found (MASTER_ADDR is not set, nor "
            "SLURM_STEP_NODELIST, SLURM_NODELIST or SLURM_JOB_NODELIST): every rank would wait on its own 127.0.0.1; "
            "export MASTER_ADDR=<an address of the node that runs rank 0>");
  const std::string unreadable = error_of(srun_task(1, 0, {{"SLURM_STEP_NODELIST", "node[1-"}}));
  EXPECT_NE(unreadable.find("SLURM_STEP_NODELIST='node[1-' is not a SLURM host list"), std::string::npos) << unreadable;
  EXPECT_NE(unreadable.find("export MASTER_ADDR="), std::string::npos) << unreadable;
  // torchrun's and Open MPI's variables across nodes without MASTER_ADDR: the same.
  EXPECT_NE(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}})
                .find("the 2 ranks span 2 nodes, and no master address was found (MASTER_ADDR is not set)"),
            std::string::npos);
  EXPECT_NE(error_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})
                .find("MASTER_ADDR"),
            std::string::npos);
  // A loopback master given on purpose (several "nodes" on one machine) is taken.
  EXPECT_EQ(from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"},
                  {"MASTER_ADDR", "127.0.0.1"}})->master_addr,
            "127.0.0.1");
  // One node needs no master address: the default loopback serves.
  auto one_node = srun_task(1, 0, {{"SLURM_NNODES", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "3"}});
  one_node.erase("SLURM_NODELIST");
  one_node.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(from(one_node)->master_addr, "127.0.0.1");
  EXPECT_NE(error_of(srun_task(1, 5)).find("SLURM_NODEID=5 is outside the step's 2 nodes"), std::string::npos);
  // A node list that cannot be read matters only where the master must come from it.
  auto one_node_bad_list = one_node;
  one_node_bad_list["SLURM_STEP_NODELIST"] = "node[2-1]";
  EXPECT_EQ(from(one_node_bad_list)->master_addr, "127.0.0.1");
  // Under an arbitrary distribution rank 0 need not be on the list's first node.
  EXPECT_NE(error_of(srun_task(1, 0, {{"SLURM_DISTRIBUTION", "arbitrary"}}))
                .find("SLURM_DISTRIBUTION=arbitrary: rank 0 need not run on the step's first node"),
            std::string::npos);
  // Rank 0 on another node than the list's first (SLURM says where it is): said at once.
  EXPECT_EQ(error_of(srun_task(0, 0, {{"SLURMD_NODENAME", "node2"}})),
            "rank 0 runs on node2, not on node1 (the first host of SLURM_STEP_NODELIST=node[1-2]); export "
            "MASTER_ADDR=<an address of node2>");
  EXPECT_EQ(error_of(srun_task(0, 0, {{"SLURMD_NODENAME", "node1"}})), "");
}

TEST(RankEnvironment, TorchrunWinsOverTheOthers) {
  const auto env = from({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}});
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->world_size, 1);
}

TEST(RankEnvironment, MalformedOrInconsistentVariablesAreNamed) {
  auto error = [](const std::map<std::string, std::string>& vars) {
    try {
      from(vars);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), "environment variable RANK='x' is not an integer");
  EXPECT_EQ(error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), "RANK=2 is outside WORLD_SIZE=2");
  EXPECT_EQ(error({{"RANK", "0"}}), "WORLD_SIZE is not set, but RANK is");
  EXPECT_EQ(error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "environment variable WORLD_SIZE=0 must be at least 1");
  EXPECT_EQ(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}),
            "environment variable MASTER_PORT=70000 is not a port");
  EXPECT_EQ(error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "2"}}),
            "LOCAL_RANK=3 is outside the local world of 2");
}

TEST(RankEnvironment, RanksFormedByDdpbenchItselfShareThisMachine) {
  const RankEnvironment env = local_rank_environment(2, 3, 4321);
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 3);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.local_world_size, 3);
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, 4321);
  EXPECT_EQ(env.source, "self");
  EXPECT_FALSE(env.store_served_by_launcher);
}

}  // namespace
}  // namespace ddpbench
