#include "harness/distributed/run_store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace ddpbench {
namespace {

// As torchrun's store, bound to MASTER_ADDR alone: c10d's traffic is unauthenticated.
int listen_on(const std::string& address, int64_t port, const std::string& origin) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(address.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw std::runtime_error("the master address " + address + " (from " + origin + ") does not resolve: " +
                             ::gai_strerror(rc));
  }
  std::string why = "no address";
  int fd = -1;
  for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    throw std::runtime_error("cannot listen on " + address + ":" + service + " (" + why + "; the master address, from " +
                             origin + ", must be an address of this host)");
  }
  return fd;
}

// The port a bound socket listens on.
int64_t bound_port(int fd) {
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return 0;
  if (local.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
}

c10::intrusive_ptr<c10d::Store> serve(const std::string& address, int fd, int64_t workers,
                                      std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(bound_port(fd));
  options.isServer = true;
  options.numWorkers = static_cast<std::size_t>(workers);
  // The group's own rendezvous waits for every rank (and names the missing ones).
  options.waitWorkers = false;
  options.timeout = timeout;
  options.masterListenFd = fd;
  return c10::make_intrusive<c10d::TCPStore>(address, options);
}

// One attempt to open a TCP connection to `a` within `wait`; empty when it opened, else why not.
std::string try_connect(const addrinfo* a, std::chrono::milliseconds wait) {
  const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
  if (fd < 0) return std::strerror(errno);
  std::string why;
  if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      why = std::strerror(errno);
    } else {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, wait.count())));
      int error = 0;
      socklen_t length = sizeof error;
      if (ready == 0) {
        why = "no answer";
      } else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
        why = std::strerror(errno);
      } else if (error != 0) {
        why = std::strerror(error);
      }
    }
  }
  ::close(fd);
  return why;
}

// c10d's client retries a refused connection with a random back-off that runs past its
// timeout (126 and 173 s seen for --timeout-s 60 under SLURM): the store is first reached
// here, within the deadline, and the error names both sides.
void wait_until_reachable(const RankEnvironment& r, std::chrono::milliseconds timeout) {
  using namespace std::chrono;
  const auto deadline = steady_clock::now() + timeout;
  const std::string service = std::to_string(r.master_port);
  std::string why;
  while (true) {
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(r.master_addr.c_str(), service.c_str(), &hints, &found); rc != 0) {
      why = std::string("the address does not resolve (") + ::gai_strerror(rc) + ")";
    } else {
      for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        why = try_connect(a, std::clamp(left, milliseconds(1), milliseconds(1000)));
        if (why.empty()) break;
      }
      ::freeaddrinfo(found);
      if (why.empty()) return;
    }
    if (steady_clock::now() >= deadline) {
      throw std::runtime_error("could not reach the store at " + r.master_addr + ":" + service + " from " +
                               this_host_name() + " within " + std::to_string(timeout.count() / 1000) + " s (" + why +
                               "; address: " + r.master_addr_origin +
                               "; port: " + r.master_port_origin + ")");
    }
    std::this_thread::sleep_for(std::clamp(duration_cast<milliseconds>(deadline - steady_clock::now()),
                                           milliseconds(0), milliseconds(250)));
  }
}

}  // namespace

std::string run_store_prefix(int64_t restart_count) { return "ddpbench/attempt_" + std::to_string(restart_count); }

std::string progress_key(int64_t rank) { return "progress/" + std::to_string(rank); }

c10::intrusive_ptr<c10d::Store> open_run_store(const RankEnvironment& r, std::chrono::milliseconds timeout) {
  if (r.rank == 0 && !r.store_served_by_launcher) {
    return serve(r.master_addr, listen_on(r.master_addr, r.master_port, r.master_addr_origin), r.world_size, timeout);
  }
  wait_until_reachable(r, timeout);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(r.master_port);
  options.isServer = false;
  options.numWorkers = static_cast<std::size_t>(r.world_size);
  options.waitWorkers = false;
  options.timeout = timeout;  // every later read waits this long too
  return c10::make_intrusive<c10d::TCPStore>(r.master_addr, options);
}

std::vector<std::optional<RankProgress>> read_progress(c10d::Store& store, int64_t world_size) {
  std::vector<std::optional<RankProgress>> records;
  for (int64_t r = 0; r < world_size; ++r) {
    const std::string key = progress_key(r);
    std::optional<RankProgress> record;
    if (store.check({key})) {
      const auto bytes = store.get(key);
      record = parse_progress(std::string(bytes.begin(), bytes.end()));
    }
    records.push_back(std::move(record));
  }
  return records;
}

struct LauncherStore::Impl {
  c10::intrusive_ptr<c10d::Store> server;
  c10::intrusive_ptr<c10d::Store> prefixed;
  int64_t port = 0;
  int64_t world_size = 0;
};

LauncherStore::LauncherStore(const std::string& address, int64_t port, int64_t world_size)
    : impl_(std::make_unique<Impl>()) {
  const int fd = listen_on(address, port, "MASTER_ADDR, else 127.0.0.1");
  impl_->port = bound_port(fd);
  impl_->world_size = world_size;
  // The ranks and this process; reads here never wait long (check() before get()).
  impl_->server = serve(address, fd, world_size + 1, std::chrono::seconds(30));
  impl_->prefixed = c10::make_intrusive<c10d::PrefixStore>(run_store_prefix(0), impl_->server);
}

LauncherStore::~LauncherStore() = default;

int64_t LauncherStore::port() const { return impl_->port; }

std::vector<std::optional<RankProgress>> LauncherStore::progress() const {
  return read_progress(*impl_->prefixed, impl_->world_size);
}

std::vector<std::string> LauncherStore::rank_variables() const {
  return {"TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_RESTART_COUNT=0"};
}

}  // namespace ddpbench
