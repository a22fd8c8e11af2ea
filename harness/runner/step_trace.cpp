#include "harness/runner/step_trace.hpp"

#include <cstdlib>
#include <set>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "harness/base/atomic_file.hpp"
#include "harness/base/clock.hpp"
#include "harness/base/gzip.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/scratch_dir.hpp"
#include "harness/base/statistics.hpp"
#include "harness/base/text_file.hpp"
#include "harness/control/row_outputs.hpp"
#include "harness/distributed/communicator.hpp"
#include "harness/distributed/cross_process_sum.hpp"
#include "harness/launch/rank_environment.hpp"
#include "harness/runner/device.hpp"
#include "harness/timing/named_range.hpp"

// Declared in torch/csrc/profiler/kineto_shim.h, which needs libkineto's headers that the
// wheel leaves out; the definition is in libtorch_cpu.
namespace torch::autograd::profiler {
TORCH_API void addMetadataJson(const std::string& key, const std::string& value);
}  // namespace torch::autograd::profiler

namespace ddpbench {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// CPU ops always; CUDA kernels, copies and runtime calls (CUPTI) where the row runs on a GPU.
std::set<ActivityType> activities(const c10::Device& device) {
  std::set<ActivityType> kinds{ActivityType::CPU};
  if (device.is_cuda()) kinds.insert(ActivityType::CUDA);
  return kinds;
}

}  // namespace

std::filesystem::path row_file(const RunConfig& config) {
  // Only ranks that ddpbench launched (their --out is its scratch file) take the launcher's.
  const char* launched = std::getenv("DDPBENCH_LAUNCHED");
  const char* file = std::getenv("DDPBENCH_ROW_FILE");
  if (launched != nullptr && std::string_view(launched) == "1" && file != nullptr && *file != '\0') return file;
  if (config.out.empty()) return {};
  return std::filesystem::absolute(config.out);
}

std::filesystem::path row_folder(const RunConfig& config) {
  const std::filesystem::path file = row_file(config);
  return file.empty() ? file : file.parent_path();
}


void require_trace_writable(const std::filesystem::path& result_file, int64_t rank) {
  const std::string name = trace_file_name(result_file, rank);
  for (const std::string& file : {name, name + ".gz"}) {
    require_writable(result_file.parent_path() / file, "--trace-steps (rank " + std::to_string(rank) + "'s trace)");
  }
}

StepTrace::StepTrace(const RunConfig& config, const DistContext& dist)
    : config_(config), dist_(dist), range_(trace_step_range(config)) {
  if (!range_) return;
  const std::filesystem::path result_file = row_file(config);
  if (result_file.empty()) {
    throw InputError("--trace-steps: the traces are written beside the row's JSON; give --out FILE.json");
  }
  require_trace_writable(result_file, dist.rank);
  kineto::prepareProfiler(ProfilerConfig(ProfilerState::KINETO), activities(dist.device));
}

StepTrace::~StepTrace() {
  if (running_) {
    try {
      (void)kineto::disableProfiler();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a row already failing keeps its own error
    }
  }
}

bool StepTrace::between_steps(int64_t global_step, bool step_runs) {
  if (running_ && global_step == range_->second + 1) {
    stop();
    return true;
  }
  if (range_ && !running_ && !trace_ && step_runs && global_step == range_->first) {
    start();
    return true;
  }
  return false;
}

void StepTrace::align_ranks(const char* why) const {
  if (!dist_.comm) return;
  auto token = at::zeros({1}, at::TensorOptions().device(dist_.device));
  dist_.comm->sum(token, why);
  synchronize(dist_.device);
}

void StepTrace::start() {
  const auto started = Clock::now();
  kineto::enableProfiler(ProfilerConfig(ProfilerState::KINETO), activities(dist_.device));
  running_ = true;
  // Holistic Trace Analysis finds a trace's rank with the pattern "rank":<space><digits>, as
  // Python's json.dumps writes torch.profiler's distributedInfo: written so here.
  const std::string backend = dist_.comm ? dist_.comm->backend_name() : "none";
  kineto::addMetadataJson("distributedInfo", "{\"backend\": " + nlohmann::json(backend).dump() +
                                                 ", \"rank\": " + std::to_string(dist_.rank) +
                                                 ", \"world_size\": " + std::to_string(dist_.world_size) +
                                                 ", \"pg_count\": " + (dist_.comm ? "1" : "0") + "}");
  kineto::addMetadataJson("ddpbench", nlohmann::json{{"row", config_.row_name()},
                                                     {"host", this_host_name()},
                                                     {"first_step", range_->first},
                                                     {"last_step", range_->second}}
                                          .dump());
  // Every rank leaves a barrier within about one message's latency of the others, plus however
  // long it waits for its core: the mark after each of kClockSyncRounds barriers is where
  // `ddpbench trace` aligns the clocks of ranks on different hosts, on the rounds' median.
  named_mark("ddpbench clock sync warm-up");  // the profiler's first range pays its set-up, not a mark's
  for (int round = 0; round < kClockSyncRounds; ++round) {
    align_ranks("the trace's clock barrier");
    named_mark(kClockSyncMark);
  }
  switch_s_ += seconds_since(started);
}

void StepTrace::stop() {
  const auto started = Clock::now();
  // The last traced step's kernels are recorded once they have run.
  synchronize(dist_.device);
  trace_ = kineto::disableProfiler();
  running_ = false;
  // Ranks stop in their own time: the first to stop would start its next step and wait in its
  // first collective for the last, timing the other's stop as its own step.
  align_ranks("the barrier after the trace");
  switch_s_ += seconds_since(started);
}

TraceRecord StepTrace::save() {
  TraceRecord record;
  if (!range_) return record;
  const auto started = Clock::now();
  const std::filesystem::path result_file = row_file(config_);
  std::string name = trace_file_name(result_file, dist_.rank);
  std::string failure;
  uint32_t crc = 0;
  try {
    if (!trace_) {
      throw std::runtime_error("the profiler never stopped (the row ended before step " +
                               std::to_string(range_->second) + ")");
    }
    // The profiler writes to a name it is given: a folder made afresh, never a name beside the
    // row's file where a user's file (an input) may lie.
    const ScratchDir scratch_dir("ddpbench-trace");
    const std::filesystem::path scratch = scratch_dir / name;
    trace_->save(scratch.string());
    trace_.reset();
    std::string bytes = read_text_file(scratch, "the trace just saved");
    if (bytes.size() > kGzipAboveBytes) {
      name += ".gz";
      bytes = gzip_bytes(bytes);
    }
    crc = crc32_of(bytes);
    write_file_atomically(result_file.parent_path() / name, bytes);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  // Every rank says whether it saved, whether gzipped, and its file's CRC-32 (exact in a double).
  const auto mine = at::tensor(std::vector<double>{failure.empty() ? 1.0 : 0.0, name.ends_with(".gz") ? 1.0 : 0.0,
                                                   static_cast<double>(crc)},
                               at::TensorOptions().dtype(at::kDouble));
  const at::Tensor all =
      dist_.comm ? all_gather_rows(*dist_.comm, mine.to(dist_.device), "the gather of saved traces").cpu().contiguous()
                 : mine.unsqueeze(0);
  if (!failure.empty()) {
    throw std::runtime_error("--trace-steps: rank " + std::to_string(dist_.rank) + " could not save its trace: " + failure);
  }
  for (int64_t r = 0; r < dist_.world_size; ++r) {
    if (all[r][0].item<double>() == 0) {
      throw std::runtime_error("--trace-steps: rank " + std::to_string(r) + " could not save its trace (its error "
                               "is in its output)");
    }
    record.files.push_back(trace_file_name(result_file, r) + (all[r][1].item<double>() != 0 ? ".gz" : ""));
    record.crc32.push_back(static_cast<uint32_t>(all[r][2].item<double>()));
  }
  record.first_step = range_->first;
  record.last_step = range_->second;
  record.profiler_switch_s = switch_s_;
  record.save_s = seconds_since(started);
  return record;
}

void add_step_times(TraceRecord& trace, const std::vector<StepRecord>& steps, double untraced_p50_s,
                    int64_t warmup_steps) {
  // Warm-up steps are slow for reasons of their own: beside steady ones they are no profiler's cost.
  std::vector<double> traced;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto step = static_cast<int64_t>(i);
    if (step >= std::max(trace.first_step, warmup_steps) && step <= trace.last_step) traced.push_back(steps[i].time_s);
  }
  if (!traced.empty()) trace.traced_step_time_s = quantiles(traced).p50;
  trace.untraced_step_time_s = untraced_p50_s;
}

}  // namespace ddpbench
