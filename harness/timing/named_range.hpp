#pragma once
// The harness's own ranges (row, epoch, step, phases, gradient buckets) under one name in both
// profilers: an NVTX range for Nsight Systems, and a record_function range for PyTorch's
// profiler (Kineto), which costs a thread-local check when no profiler is on.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>

#include "harness/timing/nvtx.hpp"

namespace ddpbench {

/// A range that begins and ends on the constructing thread; `profiler_name`, where given, is
/// its name in PyTorch's profiler instead of `name`.
class NamedScope {
 public:
  explicit NamedScope(const std::string& name, int64_t payload = 0, const std::string& profiler_name = {})
      : nvtx_(name, payload), record_(at::RecordScope::USER_SCOPE) {
    if (record_.isActive()) record_.before(profiler_name.empty() ? name : profiler_name);
  }
  NamedScope(const NamedScope&) = delete;
  NamedScope& operator=(const NamedScope&) = delete;

 private:
  nvtx::ScopedRange nvtx_;
  at::RecordFunction record_;
};

/// An instant on both timelines: an NVTX mark, and a zero-length profiler range.
inline void named_mark(const std::string& name, int64_t payload = 0) {
  nvtx::mark(name, payload);
  at::RecordFunction record(at::RecordScope::USER_SCOPE);
  if (record.isActive()) record.before(name);
}

/// A range that may end on another thread than it began on (a communication callback, a CUDA
/// stream's host function); ending it twice ends it once. The profiler records a range's end
/// only on a thread that holds its thread-local state, which a backend's threads do not: the
/// range carries the starting thread's state and ends under it.
class OpenRange {
 public:
  explicit OpenRange(const std::string& name, int64_t payload = 0)
      : nvtx_(nvtx::start_range(name, payload)), record_(std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE)) {
    if (record_->isActive()) {
      state_.emplace();
      record_->before(name);
    } else {
      record_.reset();
    }
  }
  ~OpenRange() { end(); }
  OpenRange(const OpenRange&) = delete;
  OpenRange& operator=(const OpenRange&) = delete;

  /// True while there is something to end: an NVTX range, or one the profiler records.
  [[nodiscard]] bool open() const { return nvtx_ != 0 || record_ != nullptr; }

  void end() {
    nvtx::end_range(std::exchange(nvtx_, 0));
    if (auto record = std::move(record_)) {
      at::ThreadLocalStateGuard guard(*state_);
      record->end();
    }
  }

 private:
  nvtx::RangeId nvtx_;
  std::unique_ptr<at::RecordFunction> record_;
  std::optional<at::ThreadLocalState> state_;
};

}  // namespace ddpbench
