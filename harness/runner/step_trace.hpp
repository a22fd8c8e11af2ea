#pragma once
// --trace-steps A:B: PyTorch's profiler (Kineto) records global steps A to B on every rank: CPU
// ops and the harness's named ranges, and on a GPU CUDA kernels and copies through CUPTI. Each
// rank saves ROW.rank<N>.trace.json (gzipped past kGzipAboveBytes) in the row's folder, with the
// distributed metadata Holistic Trace Analysis reads. The profiler starts and stops between
// steps and saves after training; all three are timed, so the runner leaves them out of the
// row's training time.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/control/run_config.hpp"
#include "harness/distributed/dist_context.hpp"
#include "reports/run_result.hpp"
#include "reports/trace_merge.hpp"

namespace torch::autograd::profiler {
struct ProfilerResult;
}  // namespace torch::autograd::profiler

namespace ddpbench {

/// A trace larger than this is written gzipped (NAME.trace.json.gz), which Perfetto and HTA read.
inline constexpr std::uintmax_t kGzipAboveBytes = 32u << 20;

/// The row's result file as the user named it (--out; for ranks ddpbench launched, whose --out is
/// its scratch file, the launcher's), absolute; empty when the row writes none.
std::filesystem::path row_file(const RunConfig& config);

/// The folder a row's files go to: row_file's; empty when the row writes no file.
std::filesystem::path row_folder(const RunConfig& config);


/// Throws InputError unless rank `rank`'s trace beside `result_file` can be written under either
/// name it may take (plain or gzipped; a folder in its way included): a rank that cannot would
/// fail the row after all its training.
void require_trace_writable(const std::filesystem::path& result_file, int64_t rank);

class StepTrace {
 public:
  /// Prepares the profiler (its one-time start-up falls before training); inert without
  /// --trace-steps.
  StepTrace(const RunConfig& config, const DistContext& dist);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  /// Before global step `global_step` (`step_runs`: false for the loader's last call of an
  /// epoch, past its steps): stops the profiler after the last traced step, or starts it
  /// before the first, outside every step's range and time. True when it did either, so that
  /// the step's time starts after it. Every rank calls it at every step (it may barrier).
  bool between_steps(int64_t global_step, bool step_runs);
  [[nodiscard]] bool running() const { return running_; }
  /// Seconds spent starting and stopping the profiler so far.
  [[nodiscard]] double switch_s() const { return switch_s_; }

  /// After training, on every rank: saves this rank's trace and returns the files every rank
  /// saved and what tracing cost (an untraced record without --trace-steps). A collective: every
  /// rank calls it. Throws when any rank could not save, which fails the row.
  TraceRecord save();

 private:
  void start();
  void stop();
  // A barrier of every rank, on the device too; nothing without ranks.
  void align_ranks(const char* why) const;

  RunConfig config_;
  const DistContext& dist_;
  std::optional<std::pair<int64_t, int64_t>> range_;
  bool running_ = false;
  double switch_s_ = 0;
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> trace_;
};

/// Fills the trace's step times: the median of rank 0's traced `steps` (all steps, in order) past
/// warm-up alone (not measured when the trace holds warm-up steps only), and beside it the row's
/// steady median (`untraced_p50_s`: its steady steps leave the traced ones out).
void add_step_times(TraceRecord& trace, const std::vector<StepRecord>& steps, double untraced_p50_s,
                    int64_t warmup_steps);

}  // namespace ddpbench
