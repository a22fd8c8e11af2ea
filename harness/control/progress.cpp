#include "harness/control/progress.hpp"

#include <unistd.h>

namespace ddpbench {

std::string sweep_progress(std::size_t index, std::size_t total, const std::vector<double>& measured_row_s) {
  const std::size_t left = total > index ? total - index : 0;
  std::string text = std::to_string(index) + " done, " + std::to_string(left) + " left, ";
  if (measured_row_s.empty()) return text + "ETA after the first measured row";
  double sum = 0;
  for (double s : measured_row_s) sum += s;
  const auto eta_s = static_cast<long>(sum / static_cast<double>(measured_row_s.size()) * static_cast<double>(left) + 0.5);
  char eta[32];
  std::snprintf(eta, sizeof eta, "ETA %ld:%02ld:%02ld", eta_s / 3600, eta_s / 60 % 60, eta_s % 60);
  return text + eta;
}

Progress::Progress(std::string row, int64_t total_steps, int64_t log_interval_steps, bool enabled,
                   std::FILE* stream)
    : row_(std::move(row)),
      total_steps_(total_steps),
      log_interval_steps_(log_interval_steps),
      enabled_(enabled),
      terminal_(enabled && ::isatty(::fileno(stream)) == 1),
      stream_(stream),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t done, double loss, double images_per_s) {
  if (!enabled_) return;
  const bool last = done == total_steps_;
  if (!terminal_ && !last && done % log_interval_steps_ != 0) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_steps_ - done) : 0.0;
  const auto eta_s = static_cast<long>(eta + 0.5);
  std::fprintf(stream_, "%s[%s] step %lld/%lld  loss %.4f  %.0f images/s  ETA %ld:%02ld%s",
               terminal_ ? "\r\033[K" : "", row_.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_steps_), loss, images_per_s, eta_s / 60, eta_s % 60,
               terminal_ ? "" : "\n");
  std::fflush(stream_);
  line_open_ = terminal_;
}

void Progress::finish() {
  if (line_open_) std::fputc('\n', stream_);
  line_open_ = false;
}

}  // namespace ddpbench
