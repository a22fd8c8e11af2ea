#include "harness/launch/process_supervisor.hpp"

#include "harness/base/clock.hpp"
#include "harness/launch/interruption.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

extern char** environ;

namespace ddpbench {
namespace {


struct Child {
  std::string label;
  pid_t pid = -1;
  int stderr_fd = -1;
  std::string partial_line;
  std::deque<std::string> tail;
  bool running = true;
  int status = 0;
};

void relay_line(Child& child, const std::string& line, const SuperviseOptions& o) {
  if (o.relay && !(o.withhold && o.withhold(line))) {
    const std::string out = o.prefix_relayed_lines ? "[" + child.label + "] " + line + "\n" : line + "\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, out.data(), out.size());
  }
  child.tail.push_back(line);
  while (child.tail.size() > o.stderr_tail_lines) child.tail.pop_front();
}

enum class Read { data, nothing_yet, end };

// Reads one chunk of what is available and relays its complete lines.
Read drain(Child& child, const SuperviseOptions& o) {
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
    relay_line(child, line, o);
    child.partial_line.erase(0, newline + 1);
  }
  return Read::data;
}

void signal_all(std::vector<Child>& children, int signal) {
  for (auto& c : children) {
    if (c.running) ::kill(c.pid, signal);
  }
}

// A stopped process (SIGSTOP, a debugger) leaves SIGTERM pending until it is continued:
// one that is frozen gets SIGKILL at once instead of after the grace period.
bool is_stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && (text[close + 2] == 'T' || text[close + 2] == 't');
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Child start(const ProcessSpec& spec) {
  std::vector<std::string> argv_strings{spec.program};
  argv_strings.insert(argv_strings.end(), spec.args.begin(), spec.args.end());
  std::vector<std::string> env_strings = spec.env;
  auto argv = pointers(argv_strings);
  auto envp = pointers(env_strings);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const int devnull = spec.discard_stdout ? ::open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until execve.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], STDERR_FILENO);
    if (devnull >= 0) ::dup2(devnull, STDOUT_FILENO);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  if (devnull >= 0) ::close(devnull);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  Child child;
  child.label = spec.label;
  child.pid = pid;
  child.stderr_fd = fds[0];
  return child;
}

ProcessExit exit_of(const Child& child) {
  ProcessExit e;
  e.label = child.label;
  if (WIFSIGNALED(child.status)) {
    e.signal = WTERMSIG(child.status);
  } else {
    e.exit_code = WEXITSTATUS(child.status);
  }
  e.stderr_tail.assign(child.tail.begin(), child.tail.end());
  return e;
}

// Every spec started, or none: where one cannot start, those already started are killed and
// reaped before the error propagates.
std::vector<Child> start_all(const std::vector<ProcessSpec>& specs) {
  std::vector<Child> children;
  try {
    for (const auto& spec : specs) children.push_back(start(spec));
  } catch (...) {
    signal_all(children, SIGKILL);
    for (auto& c : children) ::waitpid(c.pid, nullptr, 0);
    throw;
  }
  return children;
}

// Up to 50 ms for any child's stderr to have something to read.
void wait_for_output(const std::vector<Child>& children) {
  std::vector<pollfd> fds;
  for (const auto& c : children) {
    if (c.stderr_fd >= 0) fds.push_back({c.stderr_fd, POLLIN, 0});
  }
  ::poll(fds.data(), fds.size(), 50);
}

// Relays what the children wrote; a pipe at its end is closed.
void relay_output(std::vector<Child>& children, const SuperviseOptions& o) {
  for (auto& c : children) {
    if (c.stderr_fd >= 0 && drain(c, o) == Read::end) {
      ::close(c.stderr_fd);
      c.stderr_fd = -1;
    }
  }
}

// The children that ended since the last call, reaped, with the rest of their stderr relayed.
std::vector<std::size_t> reap_ended(std::vector<Child>& children, const SuperviseOptions& o) {
  std::vector<std::size_t> ended;
  for (std::size_t i = 0; i < children.size(); ++i) {
    Child& c = children[i];
    if (c.running && ::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
      c.running = false;
      while (c.stderr_fd >= 0 && drain(c, o) == Read::data) {
      }
      ended.push_back(i);
    }
  }
  return ended;
}

// Several children can end in one round (the survivors of a crashed rank fail right after
// it): one killed by a signal, then the first in spec order, is the cause.
void note_first_failure(SupervisedRun& run, const std::vector<Child>& children, const std::vector<std::size_t>& ended) {
  for (std::size_t i : ended) {
    const int s = children[i].status;
    const bool failed = WIFSIGNALED(s) || WEXITSTATUS(s) != 0;
    if (!failed) continue;
    if (!run.first_failure || (WIFSIGNALED(s) && !WIFSIGNALED(children[*run.first_failure].status))) {
      run.first_failure = i;
    }
  }
}

// How each child ended, in spec order, its last line relayed even without a newline.
std::vector<ProcessExit> final_exits(std::vector<Child>& children, const SuperviseOptions& o) {
  std::vector<ProcessExit> exits;
  for (auto& c : children) {
    if (c.stderr_fd >= 0) ::close(c.stderr_fd);
    if (!c.partial_line.empty()) relay_line(c, c.partial_line, o);
    exits.push_back(exit_of(c));
  }
  return exits;
}

// `signal` to every child still running, SIGKILL at once to one that is stopped (is_stopped).
void stop_all(std::vector<Child>& children, int signal) {
  signal_all(children, signal);
  for (auto& c : children) {
    if (c.running && is_stopped(c.pid)) ::kill(c.pid, SIGKILL);
  }
}

}  // namespace

std::string ProcessExit::describe() const {
  if (signal != 0) {
    return label + " was killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
  }
  return label + " exited with status " + std::to_string(exit_code);
}

std::string ProcessExit::tail(std::size_t lines) const {
  std::string text;
  for (std::size_t i = stderr_tail.size() > lines ? stderr_tail.size() - lines : 0; i < stderr_tail.size(); ++i) {
    text += (text.empty() ? "" : "\n") + stderr_tail[i];
  }
  return text;
}

std::optional<std::string> ProcessExit::bad_input() const {
  if (signal != 0 || exit_code != 2) return std::nullopt;
  for (auto line = stderr_tail.rbegin(); line != stderr_tail.rend(); ++line) {
    if (const auto at = line->find(kBadInputPrefix); at != std::string::npos)
      return line->substr(at + kBadInputPrefix.size());
  }
  return std::nullopt;
}

std::vector<std::string> environment_with(const std::vector<std::string>& overrides,
                                          const std::function<bool(std::string_view name)>& drop) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('=') + 1);
    if (drop && drop(std::string_view(name).substr(0, name.size() - 1))) continue;
    bool replaced = false;
    for (const auto& o : overrides) replaced = replaced || o.compare(0, name.size(), name) == 0;
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "";
  for (std::size_t start = 0; start <= dirs.size();) {
    const auto end = dirs.find(':', start);
    const auto candidate = std::filesystem::path(dirs.substr(start, end - start)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

std::string current_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

SupervisedRun run_supervised(const std::vector<ProcessSpec>& specs, const SuperviseOptions& o) {
  SupervisedRun run;
  catch_interruptions();
  std::vector<Child> children = start_all(specs);

  std::optional<Clock::time_point> stopping_since;
  std::size_t running = children.size();
  while (running > 0) {
    wait_for_output(children);
    if (o.on_poll && !stopping_since) o.on_poll();
    relay_output(children, o);
    const std::vector<std::size_t> ended = reap_ended(children, o);
    running -= ended.size();
    if (!run.first_failure && !stopping_since) note_first_failure(run, children, ended);
    if (interruption_signal() != 0) run.interrupted = true;
    if (run.first_failure && !stopping_since && o.on_first_failure) o.on_first_failure();
    if ((run.first_failure || run.interrupted) && !stopping_since) {
      stopping_since = Clock::now();
      // The children are stopped by the signal that stopped us (a SIGINT stays one in their reasons,
      // never "Terminated"), else, after a child's failure, by SIGTERM.
      stop_all(children, run.interrupted ? interruption_signal() : SIGTERM);
    }
    if (stopping_since && Clock::now() - *stopping_since > o.grace) signal_all(children, SIGKILL);
  }
  run.exits = final_exits(children, o);
  return run;
}

}  // namespace ddpbench
