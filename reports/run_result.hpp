#pragma once
// The result schema: plain structs of numbers in SI units (seconds, bytes, images per
// second, accuracy as a fraction). Nothing here formats; reporters do that when they print.
// A number that was not measured is NaN (null in JSON).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/base/statistics.hpp"
#include "harness/base/step_record.hpp"
#include "reports/cpu_peak.hpp"

namespace ddpbench {

inline constexpr const char* kResultSchema = "ddpbench/result/v1";

// interrupted: SIGINT or SIGTERM stopped the row; its finished steps are kept.
enum class RunStatus { ok, skipped, failed, interrupted };

/// A distributed row whose slowest rank takes this much longer than its fastest (own time,
/// slowest over fastest, minus one), the same rank the slowest step after step beyond chance
/// (p below kStragglerAlpha), has a straggler: its ranks are shown.
inline constexpr double kStragglerSpread = 0.10;
inline constexpr double kStragglerAlpha = 0.05;

/// One rank's view of a distributed row: its epoch, its steps after warm-up, and where its
/// steps' time went (means per step), so the rank that holds the others back can be named.
struct RankTiming {
  int64_t rank = 0;
  double train_time_s = kNotMeasured;
  Quantiles step_time_s;  // steps after warm-up
  int64_t peak_memory_bytes = 0;  // this rank's, over its devices
  double compute_s = kNotMeasured;  // its own work: the step without data and without waiting
  double data_s = kNotMeasured;     // waiting for its loader
  double wait_s = kNotMeasured;     // waiting for the other ranks (StepRecord::compute_s)
};

/// Steps a row traced with PyTorch's profiler (--trace-steps). They are left out of the
/// steady figures, and starting, stopping and saving the profiler out of train_time_s.
struct TraceRecord {
  int64_t first_step = -1;  // global steps, both traced; -1: the row traced nothing
  int64_t last_step = -1;
  std::vector<std::string> files;  // one per rank, in rank order: names in the row JSON's folder
  std::vector<uint32_t> crc32;     // each file's CRC-32 as its rank saved it: proves it is this run's
  double traced_step_time_s = kNotMeasured;  // median of the traced steps past warm-up on rank 0
  double untraced_step_time_s = kNotMeasured;  // median of rank 0's steady steps, the traced ones left out
  double profiler_switch_s = kNotMeasured;  // starting and stopping the profiler on rank 0
  double save_s = kNotMeasured;             // writing rank 0's trace, after training

  [[nodiscard]] bool traced() const { return first_step >= 0; }
};

struct RunResult {
  std::string name;
  std::string mode;        // sweep rows: faithful | controlled; empty for a lone run
  int64_t repetition = 0;  // sweep rows run --repeat times: 0, 1, ...
  std::string strategy;
  int64_t world_size = 1;
  std::string device;
  int64_t threads_per_rank = 0;  // intra-op threads each rank computed with; 0: not recorded
  std::string dataset;         // cifar10 | synthetic
  std::string dataset_origin;  // the folder read, or the synthetic seed and sizes
  RunStatus status = RunStatus::ok;
  std::string reason;          // why a row was skipped or failed

  double train_time_s = kNotMeasured;  // the training epochs as the tutorial timed them
  double total_time_s = kNotMeasured;  // the whole row: data, model, training, evaluation
  double lockstep_wait_s = kNotMeasured;  // a lockstep run's waits for the other build's turns, left out
                                         // of train_time_s (scripts/lib/lockstep.py); else not measured
  double images_per_s = kNotMeasured;  // images trained (all processes) / train_time_s
  double steady_images_per_s = kNotMeasured;  // after warm-up, all processes
  Quantiles step_time_s;                      // steps after warm-up
  PhaseSeconds mean_phase_s;                  // per step after warm-up
  double train_flops_per_image = kNotMeasured;  // forward + backward (models/flop_count.hpp)
  double achieved_flops_per_s = kNotMeasured;   // train_flops_per_image x steady_images_per_s

  double test_accuracy = kNotMeasured;  // fraction of eval_images classified right
  int64_t eval_images = 0;
  bool eval_cut = false;
  double final_loss = kNotMeasured;

  int64_t epochs = 0;
  int64_t steps = 0;             // optimizer steps run (all epochs)
  int64_t steps_per_epoch = 0;   // of a full epoch
  bool epoch_cut = false;        // --max-steps cut an epoch short
  int64_t warmup_steps = 0;
  int64_t global_batch = 0;      // images per optimizer step, all processes
  int64_t images_trained = 0;    // all processes
  int64_t train_images = 0;      // the training set's images the loader found; 0: not recorded

  int64_t peak_memory_bytes = 0;
  std::string peak_memory_source;  // cuda-allocator | host-rss

  // One per rank of a distributed row. A collective is a barrier, so every rank's step takes
  // as long as the slowest's: the straggler is the rank with the most time of its own per step
  // (compute and data: the least waiting for the others), whether its work or its loader held
  // it, and the spread is that time over the fastest rank's.
  std::vector<RankTiming> ranks;
  int64_t slowest_rank = -1;                  // -1: no rank's own time was measured
  double rank_spread = kNotMeasured;          // slowest rank's own time (compute + data) / fastest's (1: even)
  std::string straggler_cause;                // where the slowest rank's excess lies: "compute" or "data"
  double rank_compute_spread = kNotMeasured;  // the same over compute alone
  // The slowest rank was the slowest in `straggler_steps` of `straggler_of_steps` steady steps;
  // how often chance would have some rank so (slowest_of_ranks_p: the binomial at 1 / ranks a
  // step, times the ranks it was picked from).
  int64_t straggler_steps = 0;
  int64_t straggler_of_steps = 0;
  double straggler_p = kNotMeasured;
  // The verdict: the spread beyond kStragglerSpread, and the same rank slowest beyond chance
  // (p below kStragglerAlpha) where the steps were recorded rank by rank.
  bool straggler = false;

  // Where the ranks ran: the nodes (SLURM's step list, else this host where every rank shared
  // it; empty where the launcher did not say) and how many ranks each held, in that order.
  std::vector<std::string> nodes;
  std::vector<int64_t> ranks_per_node;

  nlohmann::json config = nlohmann::json::object();  // the row's full RunConfig, by option name
  nlohmann::json strategy_details = nlohmann::json::object();  // what only the strategy knows
  std::vector<StepRecord> step_records;               // rank 0's steps
  TraceRecord trace;                                  // --trace-steps; untraced rows write none
};

struct GpuInfo {
  std::string name;
  int64_t memory_bytes = 0;
  std::string compute_capability;
};

struct Environment {
  std::string host;
  std::string os;
  std::string cpu_model;
  int64_t cpu_cores = 0;
  CpuFacts cpu;  // what the CPU says of itself, for its peak (files from before: unknown)
  std::vector<GpuInfo> gpus;
  std::string driver_version;
  std::string cuda_runtime_version;
  std::string cudnn_version;
  std::string nccl_version;
  std::string libtorch_version;
  std::string compiler;
  std::string build_type;
  std::string git_revision;
  // What the threads and cores a run could use depend on beyond its configuration (empty: the
  // file's writer did not record it): OMP_NUM_THREADS as set ("unset" where it is not), and the
  // CPUs the writing process could run on (its affinity, as a list: "0-1", "0,2-3").
  std::string omp_num_threads;
  std::string cpu_affinity;
};

/// ddpbench's run of a row without SyncBatchNorm, beside a twin that cannot have it (CPUs):
/// the row's name with this suffix, the twin's compared_with.
inline constexpr const char* kWithoutSyncBnSuffix = ".no-sync-bn";

/// A sweep row as planned: what the tutorial published for it and what it needs.
struct SweepRowInfo {
  std::string name;
  std::string mode;
  double tutorial_seconds = kNotMeasured;  // the tutorial's table, where it has the row
  int64_t devices = 1;                     // GPUs the row needs
  std::string reference_of = {};           // PyTorch's twin of this row (--reference): the row's name
  // A twin that could not run the row as planned (SyncBatchNorm on CPUs) is compared with
  // ddpbench's run of the row as the twin runs it: that run's name ("ddp-2gpu.no-sync-bn"),
  // and what both sides left out. Empty: the twin is compared with the row itself.
  std::string compared_with = {};
  std::string compared_without = {};
  // What the sweep's preset (the CPU table) changed in the row's configuration, one "option
  // before → after" each, as the plan applied it: a report lists them row by row.
  std::vector<std::string> preset_changes = {};
};


/// What a sweep ran: the preset or file, the platform's note, and the rows in order.
struct SweepInfo {
  std::string preset;      // tutorial | cpu | a sweep file's path
  std::string note;        // said at the top of the report (e.g. "no GPU: the CPU preset")
  std::string baseline_row;
  int64_t repeat = 1;
  std::vector<SweepRowInfo> rows;
  nlohmann::json projection = nullptr;  // sweep --project: the projection's options (reports/projection.hpp)
  // The sweep's rows/ folder relative to its reports (--reports-dir may put them elsewhere): where
  // the HTML report links the rows' traces. A relative path, never a URL.
  std::string rows_href = "rows";
};

/// One result file: what ran, where, and its rows.
struct ResultDocument {
  std::string schema = kResultSchema;
  std::string tool_version;
  std::string created_utc;
  std::vector<std::string> argv;
  Environment environment;
  std::vector<RunResult> runs;
  std::optional<SweepInfo> sweep;  // set by `ddpbench sweep`
  // The writer's option table at its defaults, by option name: a reader of another version
  // reads an option it does not know, absent from one side, as that side's default (a new
  // option at its default is the same setting). Empty in files from before it was written.
  nlohmann::json option_defaults = nlohmann::json::object();
};

/// Whether `name` in `mode` is ddpbench's run of a row for the comparison with its twin
/// alone (a twin's compared_with): not a row of the table, the projection or the advice.
bool is_comparison_run(const ResultDocument& document, const std::string& name, const std::string& mode);

/// A measurement as JSON: the number, or null where it was not measured (NaN, infinite).
nlohmann::json json_number(double value);
/// `object[key]` where it is a number, else `fallback`.
double json_number_or(const nlohmann::json& object, const char* key, double fallback);
/// A step's (or a mean step's) phases as JSON, one "<phase>_s" key each.
nlohmann::json phases_json(const PhaseSeconds& phases);

std::string_view status_name(RunStatus status);
/// A failure's words as a row's reason: a c10 error's message without its backtrace (the
/// "Exception raised from ..." line and every "frame #N: ..." line), which buried it.
std::string reason_text(std::string_view what);
/// A row as people read it across modes: "name (mode)", or the name where it has no mode.
std::string row_label(const std::string& name, const std::string& mode);
RunStatus parse_status(std::string_view name);  // throws std::invalid_argument
/// How a row's ranks were placed, for the reports: "2 nodes x 2 ranks", "2 nodes: 2+1 ranks";
/// empty for a row on one node.
std::string placement_text(const RunResult& r);

void to_json(nlohmann::json& j, const RunResult& r);
void from_json(const nlohmann::json& j, RunResult& r);
void to_json(nlohmann::json& j, const CpuFacts& c);
void from_json(const nlohmann::json& j, CpuFacts& c);
void to_json(nlohmann::json& j, const Environment& e);
void from_json(const nlohmann::json& j, Environment& e);
void to_json(nlohmann::json& j, const SweepInfo& s);
void from_json(const nlohmann::json& j, SweepInfo& s);
void to_json(nlohmann::json& j, const ResultDocument& d);
void from_json(const nlohmann::json& j, ResultDocument& d);

/// The current UTC time as ISO 8601, for created_utc.
std::string utc_timestamp();

}  // namespace ddpbench
