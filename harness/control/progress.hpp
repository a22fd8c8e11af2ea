#pragma once
// Training progress on stderr: one rewritten line on a terminal (step, loss, images/s, ETA),
// plain lines every log interval otherwise, so logs of CI and batch jobs stay readable.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ddpbench {

class Progress {
 public:
  /// `enabled` false (non-main ranks) makes every call a no-op.
  Progress(std::string row, int64_t total_steps, int64_t log_interval_steps, bool enabled,
           std::FILE* stream = stderr);
  /// After step `done` (1-based) of `total_steps`.
  void update(int64_t done, double loss, double images_per_s);
  /// Ends the terminal line, if one is open.
  void finish();

 private:
  std::string row_;
  int64_t total_steps_;
  int64_t log_interval_steps_;
  bool enabled_;
  bool terminal_;
  std::FILE* stream_;
  std::chrono::steady_clock::time_point start_;
  bool line_open_ = false;
};

/// The sweep's progress before row `index` (0-based) of `total`: rows done and left, and an
/// ETA from the mean wall time of the rows measured so far (`measured_row_s`; rows skipped or
/// kept by --resume cost nothing and are not in it), e.g. "3 done, 7 left, ETA 12:40";
/// "ETA after the first measured row" until one is.
std::string sweep_progress(std::size_t index, std::size_t total, const std::vector<double>& measured_row_s);

}  // namespace ddpbench
