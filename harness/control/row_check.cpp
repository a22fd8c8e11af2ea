#include "harness/control/row_check.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "data/cifar10_files.hpp"
#include "data/cifar10_records.hpp"
#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/units.hpp"

namespace ddpbench {
namespace {

std::string ranks_text(int64_t world) {
  return std::to_string(world) + (world == 1 ? " rank (0)" : " ranks (0-" + std::to_string(world - 1) + ")");
}

bool reads_cifar10(const RunConfig& c) {
  return c.dataset == DatasetKind::cifar10 ||
         (c.dataset == DatasetKind::auto_detect && !find_cifar10(c.data_dir).empty());
}

// A:B as --trace-steps writes it.
std::string steps_text(const std::pair<int64_t, int64_t>& range) {
  return std::to_string(range.first) + ":" + std::to_string(range.second);
}

}  // namespace

int64_t machine_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

int64_t training_images(const RunConfig& c) {
  return reads_cifar10(c) ? kCifar10TrainFiles * kCifar10RecordsPerFile : c.synthetic_train_images;
}

int64_t row_steps(const RunConfig& c, int64_t world) {
  // validate() bounds every factor to 2^30 or less, so the products below cannot overflow.
  const int64_t shard = (training_images(c) + world - 1) / world;
  int64_t per_epoch = (shard + c.batch_size - 1) / c.batch_size;
  if (c.max_steps) per_epoch = std::min(per_epoch, *c.max_steps);
  return per_epoch * c.epochs;
}

void check_trace_steps(const RunConfig& config, int64_t row_steps) {
  const auto range = trace_step_range(config);
  if (!range) return;
  const std::string flag = "--trace-steps " + steps_text(*range);
  if (range->second >= row_steps) {
    throw InputError(flag + ": the row runs " + std::to_string(row_steps) + " steps (0-" +
                     std::to_string(row_steps - 1) + ")");
  }
  const int64_t steady = std::max<int64_t>(0, row_steps - config.warmup_steps);
  const int64_t traced_steady = std::max<int64_t>(0, range->second - std::max(range->first, config.warmup_steps) + 1);
  if (steady > 0 && traced_steady == steady) {
    throw InputError(flag + ": it traces every step after warm-up (steps " + std::to_string(config.warmup_steps) + "-" +
                     std::to_string(row_steps - 1) + "), and traced steps are left out of the steady figures: trace "
                     "fewer steps, or run more (--max-steps)");
  }
}

void check_world(const RunConfig& c, const RowStart& start) {
  if (start.distributed) return;
  if (c.nproc != 1) {
    throw InputError("--nproc " + std::to_string(c.nproc) + ": strategy '" + c.strategy +
                     "' runs in one process (--strategy ddp runs one per device)");
  }
  if (start.world_size != 1) {
    throw InputError("--strategy " + c.strategy + " runs in one process, but this process is one of a world of " +
                     std::to_string(start.world_size) + " (" + start.world_source +
                     "): each would train the whole row and write the same --out; start it once, or run --strategy "
                     "ddp");
  }
}

void check_backend(const RunConfig& c) {
  if (c.backend == CommBackend::nccl && c.device == "cpu") {
    throw InputError("--backend nccl needs CUDA devices; this row runs on --device cpu (--backend gloo or auto runs "
                     "CPU ranks)");
  }
}

void check_classes(const RunConfig& c) {
  if (c.num_classes < kCifar10Classes) {
    throw InputError("--num-classes " + std::to_string(c.num_classes) + ": the data's labels run 0-" +
                     std::to_string(kCifar10Classes - 1) + " (CIFAR-10's " + std::to_string(kCifar10Classes) +
                     " classes, which the synthetic set draws too): the head needs at least " +
                     std::to_string(kCifar10Classes) + " outputs");
  }
}

void check_replicas(const RunConfig& c) {
  if (c.strategy != "dp" && c.strategy != "torch-dp") return;
  const auto replicas = static_cast<int64_t>(device_list(c).size());  // "all": counted where they are seen
  if (replicas > 0 && c.batch_size % replicas != 0) {
    throw InputError("--batch-size " + std::to_string(c.batch_size) + " does not divide over " +
                     std::to_string(replicas) + " dp devices (--devices " + c.devices + ")");
  }
}

void check_steps_and_ranks(const RunConfig& c, const RowStart& start) {
  const int64_t world = start.world_size;
  const auto outside = [&](const char* flag, int64_t rank) {
    throw InputError(std::string(flag) + " " + std::to_string(rank) + ": the row has " + ranks_text(world));
  };
  if (c.inject_fault_rank && *c.inject_fault_rank >= world) outside("--inject-fault-rank", *c.inject_fault_rank);
  if (c.inject_slowdown_rank && *c.inject_slowdown_rank >= world)
    outside("--inject-slowdown-rank", *c.inject_slowdown_rank);
  const int64_t steps = row_steps(c, world);
  if (trace_step_range(c) && c.out.empty()) {
    throw InputError("--trace-steps: the traces are written beside the row's JSON; give --out FILE.json");
  }
  check_trace_steps(c, steps);
  if (c.inject_fault_step && *c.inject_fault_step >= steps) {
    throw InputError("--inject-fault-step " + std::to_string(*c.inject_fault_step) + ": the row runs " +
                     std::to_string(steps) + " steps (0-" + std::to_string(steps - 1) + ")" +
                     (c.max_steps ? " after --max-steps " + std::to_string(*c.max_steps) : std::string()));
  }
}

void check_inputs_present(const RunConfig& c, const RowStart& start) {
  if (!c.init_from.empty() && !std::filesystem::is_regular_file(c.init_from)) {
    throw InputError("--init-from: no file '" + c.init_from + "'");
  }
  // A cache folder that is a file (or lies under one) failed the row when the set was written
  // (exit 1, its folders made).
  const std::string cache = resolved_cache_dir(c);
  if (start.check_data && !cache.empty() && c.dataset != DatasetKind::cifar10) {
    const std::vector<std::filesystem::path> missing = missing_folders(cache);
    const std::filesystem::path nearest = missing.empty() ? std::filesystem::path(cache) : missing.back().parent_path();
    std::error_code ec;
    if (!nearest.empty() && std::filesystem::exists(nearest, ec) && !std::filesystem::is_directory(nearest, ec)) {
      throw InputError("--cache-dir '" + c.cache_dir + "': '" + nearest.string() + "' is a file, not a folder");
    }
  }
  if (!start.check_data || c.dataset == DatasetKind::synthetic) return;
  const std::filesystem::path folder = find_cifar10(c.data_dir);
  if (folder.empty()) {
    if (c.dataset == DatasetKind::auto_detect) return;  // the synthetic set, with a warning
    throw InputError("no CIFAR-10 binary files under '" + c.data_dir + "' (expected " +
                     (std::filesystem::path(c.data_dir) / kCifar10Folder / "data_batch_1.bin").string() +
                     "; scripts/fetch-cifar10 downloads them)");
  }
  if (const std::string problem = cifar10_files_problem(folder); !problem.empty()) throw InputError(problem);
}

void check_memory(const RunConfig& c, const RowStart& start) {
  if (start.memory_bytes <= 0) return;
  // Every rank holds its whole training and test set (3,073 bytes an image as records), beside a
  // LibTorch process's own memory; validate() bounds the sets so that nothing below overflows.
  const int64_t images = training_images(c) + (reads_cifar10(c) ? kCifar10RecordsPerFile : c.synthetic_test_images);
  const double head_bytes = static_cast<double>(c.num_classes) * kWidestHeadParametersPerClass * kHeadBytesPerParameter;
  const double per_rank =
      static_cast<double>(kRankMemoryFloorBytes) + static_cast<double>(images) * kCifar10RecordBytes + head_bytes;
  const double needed = per_rank * static_cast<double>(start.local_ranks);
  if (needed > static_cast<double>(start.memory_bytes)) {
    throw InputError(std::to_string(start.local_ranks) + " ranks on this machine (" + start.world_source +
                     ") need at least " + format_bytes(static_cast<int64_t>(std::min(needed, 9e18))) + " (each " +
                     format_bytes(static_cast<int64_t>(per_rank)) + ": its " +
                     format_rate(static_cast<double>(images)) + " images in memory, " +
                     format_bytes(static_cast<int64_t>(std::min(head_bytes, 9e18))) + " for its head of " +
                     std::to_string(c.num_classes) + " classes and a LibTorch process's own " +
                     format_bytes(kRankMemoryFloorBytes) + "); this machine has " + format_bytes(start.memory_bytes));
  }
}

void check_row(const RunConfig& c, const RowStart& start) {
  validate(c);
  check_world(c, start);
  check_backend(c);
  check_classes(c);
  check_replicas(c);
  check_inputs_present(c, start);
  check_steps_and_ranks(c, start);
  check_memory(c, start);
}

}  // namespace ddpbench
