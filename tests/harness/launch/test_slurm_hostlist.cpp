#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/base/input_error.hpp"
#include "harness/launch/slurm_hostlist.hpp"
#include "support/process.hpp"

namespace ddpbench {
namespace {

using Hosts = std::vector<std::string>;

std::string error_of(std::string_view list) {
  try {
    expand_hostlist(list, "SLURM_NODELIST");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SlurmHostlist, ExpandsRangesListsAndPaddingAsSlurmDoes) {
  EXPECT_EQ(expand_hostlist("node[1-2]", "V"), (Hosts{"node1", "node2"}));
  EXPECT_EQ(expand_hostlist("gpu-a[01-04,07]", "V"), (Hosts{"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04", "gpu-a07"}));
  EXPECT_EQ(expand_hostlist("n1,n2", "V"), (Hosts{"n1", "n2"}));
  EXPECT_EQ(expand_hostlist("solo", "V"), (Hosts{"solo"}));
  // Several bracket groups in one name: the last runs fastest.
  EXPECT_EQ(expand_hostlist("rack[1-2]-n[1-2]", "V"), (Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  // Commas inside brackets do not separate names; ranges cross a power of ten keeping the width.
  EXPECT_EQ(expand_hostlist("a[8-10],b[098-100]", "V"), (Hosts{"a8", "a9", "a10", "b098", "b099", "b100"}));
  EXPECT_EQ(expand_hostlist("x[3],y[1-1]", "V"), (Hosts{"x3", "y1"}));
}

TEST(SlurmHostlist, WhatCannotBeReadIsNamedWithItsVariable) {
  EXPECT_EQ(error_of("node[1-"), "environment variable SLURM_NODELIST='node[1-' is not a SLURM host list: a '[' "
                                 "without its ']'");
  EXPECT_NE(error_of("node[3-1]").find("the range '3-1' runs backwards"), std::string::npos);
  EXPECT_NE(error_of("node1]").find("a ']' without its '['"), std::string::npos);
  EXPECT_NE(error_of("n1,,n2").find("an empty name"), std::string::npos);
  EXPECT_NE(error_of("").find("it is empty"), std::string::npos);
  EXPECT_NE(error_of("node[a-b]").find("'a-b', not a number"), std::string::npos);
  EXPECT_NE(error_of("node[-1]").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("node[1-2:2]").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("node[[1]]").find("brackets inside brackets"), std::string::npos);
  EXPECT_NE(error_of("node 1").find("white space"), std::string::npos);
  EXPECT_NE(error_of("y[1-2]z").find("'y[1-2]z' has text after its last ']'"), std::string::npos);
  EXPECT_NE(error_of("n[0-99999999]").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(error_of("a[0-999]b[0-999]").find("more than 65536 hosts"), std::string::npos);
}

TEST(SlurmHostlist, TaskLayoutsExpandPerNode) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1", "V"), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4", "V"), (std::vector<int64_t>{4}));
  EXPECT_EQ(expand_tasks_per_node("1,3", "V"), (std::vector<int64_t>{1, 3}));
  for (const char* bad : {"", "0", "2(x0)", "2(x3", "x", "2(x3),", "-1"}) {
    EXPECT_THROW(expand_tasks_per_node(bad, "SLURM_TASKS_PER_NODE"), InputError) << bad;
  }
}

// Against SLURM's own parser, where slurm-wlm is installed (scontrol needs a slurm.conf, not
// a running controller, to expand a list).
TEST(SlurmHostlist, AgreesWithScontrolShowHostnames) {
  const std::filesystem::path scontrol = "/usr/bin/scontrol";
  if (!std::filesystem::exists(scontrol)) GTEST_SKIP() << "needs scontrol from Debian's slurm-wlm";
  testing::TempDir dir;
  std::ofstream(dir / "slurm.conf") << "ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\n"
                                       "PartitionName=p Nodes=ALL Default=YES\n";
  for (const std::string list : {"node[1-2]", "gpu-a[01-04,07]", "n1,n2", "rack[1-2]-n[1-3]", "a[8-10],b[098-100]",
                                 "c[1,3-5,9],d7", "x[3],y[1-1]", "a[1-2]b[3-4]"}) {
    const auto r = testing::run_process({scontrol.string(), "show", "hostnames", list},
                                        {"SLURM_CONF=" + (dir / "slurm.conf").string()});
    ASSERT_EQ(r.exit_code, 0) << list << ": " << r.err;
    ASSERT_EQ(r.err.find("Invalid"), std::string::npos) << list << ": " << r.err;
    Hosts theirs;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) theirs.push_back(line);
    EXPECT_EQ(expand_hostlist(list, "V"), theirs) << list;
  }
  for (const std::string list : {"y[1-2]z", "node[3-1]"}) {
    const auto r = testing::run_process({scontrol.string(), "show", "hostnames", list},
                                        {"SLURM_CONF=" + (dir / "slurm.conf").string()});
    EXPECT_NE((r.out + r.err).find("Invalid hostlist"), std::string::npos) << list << ": SLURM took it";
    EXPECT_THROW(expand_hostlist(list, "V"), InputError) << list;
  }
}

}  // namespace
}  // namespace ddpbench
