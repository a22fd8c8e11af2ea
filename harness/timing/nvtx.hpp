#pragma once
// NVTX ranges in the "ddpbench" domain, so an Nsight Systems timeline shows the harness's
// phases under the same names as the JSON. Compiled to nothing without the NVTX3 headers
// (DDPBENCH_HAVE_NVTX unset); switched off at run time with set_enabled(false).
#include <atomic>
#include <cstdint>
#include <string>

#if defined(DDPBENCH_HAVE_NVTX) && !defined(DDPBENCH_NVTX_DISABLED)
#include <nvtx3/nvToolsExt.h>
#define DDPBENCH_NVTX_ACTIVE 1
#endif

namespace ddpbench::nvtx {

/// True when this build contains NVTX calls at all.
constexpr bool compiled_in() {
#ifdef DDPBENCH_NVTX_ACTIVE
  return true;
#else
  return false;
#endif
}

inline std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag{true};
  return flag;
}
inline void set_enabled(bool on) { enabled_flag() = on; }

/// Loads the NVTX injection (Nsight Systems' collector, a test's recorder) now, whatever the
/// mode: its one-time cost then falls before the first timed step, not inside it.
inline void initialize() {
#ifdef DDPBENCH_NVTX_ACTIVE
  nvtxInitialize(nullptr);
#endif
}
inline bool enabled() { return compiled_in() && enabled_flag().load(std::memory_order_relaxed); }

#ifdef DDPBENCH_NVTX_ACTIVE
inline nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA("ddpbench");
  return handle;
}
inline nvtxEventAttributes_t attributes(const char* name, int64_t payload) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = payload;
  return a;
}
#endif

/// A push/pop range: begins and ends on the constructing thread.
class ScopedRange {
 public:
  explicit ScopedRange(const std::string& name, int64_t payload = 0) {
#ifdef DDPBENCH_NVTX_ACTIVE
    if ((active_ = enabled())) {
      auto a = attributes(name.c_str(), payload);
      nvtxDomainRangePushEx(domain(), &a);
    }
#else
    (void)name;
    (void)payload;
#endif
  }
  ~ScopedRange() {
#ifdef DDPBENCH_NVTX_ACTIVE
    if (active_) nvtxDomainRangePop(domain());
#endif
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  [[maybe_unused]] bool active_ = false;
};

/// A start/end range's handle, 0 when none was opened (NVTX off or compiled out).
using RangeId = uint64_t;

/// Opens a start/end range, which may end on another thread than it started (autograd's
/// backward threads, communication callbacks, a CUDA stream's host function).
inline RangeId start_range(const std::string& name, int64_t payload = 0) {
#ifdef DDPBENCH_NVTX_ACTIVE
  if (enabled()) {
    auto a = attributes(name.c_str(), payload);
    return nvtxDomainRangeStartEx(domain(), &a);
  }
#else
  (void)name;
  (void)payload;
#endif
  return 0;
}

inline void end_range(RangeId id) {
#ifdef DDPBENCH_NVTX_ACTIVE
  if (id != 0) nvtxDomainRangeEnd(domain(), id);
#else
  (void)id;
#endif
}

/// An instant marker.
inline void mark(const std::string& name, int64_t payload = 0) {
#ifdef DDPBENCH_NVTX_ACTIVE
  if (enabled()) {
    auto a = attributes(name.c_str(), payload);
    nvtxDomainMarkEx(domain(), &a);
  }
#else
  (void)name;
  (void)payload;
#endif
}

}  // namespace ddpbench::nvtx
