#include "harness/launch/lockstep_turns.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "harness/launch/interruption.hpp"

namespace ddpbench {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::runtime_error lockstep_error(const std::string& what) {
  return std::runtime_error("lockstep (DDPBENCH_LOCKSTEP_SOCKET): " + what);
}

}  // namespace

std::unique_ptr<LockstepTurns> LockstepTurns::from_environment(const std::string& row, int64_t rank, int64_t world) {
  const std::string socket_path = environment("DDPBENCH_LOCKSTEP_SOCKET");
  if (socket_path.empty()) return nullptr;
  const std::string arm = environment("DDPBENCH_LOCKSTEP_ARM");
  if (arm.empty() || arm.find_first_of(" \n") != std::string::npos) {
    throw lockstep_error("DDPBENCH_LOCKSTEP_ARM must name this build in one word (got '" + arm + "')");
  }
  if (row.empty() || row.find_first_of(" \n") != std::string::npos) {
    throw lockstep_error("the row's name '" + row + "' is not one word");
  }
  return std::make_unique<LockstepTurns>(socket_path, "hello " + arm + " " + row + " " + std::to_string(rank) + " " +
                                                          std::to_string(world) + " " + std::to_string(::getpid()));
}

LockstepTurns::LockstepTurns(const std::string& socket_path, const std::string& hello) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(address.sun_path)) {
    throw lockstep_error("the socket path " + socket_path + " is longer than a Unix socket's " +
                         std::to_string(sizeof(address.sun_path) - 1) + " characters");
  }
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw lockstep_error(std::string("socket: ") + std::strerror(errno));
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw lockstep_error("cannot connect to " + socket_path + ": " + std::strerror(error));
  }
  send_line(hello);
}

LockstepTurns::~LockstepTurns() {
  if (fd_ >= 0) ::close(fd_);
}

void LockstepTurns::send_line(const std::string& line) {
  const std::string text = line + "\n";
  std::size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = ::send(fd_, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw lockstep_error("the coordinator hung up (" + std::string(std::strerror(errno)) + ")");
    sent += static_cast<std::size_t>(n);
  }
}

std::optional<std::string> LockstepTurns::read_line() {
  while (buffered_.find('\n') == std::string::npos) {
    char chunk[64];
    // A blocking read: the process sleeps in the kernel until the coordinator speaks.
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR && interruption_signal() == 0) continue;
    if (n <= 0) {
      hang_up_ = n == 0 || errno == EINTR ? "hung up" : "could not be read (" + std::string(std::strerror(errno)) + ")";
      return std::nullopt;
    }
    buffered_.append(chunk, static_cast<std::size_t>(n));
  }
  std::string line = buffered_.substr(0, buffered_.find('\n'));
  buffered_.erase(0, line.size() + 1);
  return line;
}

bool LockstepTurns::wait_for_turn() {
  release(-1);  // a turn still held (an epoch's loader ran dry) passes first, or both would wait
  const auto start = std::chrono::steady_clock::now();
  const auto line = read_line();
  waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!line) {
    if (interruption_signal() != 0) return false;
    throw lockstep_error("the coordinator " + hang_up_ + " before this build's turn");
  }
  if (*line != "go") throw lockstep_error("the coordinator said '" + *line + "', not 'go'");
  holding_ = true;
  return true;
}

void LockstepTurns::release(int64_t step) {
  if (!holding_) return;
  holding_ = false;
  send_line("done " + std::to_string(step));
}

void LockstepTurns::end() {
  if (ended_) return;
  ended_ = true;
  try {
    if (holding_) release(-1);
    send_line("end");
  } catch (const std::runtime_error&) {
    return;  // the coordinator is gone (the gate was stopped): nothing to be held for
  }
  // Held until the other build's training is over too, so that this one's evaluation does not
  // run beside the other's last steps. A coordinator that hangs up lets it go as well.
  // Only "bye" releases it: a "go" sent before the coordinator read "end" is no release.
  const auto start = std::chrono::steady_clock::now();
  for (auto line = read_line(); line && *line != "bye"; line = read_line()) {
  }
  waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ddpbench
