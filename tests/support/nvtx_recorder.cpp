// An NVTX injection library for tests: loaded by every NVTX3 copy in a process that has
// NVTX_INJECTION64_PATH pointing at it, it appends each range and marker to the file named
// by DDPBENCH_NVTX_LOG, one line each ("push ddpbench forward 12", "start ddpbench
// allreduce bucket 0 3", "op aten::conv2d"), so tests can see what Nsight Systems would.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

std::mutex g_mutex;

void record(const std::string& line) {
  const char* path = std::getenv("DDPBENCH_NVTX_LOG");
  if (path == nullptr) return;
  std::lock_guard lock(g_mutex);
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fputs((line + "\n").c_str(), f);
    std::fclose(f);
  }
}

std::string domain_name(nvtxDomainHandle_t domain) {
  return domain == nullptr ? "default" : reinterpret_cast<const char*>(domain);
}

std::string describe(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  std::string text = domain_name(domain) + " " + (a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?");
  if (a->payloadType == NVTX_PAYLOAD_TYPE_INT64) text += " " + std::to_string(a->payload.llValue);
  return text;
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  // The handle is a copy of the name, kept for the life of the process.
  return reinterpret_cast<nvtxDomainHandle_t>(::strdup(name));
}
int NVTX_API domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  record("push " + describe(d, a));
  return 0;
}
int NVTX_API domain_pop(nvtxDomainHandle_t d) {
  record("pop " + domain_name(d));
  return 0;
}
nvtxRangeId_t NVTX_API domain_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  static std::atomic<uint64_t> next{1};
  record("start " + describe(d, a));
  return next++;
}
void NVTX_API domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { record("end " + domain_name(d) + " " + std::to_string(id)); }
void NVTX_API domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { record("mark " + describe(d, a)); }
int NVTX_API push_a(const char* message) {
  record(std::string("op ") + message);
  return 0;
}
int NVTX_API pop() { return 0; }

template <class F>
void hook(NvtxFunctionTable table, unsigned size, unsigned id, F function) {
  if (id <= size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  // The positive control of tests that expect no ranges: the recorder was loaded.
  record("injection loaded");
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) != 0) {
    hook(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
    hook(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_push);
    hook(table, size, NVTX_CBID_CORE2_DomainRangePop, &domain_pop);
    hook(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &domain_start);
    hook(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &domain_end);
    hook(table, size, NVTX_CBID_CORE2_DomainMarkEx, &domain_mark);
  }
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) != 0) {
    hook(table, size, NVTX_CBID_CORE_RangePushA, &push_a);
    hook(table, size, NVTX_CBID_CORE_RangePop, &pop);
  }
  return 1;
}
