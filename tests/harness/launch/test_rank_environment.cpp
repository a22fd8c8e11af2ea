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
  // SLURM writes "2(x3)" for uneven layouts: then the world is assumed to share the node.
  const auto uneven = from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}, {"SLURM_NTASKS_PER_NODE", "2(x3)"}});
  EXPECT_EQ(uneven->local_world_size, 6);
  const auto mpi = from({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}});
  ASSERT_TRUE(mpi.has_value());
  EXPECT_EQ(mpi->source, "mpi");
  EXPECT_EQ(mpi->rank, 2);
  EXPECT_EQ(mpi->world_size, 3);
  EXPECT_EQ(mpi->local_world_size, 1);
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
