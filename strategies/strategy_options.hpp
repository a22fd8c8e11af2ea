#pragma once
// What a strategy is asked to do, apart from the model, data and devices it is handed:
// precision, the DDP and DataParallel settings. LibTorch-free, so the command line can name
// these choices and build the options without LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/base/enum_names.hpp"

namespace ddpbench {

enum class AmpMode { off, fp16, bf16 };
enum class SgdImpl { loop, foreach, fused };
enum class DpImpl { replicas, libtorch };
// How DDP reduces a gradient bucket: ddpbench's timed allreduce; the same with the bucket
// compressed to fp16 or bf16 for the wire (PyTorch's fp16_compress_hook and
// bf16_compress_hook: cast, allreduce, divide, cast back); or the Reducer's own built-in
// FP16_COMPRESS hook, which runs out of sight (no per-bucket times).
enum class CommHook { allreduce, fp16, bf16, builtin_fp16 };

inline constexpr EnumName<AmpMode> kAmpModeNames[] = {
    {AmpMode::off, "off"}, {AmpMode::fp16, "fp16"}, {AmpMode::bf16, "bf16"}};
// loop: LibTorch's SGD, one update per parameter; foreach: multi-tensor ops; fused: one kernel.
inline constexpr EnumName<SgdImpl> kSgdImplNames[] = {
    {SgdImpl::loop, "loop"}, {SgdImpl::foreach, "foreach"}, {SgdImpl::fused, "fused"}};
inline constexpr EnumName<DpImpl> kDpImplNames[] = {{DpImpl::replicas, "replicas"}, {DpImpl::libtorch, "libtorch"}};
inline constexpr EnumName<CommHook> kCommHookNames[] = {
    {CommHook::allreduce, "allreduce"}, {CommHook::fp16, "fp16"}, {CommHook::bf16, "bf16"},
    {CommHook::builtin_fp16, "builtin-fp16"}};

struct StrategyOptions {
  std::string model;  // the model's registry name (LibTorch's data_parallel needs its type)
  std::string device = "auto";  // --device: auto, cpu, cuda[:N]
  int64_t batch_size = 256;  // per process
  int64_t warmup_steps = 0;  // the steps the row's steady figures leave out
  AmpMode amp = AmpMode::off;
  bool channels_last = false;
  bool cuda_graphs = false;  // the step captured once in a CUDA graph and replayed (cuda_graph_step.hpp)

  // ddp: DistributedDataParallel's arguments of the same names
  double bucket_mb = 25;  // bucket_cap_mb
  bool overlap = true;    // allreduce buckets during backward (off: all after the last gradient)
  bool sync_bn = true;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  CommHook comm_hook = CommHook::allreduce;

  // dp
  std::string devices_flag = "all";   // as given, for messages
  std::vector<int64_t> devices;       // empty: every visible GPU; -1: a CPU device, N: cuda:N
  DpImpl dp_impl = DpImpl::replicas;
  bool allow_single_device = false;
};

}  // namespace ddpbench
