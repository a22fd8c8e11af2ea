#include "harness/launch/interruption.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace ddpbench {
namespace {

std::atomic<int> g_signal{0};

void on_signal(int signal) {
  // A second Ctrl-C: stop now. Children die with this process (PR_SET_PDEATHSIG).
  if (signal == SIGINT && g_signal.load() != 0) ::_exit(interrupted_exit_code(SIGINT));
  int none = 0;
  g_signal.compare_exchange_strong(none, signal);
}

}  // namespace

void catch_interruptions() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    return true;
  }();
  (void)installed;
}

int interruption_signal() { return g_signal.load(); }

int interrupted_exit_code(int signal) { return 128 + signal; }

}  // namespace ddpbench
