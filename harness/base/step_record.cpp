#include "harness/base/step_record.hpp"

#include <algorithm>

namespace ddpbench {

double PhaseSeconds::hidden_comm_s() const {
  return std::clamp(allreduce_s - comm_s, 0.0, std::max(0.0, backward_s));
}

PhaseSeconds& PhaseSeconds::operator+=(const PhaseSeconds& other) {
  data_s += other.data_s;
  forward_s += other.forward_s;
  backward_s += other.backward_s;
  comm_s += other.comm_s;
  optimizer_s += other.optimizer_s;
  allreduce_s += other.allreduce_s;
  collective_wait_s += other.collective_wait_s;
  replicate_s += other.replicate_s;
  forward_collective_wait_s += other.forward_collective_wait_s;
  return *this;
}

PhaseSeconds PhaseSeconds::operator/(double divisor) const {
  return {data_s / divisor,      forward_s / divisor,   backward_s / divisor,        comm_s / divisor,
          optimizer_s / divisor, allreduce_s / divisor, collective_wait_s / divisor, replicate_s / divisor,
          forward_collective_wait_s / divisor};
}

}  // namespace ddpbench
