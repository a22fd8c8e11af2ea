#pragma once
// Where this process stands in a run: its rank among world_size processes (one per device),
// its device, and, when there is more than one process, the communicator joining them.
#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

namespace ddpbench {

class Communicator;  // harness/distributed/communicator.hpp

struct DistContext {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  c10::Device device{c10::kCPU};
  std::shared_ptr<Communicator> comm;  // null when world_size == 1
  [[nodiscard]] bool is_main() const { return rank == 0; }
};

}  // namespace ddpbench
