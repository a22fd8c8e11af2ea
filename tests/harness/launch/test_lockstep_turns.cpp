#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "harness/launch/lockstep_turns.hpp"

namespace ddpbench {
namespace {

// The coordinator's end of the socket: one listening socket, one accepted rank.
class Coordinator {
 public:
  Coordinator() {
    path_ = (std::filesystem::temp_directory_path() / ("ddpb-turns-" + std::to_string(::getpid()) + ".sock")).string();
    ::unlink(path_.c_str());
    listener_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path_.c_str());
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || ::listen(listener_, 4) != 0) {
      throw std::runtime_error("cannot listen on " + path_);
    }
  }
  ~Coordinator() {
    if (rank_ >= 0) ::close(rank_);
    ::close(listener_);
    ::unlink(path_.c_str());
  }
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  void accept() { rank_ = ::accept(listener_, nullptr, nullptr); }
  void send(const std::string& line) { ASSERT_GT(::send(rank_, line.data(), line.size(), MSG_NOSIGNAL), 0); }
  // One line from the rank (blocking).
  std::string line() {
    std::string text;
    char c = 0;
    while (::recv(rank_, &c, 1, 0) == 1 && c != '\n') text += c;
    return text;
  }
  void hang_up() {
    ::close(rank_);
    rank_ = -1;
  }

 private:
  std::string path_;
  int listener_ = -1;
  int rank_ = -1;
};

TEST(LockstepTurns, OffWithoutTheEnvironment) {
  ::unsetenv("DDPBENCH_LOCKSTEP_SOCKET");
  EXPECT_EQ(LockstepTurns::from_environment("single", 0, 1), nullptr);
}

TEST(LockstepTurns, BadEnvironmentIsNamed) {
  ::setenv("DDPBENCH_LOCKSTEP_SOCKET", "/nonexistent/ddpbench.sock", 1);
  ::setenv("DDPBENCH_LOCKSTEP_ARM", "two words", 1);
  EXPECT_THROW(LockstepTurns::from_environment("single", 0, 1), std::runtime_error);
  ::setenv("DDPBENCH_LOCKSTEP_ARM", "baseline", 1);
  try {
    (void)LockstepTurns::from_environment("single", 0, 1);
    FAIL() << "connected to a socket that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ddpbench.sock"), std::string::npos) << e.what();
  }
  ::unsetenv("DDPBENCH_LOCKSTEP_SOCKET");
  ::unsetenv("DDPBENCH_LOCKSTEP_ARM");
}

// The rank says who it is, blocks until "go", says which step it ran, and at the end of its
// training is held until "bye"; the time it was held counts as waited.
TEST(LockstepTurns, HelloTurnsDoneAndEndHeldUntilBye) {
  Coordinator coordinator;
  ::setenv("DDPBENCH_LOCKSTEP_SOCKET", coordinator.path().c_str(), 1);
  ::setenv("DDPBENCH_LOCKSTEP_ARM", "candidate", 1);
  auto turns = LockstepTurns::from_environment("ddp-2", 1, 2);
  ::unsetenv("DDPBENCH_LOCKSTEP_SOCKET");
  ::unsetenv("DDPBENCH_LOCKSTEP_ARM");
  ASSERT_NE(turns, nullptr);
  coordinator.accept();
  EXPECT_EQ(coordinator.line(), "hello candidate ddp-2 1 2 " + std::to_string(::getpid()));

  auto waiting = std::async(std::launch::async, [&] { return turns->wait_for_turn(); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout) << "took a turn not given";
  coordinator.send("go\n");
  EXPECT_TRUE(waiting.get());
  EXPECT_GE(turns->waited_s(), 0.15);
  turns->release(7);
  EXPECT_EQ(coordinator.line(), "done 7");

  // A turn still held when the next wait begins is passed first (an epoch's loader ran dry).
  coordinator.send("go\n");
  EXPECT_TRUE(turns->wait_for_turn());
  waiting = std::async(std::launch::async, [&] { return turns->wait_for_turn(); });
  EXPECT_EQ(coordinator.line(), "done -1");
  coordinator.send("go\n");
  EXPECT_TRUE(waiting.get());

  auto ending = std::async(std::launch::async, [&] { turns->end(); });
  EXPECT_EQ(coordinator.line(), "done -1");
  EXPECT_EQ(coordinator.line(), "end");
  // A turn given before the coordinator read "end" is no release.
  coordinator.send("go\n");
  EXPECT_EQ(ending.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout) << "not held until bye";
  const double before_bye = turns->waited_s();
  coordinator.send("bye\n");
  ending.get();
  EXPECT_GE(turns->waited_s() - before_bye, 0.15);
}

// A coordinator gone before the turn: the row cannot be timed in lockstep, and says so.
TEST(LockstepTurns, ACoordinatorThatHangsUpIsAnError) {
  Coordinator coordinator;
  LockstepTurns turns(coordinator.path(), "hello baseline single 0 1 1");
  coordinator.accept();
  EXPECT_EQ(coordinator.line(), "hello baseline single 0 1 1");
  coordinator.hang_up();
  try {
    (void)turns.wait_for_turn();
    FAIL() << "waited on a coordinator that hung up";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("hung up"), std::string::npos) << e.what();
  }
  turns.end();  // and the end does not wait for a bye that cannot come
}

}  // namespace
}  // namespace ddpbench
