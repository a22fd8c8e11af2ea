#include "harness/distributed/run_store.hpp"

#include <arpa/inet.h>
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

#include "harness/distributed/finished_within.hpp"

namespace ddpbench {
namespace {

// Where rank 0 writes its run's name (RankEnvironment::run_id), outside every run's prefix.
constexpr const char* kRunKey = "ddpbench/run";

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
      if (errno == EADDRINUSE) {
        ::close(fd);
        ::freeaddrinfo(found);
        throw std::runtime_error("port " + service + " on " + address +
                                 " is in use (another run's store, or another program's; MASTER_PORT names another)");
      }
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

std::string run_store_prefix(int64_t restart_count, const std::string& run_id) {
  return "ddpbench/" + (run_id.empty() ? "" : run_id + "/") + "attempt_" + std::to_string(restart_count);
}

std::string progress_key(int64_t rank) { return "progress/" + std::to_string(rank); }

c10::intrusive_ptr<c10d::Store> open_run_store(const RankEnvironment& r, std::chrono::milliseconds timeout) {
  if (r.rank == 0 && !r.store_served_by_launcher) {
    auto served = serve(r.master_addr, listen_on(r.master_addr, r.master_port, r.master_addr_origin), r.world_size, timeout);
    if (!r.run_id.empty()) served->set(kRunKey, std::vector<uint8_t>(r.run_id.begin(), r.run_id.end()));
    return served;
  }
  const auto start = std::chrono::steady_clock::now();
  wait_until_reachable(r, timeout);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(r.master_port);
  options.isServer = false;
  options.numWorkers = static_cast<std::size_t>(r.world_size);
  options.waitWorkers = false;
  options.timeout = timeout;  // every later read waits this long too
  // Something that takes the connection but is no c10d store (another service on the port)
  // sends c10d's client into its retries: they are held to what is left of the timeout.
  const auto left = std::max(std::chrono::milliseconds(1000),
                             timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - start));
  const std::string where = r.master_addr + ":" + std::to_string(r.master_port) + " from " + this_host_name();
  std::optional<c10::intrusive_ptr<c10d::Store>> store;
  try {
    store = finished_within<c10::intrusive_ptr<c10d::Store>>(
        left, [address = r.master_addr, options]() -> c10::intrusive_ptr<c10d::Store> {
          return c10::make_intrusive<c10d::TCPStore>(address, options);
        });
  } catch (const std::exception& e) {
    // c10d's message last: it may run on for lines, which whoever reports this cuts.
    throw std::runtime_error("could not reach the store at " + where + ": it answered, but not as a c10d store (address: " +
                             r.master_addr_origin + "; port: " + r.master_port_origin + "): " + e.what());
  }
  if (!store) {
    throw std::runtime_error("could not reach the store at " + where + " within " +
                             std::to_string(timeout.count() / 1000) +
                             " s: something takes the connection there but does not answer as a c10d store (address: " +
                             r.master_addr_origin + "; port: " + r.master_port_origin + ")");
  }
  // A store on a port two runs share: the other run's, said as such (its keys are its own, so
  // this rank could only have waited for a rank 0 that is not there).
  if (!r.run_id.empty() && !r.store_served_by_launcher) {
    std::string theirs;
    try {
      (*store)->wait({kRunKey}, std::chrono::milliseconds(2000));
      const auto bytes = (*store)->get(kRunKey);
      theirs.assign(bytes.begin(), bytes.end());
    } catch (const std::exception&) {
      // No run's name there (not a ddpbench rank 0's store): the rendezvous says what is wrong.
    }
    if (!theirs.empty() && theirs != r.run_id) {
      throw std::runtime_error("could not reach the store at " + where + ": the store there is another run's (" + theirs +
                               "), not this run's (" + r.run_id + "): their ports collide (port: " +
                               r.master_port_origin + "); export MASTER_PORT=<a free port>");
    }
  }
  return *store;
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

std::optional<ProgressVerdict> judge_run_progress(const RankEnvironment& rank, std::chrono::milliseconds silence) {
  if (!rank.store_served_by_launcher || rank.world_size < 2) return std::nullopt;
  try {
    const auto store = c10::make_intrusive<c10d::PrefixStore>(run_store_prefix(rank.restart_count, rank.run_id),
                                                              open_run_store(rank, std::chrono::milliseconds(2000)));
    const auto before = read_progress(*store, rank.world_size);
    std::this_thread::sleep_for(silence);
    const auto after = read_progress(*store, rank.world_size);
    if (std::none_of(after.begin(), after.end(), [](const auto& record) { return record.has_value(); })) {
      return std::nullopt;
    }
    return blame(before, after, std::chrono::duration<double>(silence).count(), rank.rank);
  } catch (const std::exception&) {
    return std::nullopt;
  }
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
