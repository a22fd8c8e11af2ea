#include "harness/runner/progress_watch.hpp"

#include <exception>

namespace ddpbench {
namespace {

constexpr auto kReadEvery = std::chrono::milliseconds(500);
// As the ranks' own diagnosis: three heartbeats without a beat is a rank that stopped.
constexpr auto kSilenceWindow = std::chrono::milliseconds(1500);
constexpr std::size_t kKept = 8;

}  // namespace

ProgressWatch::ProgressWatch(const LauncherStore& store) : store_(store) {}

void ProgressWatch::poll() {
  const auto now = std::chrono::steady_clock::now();
  if (!history_.empty() && now - history_.back().first < kReadEvery) return;
  try {
    history_.emplace_back(now, store_.progress());
  } catch (const std::exception&) {
    return;  // a read that fails is no record; the next poll tries again
  }
  while (history_.size() > kKept) history_.pop_front();
}

void ProgressWatch::judge_now() {
  const auto now = std::chrono::steady_clock::now();
  Records latest;
  try {
    latest = store_.progress();
  } catch (const std::exception&) {
    return;
  }
  const Records* before = nullptr;
  double silence_s = 0;
  for (const auto& [when, records] : history_) {
    if (now - when >= kSilenceWindow) {
      before = &records;
      silence_s = std::chrono::duration<double>(now - when).count();
    }
  }
  verdict_ = blame(before != nullptr ? *before : Records{}, latest, silence_s, -1);
}

}  // namespace ddpbench
