#pragma once
// RunConfig: every setting of one benchmark row, defaulting to the tutorial's experiment.
// Plain data with no LibTorch; each field is set through the option table in
// harness/control/run_options.hpp, so the CLI flag and the JSON key share one kebab-case name.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/data_options.hpp"
#include "harness/base/enum_names.hpp"
#include "harness/distributed/comm_backend.hpp"
#include "strategies/strategy_options.hpp"

namespace ddpbench {

enum class TestTransform { train, plain };
enum class NvtxMode { off, on, ops };
enum class Preset { none, fast };
// Test only: what --inject-fault-rank does at --inject-fault-step. kill: SIGKILL itself (a
// crash); hang: stop before the step's first collective and wait there, alive and beating.
enum class InjectedFault { kill, hang, kill_in_collective };

// `train`: the tutorial's quirk of applying the random train transforms to the test set.
inline constexpr EnumName<TestTransform> kTestTransformNames[] = {
    {TestTransform::train, "train"},
    {TestTransform::plain, "plain"},
};
inline constexpr EnumName<NvtxMode> kNvtxModeNames[] = {{NvtxMode::off, "off"}, {NvtxMode::on, "on"}, {NvtxMode::ops, "ops"}};
inline constexpr EnumName<Preset> kPresetNames[] = {{Preset::none, "none"}, {Preset::fast, "fast"}};
// Where --inject-slowdown puts its busy work: the loader's phase, forward, the start of
// backward (before any gradient is ready), or after the optimizer step.
enum class SlowedPhase { data, forward, backward, optimizer };
inline constexpr EnumName<SlowedPhase> kSlowedPhaseNames[] = {{SlowedPhase::data, "data"},
                                                            {SlowedPhase::forward, "forward"},
                                                            {SlowedPhase::backward, "backward"},
                                                            {SlowedPhase::optimizer, "optimizer"}};

inline constexpr EnumName<InjectedFault> kInjectedFaultNames[] = {
    {InjectedFault::kill, "kill"}, {InjectedFault::hang, "hang"}, {InjectedFault::kill_in_collective, "kill-in-collective"}};

struct RunConfig {
  std::string name;  // the row's name in reports; empty means the strategy's name
  std::string strategy = "single";
  std::string model = "resnet50";
  int64_t num_classes = 1000;  // torchvision's default head, which the tutorial kept

  DatasetKind dataset = DatasetKind::auto_detect;
  std::string data_dir = "data";
  int64_t synthetic_train_images = 50000;
  int64_t synthetic_test_images = 10000;
  std::string cache_dir = "auto";  // the synthetic set as record files: auto, none, or a folder
  LoaderKind loader = LoaderKind::host;
  int64_t workers = 10;
  int64_t crop_padding = 0;  // RandomCrop(32, padding=P); the tutorial used none
  TestTransform test_transform = TestTransform::train;

  int64_t epochs = 1;
  int64_t batch_size = 256;  // per process
  double lr = 0.001;
  double momentum = 0.9;
  std::optional<int64_t> max_steps;         // per epoch; unset runs the whole epoch
  int64_t warmup_steps = 5;                 // excluded from steady-state figures
  std::optional<int64_t> max_eval_batches;  // unset evaluates the whole test set

  std::string device = "auto";  // auto|cpu|cuda|cuda:N
  int64_t threads = 0;          // intra-op CPU threads; 0 leaves LibTorch's choice
  uint64_t seed = 0;
  int64_t log_interval_steps = 20;

  // Distributed strategies (ddp): one process per device.
  int64_t nproc = 1;            // processes this command starts, unless a launcher started it
  // Nodes the ranks span. Recorded as the launcher placed them (with nproc as the ranks there
  // were); above 1 it asks a launcher's ranks (srun's) to check that they span as many.
  int64_t nodes = 1;
  CommBackend backend = CommBackend::auto_select;  // auto: NCCL on CUDA devices, Gloo on CPUs
  double bucket_mb = 25;        // gradient bucket cap in MiB, as DDP's bucket_cap_mb
  bool overlap = true;          // allreduce buckets during backward (off: after it)
  bool sync_bn = true;          // SyncBatchNorm, as the tutorial converted the model
  bool find_unused_parameters = false;   // DDP's find_unused_parameters
  bool gradient_as_bucket_view = false;  // DDP's gradient_as_bucket_view
  CommHook comm_hook = CommHook::allreduce;  // how a gradient bucket is reduced (compression)
  int64_t timeout_s = 300;      // a collective or the rendezvous waiting longer fails the row
  std::optional<int64_t> inject_fault_rank;  // test only: this rank kills itself (or hangs)...
  std::optional<int64_t> inject_fault_step;  // ...at this step
  InjectedFault inject_fault_kind = InjectedFault::kill;
  // Test only: each step's training (as the host saw it) stretched by this fraction of busy
  // work, on every rank or on one: a slower build, or a straggler, that does real extra work.
  double inject_slowdown = 0;
  std::optional<int64_t> inject_slowdown_rank;
  SlowedPhase inject_slowdown_phase = SlowedPhase::optimizer;

  // DataParallel (dp): one process, the batch scattered over devices.
  std::string devices = "all";  // all visible CUDA devices, or a list: 0,1,2,3 (CUDA) or cpu,cpu
  DpImpl dp_impl = DpImpl::replicas;
  bool allow_single_device = false;  // run dp on one device instead of skipping it

  // Precision and the GPU fast path.
  AmpMode amp = AmpMode::off;   // autocast for forward and loss; fp16 with dynamic loss scaling
  bool tf32 = true;             // TF32 in cuDNN and cuBLAS (the tutorial's A100 convolutions ran so)
  bool channels_last = false;   // NHWC parameters and inputs
  bool cudnn_benchmark = false;
  SgdImpl sgd = SgdImpl::loop;
  bool sync_every_step = true;  // read the loss back every step, as the tutorial's loss.item()
  bool cuda_graphs = false;     // single: the whole step captured in one CUDA graph at the last warm-up step, replayed
  Preset preset = Preset::none; // fast: the best combination of the above (see apply_preset)

  // Profiling.
  NvtxMode nvtx = NvtxMode::on;
  std::string profile_steps;    // A:B: cudaProfilerStart before step A, Stop after step B
  std::string trace_steps;      // A:B: PyTorch's profiler (Kineto) traces steps A to B on every rank

  std::string out;              // result JSON; empty writes none
  std::string save_checkpoint;  // trained weights as named tensors (torch.load reads them)
  std::string init_from;        // weights to start from, same format

  /// The name rows and reports use: `name` if set, else the strategy.
  [[nodiscard]] std::string row_name() const { return name.empty() ? strategy : name; }
};

/// The most of any count a row is configured with (images, batch, steps, epochs, classes, ranks):
/// no run has more, and every product of them that a row's work is reckoned from fits in 64 bits.
inline constexpr int64_t kMostOfACount = int64_t{1} << 30;
/// DDP's bucket caps in MiB: a byte at the least (a cap in whole bytes), a terabyte at the most
/// (above it a cap is no cap, and its bytes would soon not be a 64-bit number).
inline constexpr double kLeastBucketMb = 1.0 / (1 << 20);
inline constexpr double kMostBucketMb = 1e6;
/// A week: longer is no timeout anyone means, and a steady clock's deadline past it can wrap.
inline constexpr int64_t kMostTimeoutS = 7 * 24 * 3600;
/// Threads a row may ask for (its loader's workers, its intra-op threads): no machine has more cores.
inline constexpr int64_t kMostThreads = 4096;

/// Checks ranges and combinations; throws InputError naming the flag at fault.
void validate(const RunConfig& config);

/// Whether --cuda-graphs can capture `strategy`'s step (single and its twin).
bool cuda_graphs_capture(std::string_view strategy);

/// What a captured step cannot hold (validate() checks it where --cuda-graphs is on); throws
/// InputError naming the flag. `with_device_and_warm_up` false leaves out the two settings a
/// sweep's CPU table sets itself for a graphed row it skips on a machine without a GPU.
void validate_cuda_graphs(const RunConfig& config, bool with_device_and_warm_up = true);

/// What PyTorch's own implementation of a row (torch-*) has no equivalent for, as
/// "--flag: why; what to do"; nullopt when it can run `config` as given. The run command refuses such a
/// PyTorch row; the sweep skips such a twin.
std::optional<std::string> pytorch_lacks(const RunConfig& config);

/// --profile-steps A:B as a pair; nullopt when unset. Throws InputError when malformed.
std::optional<std::pair<int64_t, int64_t>> profile_step_range(const RunConfig& config);

/// --trace-steps A:B as a pair; nullopt when unset. Throws InputError when malformed.
std::optional<std::pair<int64_t, int64_t>> trace_step_range(const RunConfig& config);

/// --devices as entries: -1 for a CPU device, N for cuda:N; empty for "all".
std::vector<int64_t> device_list(const RunConfig& config);

/// --cache-dir resolved: auto is $XDG_CACHE_HOME/ddpbench (or ~/.cache/ddpbench), none is
/// empty (the synthetic set stays in memory).
std::string resolved_cache_dir(const RunConfig& config);

/// The parts of `config` each lower layer is given.
DatasetOptions dataset_options(const RunConfig& config);
StrategyOptions strategy_options(const RunConfig& config);

}  // namespace ddpbench
