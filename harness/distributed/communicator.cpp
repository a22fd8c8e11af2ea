#include "harness/distributed/communicator.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

// A heartbeat every half second; a rank whose count does not move over three beats has
// stopped answering (frozen, dead, or cut off from the store).
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(500);
constexpr auto kSilenceWindow = std::chrono::milliseconds(1500);
// The store clients that beat and diagnose give up quickly: a frozen store must not hold
// the diagnosis (or the exit) for the group's whole timeout.
constexpr auto kProbeTimeout = std::chrono::milliseconds(1000);

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

std::string first_line(const std::string& text, std::size_t max_chars = 400) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > max_chars) line = line.substr(0, max_chars) + "...";
  return line;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

std::string interface_with_address(const sockaddr* local) {
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return "";
  std::string name;
  for (const ifaddrs* i = interfaces; i != nullptr && name.empty(); i = i->ifa_next) {
    if (same_address(i->ifa_addr, local)) name = i->ifa_name;
  }
  ::freeifaddrs(interfaces);
  return name;
}

// The store listens on MASTER_ADDR alone, as torchrun's does, not on every interface:
// c10d's traffic is unauthenticated.
int listen_on(const std::string& address, int64_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(address.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw std::runtime_error("MASTER_ADDR " + address + " does not resolve: " + ::gai_strerror(rc));
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
    throw std::runtime_error("rank 0 cannot listen on MASTER_ADDR " + address + ":" + service + " (" + why +
                             "; MASTER_ADDR must be an address of rank 0's host)");
  }
  return fd;
}

}  // namespace

std::string interface_towards(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), "9", &hints, &found) != 0) return "";
  std::string name;
  for (const addrinfo* a = found; a != nullptr && name.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // A UDP connect sends nothing; it only asks the kernel for the route and its source.
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      name = interface_with_address(reinterpret_cast<const sockaddr*>(&local));
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return name;
}

// Runs `query` on a thread of its own and waits for it at most `limit`. A TCPStore client
// has no receive timeout: a frozen or cut-off store would hold the caller forever, so it
// holds only this thread (detached, it ends with the process).
template <typename T>
std::optional<T> within(std::chrono::milliseconds limit, std::function<T()> query) {
  auto task = std::make_shared<std::packaged_task<T()>>(std::move(query));
  auto result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  try {
    return result.get();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// What the heartbeat thread shares with its owner; the thread keeps it alive when it has to
// be left behind, blocked on a store that stopped answering.
struct Heartbeat {
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::string phase;  // the collective this rank entered last
  std::promise<void> ended;
};

struct Communicator::Impl {
  RankEnvironment rank;
  CommBackend backend = CommBackend::gloo;
  std::string prefix;
  c10::intrusive_ptr<c10d::Store> raw_store;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::string interface;
  std::shared_ptr<Heartbeat> heartbeat = std::make_shared<Heartbeat>();
  std::future<void> heartbeat_ended;

  ~Impl() { stop_heartbeat(); }

  // Makes new clients of the store under this run's prefix (clone() connects: call it off
  // the caller's thread when the store may not answer). Owns what it needs: it may outlive this.
  std::function<c10::intrusive_ptr<c10d::Store>()> client_factory() const {
    return [raw = raw_store, prefix = prefix]() -> c10::intrusive_ptr<c10d::Store> {
      return c10::make_intrusive<c10d::PrefixStore>(prefix, raw->clone());
    };
  }

  void start_heartbeat() {
    heartbeat_ended = heartbeat->ended.get_future();
    std::thread([state = heartbeat, connect = client_factory(), self = rank.rank] {
      const std::string count_key = "heartbeat/" + std::to_string(self);
      const std::string phase_key = "phase/" + std::to_string(self);
      try {
        const auto beat = connect();
        std::string published;
        std::unique_lock lock(state->mutex);
        while (!state->stopping) {
          const std::string current = state->phase;
          lock.unlock();
          beat->add(count_key, 1);
          if (current != published) {
            beat->set(phase_key, std::vector<uint8_t>(current.begin(), current.end()));
            published = current;
          }
          lock.lock();
          state->wake.wait_for(lock, kHeartbeatPeriod, [&] { return state->stopping; });
        }
      } catch (const std::exception&) {
        // The store is gone: the others see this rank fall silent.
      }
      state->ended.set_value();
    }).detach();
  }

  void stop_heartbeat() {
    if (!heartbeat_ended.valid()) return;
    {
      const std::lock_guard lock(heartbeat->mutex);
      heartbeat->stopping = true;
    }
    heartbeat->wake.notify_all();
    // A heartbeat blocked on a store that stopped answering is left behind, not waited for.
    heartbeat_ended.wait_for(kHeartbeatPeriod);
  }

  void entered(std::string_view phase) const {
    const std::lock_guard lock(heartbeat->mutex);
    if (heartbeat->phase != phase) heartbeat->phase = phase;
  }

  std::string store_address() const { return rank.master_addr + ":" + std::to_string(rank.master_port); }

  // Every rank's heartbeat count and last phase, or nullopt when the store did not answer.
  std::optional<std::vector<std::pair<int64_t, std::string>>> read_heartbeats() const {
    if (!raw_store) return std::nullopt;
    return within<std::vector<std::pair<int64_t, std::string>>>(kProbeTimeout, [connect = client_factory(), world = rank.world_size] {
      const auto probe = connect();
      std::vector<std::pair<int64_t, std::string>> beats;
      for (int64_t r = 0; r < world; ++r) {
        const int64_t count = probe->add("heartbeat/" + std::to_string(r), 0);
        std::string phase;
        if (const std::string key = "phase/" + std::to_string(r); probe->check({key})) {
          const auto bytes = probe->get(key);
          phase.assign(bytes.begin(), bytes.end());
        }
        beats.emplace_back(count, std::move(phase));
      }
      return beats;
    });
  }
};

CommBackend resolve_backend(CommBackend requested, const c10::Device& device) {
  const CommBackend backend =
      requested != CommBackend::auto_select ? requested : (device.is_cuda() ? CommBackend::nccl : CommBackend::gloo);
  if (backend == CommBackend::nccl && !device.is_cuda()) {
    throw InputError("--backend nccl needs CUDA devices; this run uses " + device.str());
  }
#ifndef USE_C10D_GLOO
  if (backend == CommBackend::gloo) throw InputError("--backend gloo: this build has no Gloo (see README, Gloo)");
#endif
#ifndef USE_C10D_NCCL
  if (backend == CommBackend::nccl) throw InputError("--backend nccl: this build has no NCCL");
#endif
  return backend;
}

Communicator::Communicator(const CommunicatorOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->rank = options.rank;
  impl_->backend = resolve_backend(options.backend, options.device);
  impl_->prefix = "ddpbench/attempt_" + std::to_string(options.rank.restart_count);
  const RankEnvironment& r = options.rank;

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(r.master_port);
  store_options.isServer = r.rank == 0 && !r.store_served_by_launcher;
  store_options.numWorkers = static_cast<std::size_t>(r.world_size);
  // The group's own rendezvous waits for every rank (and names the missing ones below).
  store_options.waitWorkers = false;
  store_options.timeout = options.timeout;
  c10::intrusive_ptr<c10d::Store> raw;
  try {
    if (store_options.isServer) store_options.masterListenFd = listen_on(r.master_addr, r.master_port);
    raw = c10::make_intrusive<c10d::TCPStore>(r.master_addr, store_options);
  } catch (const std::exception& e) {
    throw CollectiveError("rendezvous failed on rank " + std::to_string(r.rank) + ": cannot join the store at " +
                          impl_->store_address() + ": " + first_line(e.what()));
  }
  impl_->raw_store = raw;
  impl_->store = c10::make_intrusive<c10d::PrefixStore>(impl_->prefix, raw);
  impl_->start_heartbeat();

  guarded("rendezvous", [&] {
    impl_->group = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, static_cast<int>(r.rank),
                                                          static_cast<int>(r.world_size));
    if (impl_->backend == CommBackend::gloo) {
#ifdef USE_C10D_GLOO
      auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
        gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
        impl_->interface = std::string(ifname) + " (GLOO_SOCKET_IFNAME)";
      } else if (is_loopback(r.master_addr)) {
        gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        impl_->interface = "lo (MASTER_ADDR is loopback)";
      } else if (const std::string towards = interface_towards(r.master_addr); !towards.empty()) {
        // Gloo's default binds to the address the hostname resolves to, often loopback on
        // a cluster node: the interface that routes to MASTER_ADDR reaches the others.
        gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(towards));
        impl_->interface = towards + " (routes to MASTER_ADDR " + r.master_addr + ")";
      } else {
        gloo->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        impl_->interface = "Gloo's default (no interface routes to MASTER_ADDR " + r.master_addr + ")";
      }
      auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(r.rank),
                                                                 static_cast<int>(r.world_size), gloo);
      // As init_process_group("gloo"): the backend serves CPU tensors, and CUDA tensors too
      // (SyncBatchNorm's CUDA kernels can then be tested with two ranks on one GPU).
      impl_->group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
      impl_->group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, backend);
      impl_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#endif
    } else {
#ifdef USE_C10D_NCCL
      c10::cuda::set_device(options.device.index());
      auto nccl = c10d::ProcessGroupNCCL::Options::create();
      nccl->timeout = options.timeout;
      auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, static_cast<int>(r.rank),
                                                                 static_cast<int>(r.world_size), nccl);
      impl_->group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend);
      impl_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#endif
    }
    // Every rank leaves the constructor with the group formed, or with an error.
    impl_->group->barrier()->wait();
  });
}

Communicator::~Communicator() = default;

void Communicator::guarded(std::string_view phase, const std::function<void()>& collectives) {
  impl_->entered(phase);
  try {
    collectives();
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    throw CollectiveError(describe_failure(phase, e));
  }
}

std::string Communicator::describe_failure(std::string_view phase, const std::exception& failure) const {
  const RankEnvironment& r = impl_->rank;
  std::ostringstream out;
  out << phase << " failed on rank " << r.rank << ": ";
  const auto before = impl_->read_heartbeats();
  if (before) std::this_thread::sleep_for(kSilenceWindow);
  const auto after = before ? impl_->read_heartbeats() : std::nullopt;
  if (!after) {
    if (r.store_served_by_launcher) {
      out << "the launcher's store at " << impl_->store_address()
          << " stopped answering (its node stopped, or the link to it is cut)";
    } else if (r.rank == 0) {
      out << "this rank's own store at " << impl_->store_address() << " stopped answering";
    } else {
      out << "rank 0 stopped answering (its store at " << impl_->store_address()
          << " did not answer: rank 0 stopped, or the link to it is cut)";
    }
  } else {
    const char* separator = "";
    for (int64_t other = 0; other < r.world_size; ++other) {
      const auto& [count, last_phase] = (*after)[static_cast<std::size_t>(other)];
      if (other == r.rank || count != (*before)[static_cast<std::size_t>(other)].first) continue;
      out << separator << "rank " << other;
      if (count == 0) {
        out << " never joined";
      } else {
        out << " stopped answering (no heartbeat for " << kSilenceWindow.count() / 1000.0 << " s";
        if (!last_phase.empty()) out << "; last seen in " << last_phase;
        out << ")";
      }
      separator = ", ";
    }
    if (*separator == '\0') {
      out << "every other rank's heartbeat is alive, so none stopped answering: one is late or waits in another "
             "collective";
    }
  }
  out << "; c10d said: " << first_line(failure.what());
  return out.str();
}

// wait() without a timeout: Gloo's collectives time out on their own (the group's
// timeout), and NCCL's wait then only orders the current stream after the collective,
// leaving a dead peer to the watchdog; wait(timeout) would block the host every time.
void Communicator::sum(at::Tensor& tensor, std::string_view phase) {
  guarded(phase, [&] {
    std::vector<at::Tensor> tensors{tensor};
    impl_->group->allreduce(tensors)->wait();
  });
}

void Communicator::broadcast(at::Tensor& tensor, int64_t root) {
  guarded("broadcast", [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    impl_->group->broadcast(tensors, options)->wait();
  });
}

void Communicator::barrier() {
  guarded("barrier", [&] { impl_->group->barrier()->wait(); });
}

c10::intrusive_ptr<c10d::ProcessGroup> Communicator::process_group() const { return impl_->group; }

int64_t Communicator::rank() const { return impl_->rank.rank; }
int64_t Communicator::world_size() const { return impl_->rank.world_size; }
std::string Communicator::backend_name() const {
  return std::string(enum_name(kCommBackendNames, impl_->backend));
}
std::string Communicator::network_interface() const { return impl_->interface; }

}  // namespace ddpbench
