#include "harness/distributed/communicator.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#ifdef DDPBENCH_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "harness/base/clock.hpp"
#include "harness/base/input_error.hpp"
#include "harness/distributed/finished_within.hpp"
#include "harness/distributed/run_store.hpp"
#include "harness/launch/rank_progress.hpp"

namespace ddpbench {
namespace {

// A heartbeat every half second; a rank whose count does not move over three beats has
// stopped answering (frozen, dead, or cut off from the store).
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(500);
constexpr auto kSilenceWindow = std::chrono::milliseconds(1500);
// The store clients that beat and diagnose give up quickly: a frozen store must not hold
// the diagnosis (or the exit) for the group's whole timeout.
constexpr auto kProbeTimeout = std::chrono::milliseconds(1000);

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

// This rank's way through the collectives, which the heartbeat publishes: the thread keeps it
// alive when it has to be left behind, blocked on a store that stopped answering.
struct Heartbeat final : CollectiveMarks {
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  int64_t beats = 0;
  int64_t entered = 0;
  std::map<int64_t, std::pair<std::string, Clock::time_point>> in_flight;  // by sequence number
  int64_t last_left = 0;
  std::string last_left_phase;
  Clock::time_point left_at = Clock::now();
  std::promise<void> ended;
  std::function<void()> on_next_enter;  // test only: Communicator::on_next_collective

  int64_t enter(std::string_view phase) override {
    int64_t sequence = 0;
    std::function<void()> action;
    {
      const std::lock_guard lock(mutex);
      sequence = ++entered;
      in_flight.emplace(sequence, std::make_pair(std::string(phase), Clock::now()));
      action = std::exchange(on_next_enter, nullptr);
    }
    if (action) action();
    return sequence;
  }

  void leave(int64_t sequence) override {
    const std::lock_guard lock(mutex);
    const auto it = in_flight.find(sequence);
    if (it == in_flight.end()) return;
    if (sequence >= last_left) {
      last_left = sequence;
      last_left_phase = it->second.first;
      left_at = Clock::now();
    }
    in_flight.erase(it);
  }

  // Under the mutex: the collective it is in (the oldest in flight, where it is held), or the
  // one it left last.
  RankProgress progress(Clock::time_point now) const {
    RankProgress p;
    p.beats = beats;
    p.entered = entered;
    if (!in_flight.empty()) {
      const auto& [sequence, entry] = *in_flight.begin();
      p.at = sequence;
      p.inside = true;
      p.phase = entry.first;
      p.for_s = seconds_between(entry.second, now);
    } else {
      p.at = last_left;
      p.phase = last_left_phase;
      p.for_s = seconds_between(left_at, now);
    }
    return p;
  }
};

struct Communicator::Impl {
  RankEnvironment rank;
  CommBackend backend = CommBackend::gloo;
  std::string prefix;
  c10::intrusive_ptr<c10d::Store> raw_store;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::string interface;
  std::string flight_recorder_prefix;
  std::shared_ptr<Heartbeat> heartbeat = std::make_shared<Heartbeat>();
  std::future<void> heartbeat_ended;
  std::atomic<int64_t> blocked_ns{0};
  c10::Device device = c10::kCPU;
  int64_t taken_blocked_ns = 0;
#ifdef DDPBENCH_HAVE_CUDA
  // CUDA: each guarded() collective between two events on the device's current stream.
  using DeviceSpan = std::pair<std::shared_ptr<at::cuda::CUDAEvent>, std::shared_ptr<at::cuda::CUDAEvent>>;
  std::mutex spans_mutex;
  std::vector<DeviceSpan> spans;

  std::shared_ptr<at::cuda::CUDAEvent> record_on_device() const {
    const c10::cuda::CUDAGuard guard(device);
    auto event = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    event->record(at::cuda::getCurrentCUDAStream(device.index()));
    return event;
  }
#endif

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
    std::thread([state = heartbeat, connect = client_factory(), key = progress_key(rank.rank)] {
      try {
        const auto beat = connect();
        std::unique_lock lock(state->mutex);
        while (!state->stopping) {
          ++state->beats;
          const std::string record = format_progress(state->progress(Clock::now()));
          lock.unlock();
          beat->set(key, std::vector<uint8_t>(record.begin(), record.end()));
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

  std::string store_address() const { return rank.master_addr + ":" + std::to_string(rank.master_port); }

  // The run's store, under this run's prefix. Throws CollectiveError naming the rank and host
  // that could not serve it (rank 0, unless the launcher serves it) or join it, and where.
  void open_store(std::chrono::milliseconds timeout) {
    try {
      raw_store = open_run_store(rank, timeout);
    } catch (const std::exception& e) {
      const std::string what = first_line(e.what());
      const bool serves = rank.rank == 0 && !rank.store_served_by_launcher;
      const bool named = what.starts_with("could not reach the store");
      throw CollectiveError("rendezvous failed on rank " + std::to_string(rank.rank) + " on " + this_host_name() + ": " +
                            (named ? what
                                   : (serves ? "cannot serve the store at " : "cannot join the store at ") +
                                         store_address() + ": " + what));
    }
    store = c10::make_intrusive<c10d::PrefixStore>(prefix, raw_store);
  }

#ifdef USE_C10D_GLOO
  // The interface Gloo reaches the other ranks through, and in `interface` why it is that one.
  void add_gloo_device(c10d::ProcessGroupGloo::Options& gloo) {
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
      gloo.devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      interface = std::string(ifname) + " (GLOO_SOCKET_IFNAME)";
    } else if (is_loopback_address(rank.master_addr)) {
      gloo.devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      interface = "lo (MASTER_ADDR is loopback)";
    } else if (const std::string towards = interface_towards(rank.master_addr); !towards.empty()) {
      // Gloo's default binds to the address the hostname resolves to, often loopback on
      // a cluster node: the interface that routes to MASTER_ADDR reaches the others.
      gloo.devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(towards));
      interface = towards + " (routes to MASTER_ADDR " + rank.master_addr + ")";
    } else {
      gloo.devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      interface = "Gloo's default (no interface routes to MASTER_ADDR " + rank.master_addr + ")";
    }
  }

  void add_gloo_backend(std::chrono::milliseconds timeout) {
    auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
    add_gloo_device(*gloo);
    auto gloo_backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(rank.rank),
                                                                    static_cast<int>(rank.world_size), gloo);
    // As init_process_group("gloo"): the backend serves CPU tensors, and CUDA tensors too
    // (SyncBatchNorm's CUDA kernels can then be tested with two ranks on one GPU).
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo_backend);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo_backend);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  }
#endif

#ifdef USE_C10D_NCCL
  void add_nccl_backend(const CommunicatorOptions& options) {
    c10::cuda::set_device(options.device.index());
    if (!options.flight_recorder_prefix.empty()) {
      // PyTorch's flight recorder: each rank's last collectives, dumped when one times out.
      // The user's own settings win.
      ::setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", 0);
      ::setenv("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", 0);
      ::setenv("TORCH_NCCL_ENABLE_MONITORING", "1", 0);
      ::setenv("TORCH_FR_DUMP_TEMP_FILE", options.flight_recorder_prefix.c_str(), 0);
      flight_recorder_prefix = std::getenv("TORCH_FR_DUMP_TEMP_FILE");
    }
    auto nccl = c10d::ProcessGroupNCCL::Options::create();
    nccl->timeout = options.timeout;
    auto nccl_backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, static_cast<int>(rank.rank),
                                                                    static_cast<int>(rank.world_size), nccl);
    // As init_process_group(device_id=...): the group is bound to the rank's device, and
    // NCCL's communicator is formed now, not at the first collective. ncclCommInitRank
    // blocks until every rank has called it, so it runs within the row's timeout: a peer
    // that never starts is named, never waited for.
    group->setBoundDeviceId(options.device);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl_backend);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    // NCCL's own error, if it fails, is thrown from here.
    const auto connect = [nccl_backend, device = options.device] {
      nccl_backend->eagerConnectSingleDevice(device);
      return true;
    };
    if (!finished_within<bool>(options.timeout, connect)) {
      throw std::runtime_error("NCCL's communicator did not form within " +
                               std::to_string(options.timeout.count() / 1000) + " s (ncclCommInitRank)");
    }
  }
#endif

  // Every rank's progress record, or nullopt when the store did not answer. This rank's own
  // comes from memory: its heartbeat may be a beat behind.
  std::optional<std::vector<std::optional<RankProgress>>> read_progress_records() const {
    if (!raw_store) return std::nullopt;
    auto records = within<std::vector<std::optional<RankProgress>>>(
        kProbeTimeout, [connect = client_factory(), world = rank.world_size] { return read_progress(*connect(), world); });
    if (records) {
      const std::lock_guard lock(heartbeat->mutex);
      (*records)[static_cast<std::size_t>(rank.rank)] = heartbeat->progress(Clock::now());
    }
    return records;
  }
};

namespace {

// Ranks on other nodes that never joined: where they run and what they had to reach, the
// two sides of a master that the other nodes cannot reach (a loopback one, a wrong interface).
std::string never_joined_from_elsewhere(const RankEnvironment& r, const ProgressVerdict& verdict) {
  if (r.node_count < 2) return "";
  std::vector<std::string> placed;
  std::size_t missing = 0;
  for (std::size_t rank = 0; rank < verdict.records.size(); ++rank) {
    if (verdict.records[rank]) continue;
    ++missing;
    const std::string node = node_of_rank(r, static_cast<int64_t>(rank));
    if (!node.empty()) placed.push_back("rank " + std::to_string(rank) + " runs on " + node);
  }
  if (missing == 0) return "";
  std::string out = "; ";
  for (std::size_t i = 0; i < placed.size(); ++i) out += (i == 0 ? "" : ", ") + placed[i];
  out += placed.empty() ? "the store " : ", and the store ";
  out += missing == 1 ? "it had to reach is " : "they had to reach is ";
  const bool served_here = r.rank == 0 && !r.store_served_by_launcher;
  out += r.master_addr + ":" + std::to_string(r.master_port) + (served_here ? " on " + this_host_name() : std::string()) +
         " (address from " + r.master_addr_origin +
         (is_loopback_address(r.master_addr) ? "; a loopback address, which no other node reaches)" : ")");
  return out;
}

}  // namespace

CommBackend resolve_backend(CommBackend requested, const c10::Device& device) {
  const CommBackend backend =
      requested != CommBackend::auto_select ? requested : (device.is_cuda() ? CommBackend::nccl : CommBackend::gloo);
  if (backend == CommBackend::nccl && !device.is_cuda()) {
    throw InputError("--backend nccl needs CUDA devices; this run uses " + device.str());
  }
#ifndef USE_C10D_GLOO
  if (backend == CommBackend::gloo) throw InputError("--backend gloo: this build has no Gloo (see docs/internals.md, building by hand)");
#endif
#ifndef USE_C10D_NCCL
  if (backend == CommBackend::nccl) throw InputError("--backend nccl: this build has no NCCL");
#endif
  return backend;
}

Communicator::Communicator(const CommunicatorOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->rank = options.rank;
  impl_->device = options.device;
  impl_->backend = resolve_backend(options.backend, options.device);
  impl_->prefix = run_store_prefix(options.rank.restart_count, options.rank.run_id);
  impl_->open_store(options.timeout);
  impl_->start_heartbeat();

  guarded("rendezvous", [&] {
    impl_->group = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, static_cast<int>(options.rank.rank),
                                                          static_cast<int>(options.rank.world_size));
    if (impl_->backend == CommBackend::gloo) {
#ifdef USE_C10D_GLOO
      impl_->add_gloo_backend(options.timeout);
#endif
    } else {
#ifdef USE_C10D_NCCL
      impl_->add_nccl_backend(options);
#endif
    }
    // Every rank leaves the constructor with the group formed, or with an error.
    impl_->group->barrier()->wait();
  });
}

Communicator::~Communicator() = default;

void Communicator::guarded(std::string_view phase, const std::function<void()>& collectives) {
  const int64_t sequence = impl_->heartbeat->enter(phase);
  const auto start = Clock::now();
#ifdef DDPBENCH_HAVE_CUDA
  std::shared_ptr<at::cuda::CUDAEvent> device_start;
  if (impl_->device.is_cuda()) device_start = impl_->record_on_device();
#endif
  try {
    collectives();
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    throw CollectiveError(describe_failure(phase, e));
  }
  impl_->blocked_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
#ifdef DDPBENCH_HAVE_CUDA
  if (device_start) {
    auto device_end = impl_->record_on_device();
    const std::lock_guard lock(impl_->spans_mutex);
    impl_->spans.emplace_back(std::move(device_start), std::move(device_end));
  }
#endif
  impl_->heartbeat->leave(sequence);
}

std::function<double()> Communicator::take_collective_wait() {
#ifdef DDPBENCH_HAVE_CUDA
  if (impl_->device.is_cuda()) {
    std::vector<Impl::DeviceSpan> spans;
    {
      const std::lock_guard lock(impl_->spans_mutex);
      spans.swap(impl_->spans);
    }
    return [spans = std::move(spans)] {
      double seconds = 0;
      for (const auto& [begin, end] : spans) {
        end->synchronize();
        seconds += static_cast<double>(begin->elapsed_time(*end)) / 1e3;
      }
      return seconds;
    };
  }
#endif
  const int64_t now = impl_->blocked_ns.load();
  const double since = static_cast<double>(now - std::exchange(impl_->taken_blocked_ns, now)) / 1e9;
  return [since] { return since; };
}

std::shared_ptr<CollectiveMarks> Communicator::marks() const { return impl_->heartbeat; }

void Communicator::on_next_collective(std::function<void()> action) {
  const std::lock_guard lock(impl_->heartbeat->mutex);
  impl_->heartbeat->on_next_enter = std::move(action);
}

std::chrono::milliseconds Communicator::heartbeat_period() { return kHeartbeatPeriod; }

double Communicator::blocked_s() const { return static_cast<double>(impl_->blocked_ns.load()) / 1e9; }

std::string Communicator::describe_failure(std::string_view phase, const std::exception& failure) const {
  const RankEnvironment& r = impl_->rank;
  std::ostringstream out;
  out << phase << " failed on rank " << r.rank;
  if (r.node_count > 1) out << " on " << this_host_name();
  out << ": ";
  // Read twice, a silence window apart: a heartbeat that did not move is a rank that stopped.
  const auto before = impl_->read_progress_records();
  if (before) std::this_thread::sleep_for(kSilenceWindow);
  const auto after = before ? impl_->read_progress_records() : std::nullopt;
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
    const ProgressVerdict verdict = blame(*before, *after, std::chrono::duration<double>(kSilenceWindow).count(), r.rank);
    out << verdict.text << never_joined_from_elsewhere(r, verdict);
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

c10::intrusive_ptr<c10d::ProcessGroup> Communicator::process_group() const { return impl_->group; }

std::string Communicator::flight_recorder_prefix() const { return impl_->flight_recorder_prefix; }

int64_t Communicator::rank() const { return impl_->rank.rank; }
int64_t Communicator::world_size() const { return impl_->rank.world_size; }
std::string Communicator::backend_name() const {
  return std::string(enum_name(kCommBackendNames, impl_->backend));
}
std::string Communicator::network_interface() const { return impl_->interface; }

}  // namespace ddpbench
