#pragma once
// SLURM's hostlist expressions ("node[1-2]", "gpu-a[01-04,07]", "rack[1-2]-n[1-3]", "n1,n2")
// and task layouts ("2(x3),1"), as SLURM_NODELIST and SLURM_TASKS_PER_NODE write them: what a
// rank needs to find the first node (the master) and how many ranks each node holds.
// No LibTorch.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddpbench {

/// The hosts of `list`, in SLURM's order (bracketed ranges keep their zero padding; several
/// bracket groups in one name expand as SLURM does, the last fastest). Throws InputError
/// naming `variable` and what is wrong: an unclosed bracket, a range that runs backwards, an
/// empty name, more than `max_hosts` hosts.
std::vector<std::string> expand_hostlist(std::string_view list, std::string_view variable,
                                         std::size_t max_hosts = 65536);

/// The tasks on each node of a layout such as SLURM_TASKS_PER_NODE's "2(x3),1" (2, 2, 2, 1).
/// Throws InputError naming `variable` when it is not one.
std::vector<int64_t> expand_tasks_per_node(std::string_view layout, std::string_view variable);

}  // namespace ddpbench
