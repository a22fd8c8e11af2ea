#include "harness/launch/launcher.hpp"

#include "harness/launch/rank_environment.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddpbench {
namespace {

// Built through append(): GCC 12 warns falsely (-Warray-bounds) on push_back of literals here.
std::string assignment(const char* name, const std::string& value) {
  std::string text(name);
  text.append("=").append(value);
  return text;
}

}  // namespace

int64_t free_port(const std::string& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot find a free port on " + address + ": " + error);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

LaunchOutcome launch_ranks(const LaunchOptions& o) {
  LaunchOutcome outcome;
  outcome.master_port = o.master_port > 0 ? o.master_port : free_port(o.master_addr);
  std::vector<ProcessSpec> specs;
  for (int64_t rank = 0; rank < o.nproc; ++rank) {
    ProcessSpec spec;
    spec.label = "rank " + std::to_string(rank);
    spec.program = o.program;
    spec.args = o.args;
    std::vector<std::string> variables{assignment("RANK", std::to_string(rank)),
                                       assignment("WORLD_SIZE", std::to_string(o.nproc)),
                                       assignment("LOCAL_RANK", std::to_string(rank)),
                                       assignment("LOCAL_WORLD_SIZE", std::to_string(o.nproc)),
                                       assignment("MASTER_ADDR", o.master_addr),
                                       assignment("MASTER_PORT", std::to_string(outcome.master_port)),
                                       assignment("DDPBENCH_LAUNCHED", "1")};
    variables.insert(variables.end(), o.env.begin(), o.env.end());
    spec.env = environment_with(variables, [](std::string_view name) { return is_launcher_variable(name); });
    specs.push_back(std::move(spec));
  }
  SupervisedRun run = run_supervised(specs, o.supervise);
  if (run.first_failure) {
    outcome.failure = run.exits[*run.first_failure];
    outcome.failed_rank = static_cast<int64_t>(*run.first_failure);  // the specs are in rank order
  }
  outcome.interrupted = run.interrupted;
  return outcome;
}

}  // namespace ddpbench
