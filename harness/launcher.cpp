#include "harness/launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <stdexcept>

extern char** environ;

namespace ddpbench {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_interrupt_signal{0};
void on_interrupt(int signal) { g_interrupt_signal = signal; }

struct Child {
  int64_t rank = 0;
  pid_t pid = -1;
  int stderr_fd = -1;
  std::string partial_line;
  std::deque<std::string> tail;
  bool running = true;
};

void relay_line(Child& child, const std::string& line, std::size_t keep) {
  const std::string out = "[rank " + std::to_string(child.rank) + "] " + line + "\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, out.data(), out.size());
  child.tail.push_back(line);
  while (child.tail.size() > keep) child.tail.pop_front();
}

enum class Read { data, nothing_yet, end };

// Reads one chunk of what is available and relays its complete lines.
Read drain(Child& child, std::size_t keep) {
  char buf[4096];
  const ssize_t n = ::read(child.stderr_fd, buf, sizeof buf);
  if (n == 0) return Read::end;
  if (n < 0) return (errno == EAGAIN || errno == EINTR) ? Read::nothing_yet : Read::end;
  child.partial_line.append(buf, static_cast<std::size_t>(n));
  std::size_t newline;
  while ((newline = child.partial_line.find('\n')) != std::string::npos) {
    std::string line = child.partial_line.substr(0, newline);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // A progress line rewritten in place arrives as \r-separated updates: keep the last.
    if (const auto cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    relay_line(child, line, keep);
    child.partial_line.erase(0, newline + 1);
  }
  return Read::data;
}

void signal_all(std::vector<Child>& children, int signal) {
  for (auto& c : children) {
    if (c.running) ::kill(c.pid, signal);
  }
}

// Built through append(): GCC 12 warns falsely (-Warray-bounds) on push_back of literals here.
std::string assignment(const char* name, const std::string& value) {
  std::string text(name);
  text.append("=").append(value);
  return text;
}

std::vector<std::string> rank_environment_block(const LaunchOptions& o, int64_t rank, int64_t port) {
  static const char* const kReplaced[] = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=",
                                          "MASTER_ADDR=", "MASTER_PORT=", "DDPBENCH_LAUNCHED="};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const char* prefix : kReplaced) replaced = replaced || std::strncmp(*e, prefix, std::strlen(prefix)) == 0;
    if (!replaced) env.emplace_back(*e);
  }
  env.push_back(assignment("RANK", std::to_string(rank)));
  env.push_back(assignment("WORLD_SIZE", std::to_string(o.nproc)));
  env.push_back(assignment("LOCAL_RANK", std::to_string(rank)));
  env.push_back(assignment("LOCAL_WORLD_SIZE", std::to_string(o.nproc)));
  env.push_back(assignment("MASTER_ADDR", o.master_addr));
  env.push_back(assignment("MASTER_PORT", std::to_string(port)));
  env.push_back(assignment("DDPBENCH_LAUNCHED", "1"));
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Child start_rank(const LaunchOptions& o, int64_t rank, int64_t port) {
  std::vector<std::string> argv_strings{o.program};
  argv_strings.insert(argv_strings.end(), o.args.begin(), o.args.end());
  std::vector<std::string> env_strings = rank_environment_block(o, rank, port);
  auto argv = pointers(argv_strings);
  auto envp = pointers(env_strings);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until execve.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], STDERR_FILENO);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  Child child;
  child.rank = rank;
  child.pid = pid;
  child.stderr_fd = fds[0];
  return child;
}

RankFailure failure_of(const Child& child, int status) {
  RankFailure f;
  f.rank = child.rank;
  if (WIFSIGNALED(status)) {
    f.signal = WTERMSIG(status);
  } else {
    f.exit_code = WEXITSTATUS(status);
  }
  f.stderr_tail.assign(child.tail.begin(), child.tail.end());
  return f;
}

}  // namespace

std::string RankFailure::describe() const {
  if (signal != 0) {
    return "rank " + std::to_string(rank) + " was killed by signal " + std::to_string(signal) + " (" +
           ::strsignal(signal) + ")";
  }
  return "rank " + std::to_string(rank) + " exited with status " + std::to_string(exit_code);
}

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

  g_interrupt_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {}, old_term {};
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);

  std::vector<Child> children;
  try {
    for (int64_t rank = 0; rank < o.nproc; ++rank) children.push_back(start_rank(o, rank, outcome.master_port));
  } catch (...) {
    signal_all(children, SIGKILL);
    for (auto& c : children) ::waitpid(c.pid, nullptr, 0);
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    throw;
  }

  std::optional<Clock::time_point> stopping_since;
  std::size_t running = children.size();
  while (running > 0) {
    std::vector<pollfd> fds;
    for (auto& c : children) {
      if (c.stderr_fd >= 0) fds.push_back({c.stderr_fd, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 50);
    for (auto& c : children) {
      if (c.stderr_fd >= 0 && drain(c, o.stderr_tail_lines) == Read::end) {
        ::close(c.stderr_fd);
        c.stderr_fd = -1;
      }
    }
    // Several ranks can end in one round (the survivors of a crash fail right after it);
    // a rank killed by a signal, then the lowest rank, is taken as the cause.
    std::vector<std::pair<Child*, int>> ended;
    for (auto& c : children) {
      int status = 0;
      if (c.running && ::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.running = false;
        --running;
        ended.emplace_back(&c, status);
      }
    }
    for (auto& [child, status] : ended) {
      while (child->stderr_fd >= 0 && drain(*child, o.stderr_tail_lines) == Read::data) {
      }
    }
    if (!outcome.failure && !stopping_since) {
      const std::pair<Child*, int>* cause = nullptr;
      for (const auto& e : ended) {
        const bool failed = WIFSIGNALED(e.second) || WEXITSTATUS(e.second) != 0;
        if (!failed) continue;
        if (cause == nullptr || (WIFSIGNALED(e.second) && !WIFSIGNALED(cause->second))) cause = &e;
      }
      if (cause != nullptr) outcome.failure = failure_of(*cause->first, cause->second);
    }
    if (g_interrupt_signal != 0 && !outcome.interrupted) outcome.interrupted = true;
    if ((outcome.failure || outcome.interrupted) && !stopping_since) {
      stopping_since = Clock::now();
      signal_all(children, SIGTERM);
    }
    if (stopping_since && Clock::now() - *stopping_since > o.grace) signal_all(children, SIGKILL);
  }
  for (auto& c : children) {
    if (c.stderr_fd >= 0) ::close(c.stderr_fd);
    if (!c.partial_line.empty()) relay_line(c, c.partial_line, o.stderr_tail_lines);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return outcome;
}

}  // namespace ddpbench
