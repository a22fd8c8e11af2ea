#include "reports/sweep_summary.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "reports/cpu_peak.hpp"
#include "reports/device_peaks.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

std::string text_of(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "unset";
  if (value.is_boolean()) return value.get<bool>() ? "on" : "off";
  return value.dump();
}

json config_value(const RunResult& r, const char* key) {
  return r.config.contains(key) ? r.config.at(key) : json(nullptr);
}

std::vector<const RunResult*> runs_of(const ResultDocument& doc, const std::string& name, const std::string& mode) {
  std::vector<const RunResult*> runs;
  for (const auto& r : doc.runs) {
    if (r.name == name && r.mode == mode) runs.push_back(&r);
  }
  return runs;
}

// The first repetition of a row that ran ok: what the row ran as.
const RunResult* first_ok_run(const ResultDocument& doc, const std::string& name, const std::string& mode) {
  for (const RunResult* r : runs_of(doc, name, mode)) {
    if (r->status == RunStatus::ok) return r;
  }
  return nullptr;
}

// The CPU cores a row's threads could use: on each node its ranks' intra-op threads, at most
// the node's physical cores (SMT siblings share one core's FMA units); 0 where unknown.
int64_t cores_used(const RunResult& run, const CpuFacts& cpu) {
  if (run.threads_per_rank <= 0) return 0;
  const bool arm_without_topology = cpu.physical_cores <= 0 && cpu.architecture == "aarch64";
  const int64_t cores = cpu.physical_cores > 0 ? cpu.physical_cores : arm_without_topology ? cpu.logical_processors : 0;
  if (cores <= 0) return 0;
  // DataParallel computes each CPU replica's forward on a thread of its own, beside the
  // intra-op threads: as many workers as replicas.
  int64_t replicas = 1;
  const json devices = config_value(run, "devices");
  if (run.strategy == "dp" && devices.is_string()) {
    const std::string list = devices.get<std::string>();
    replicas = 1 + static_cast<int64_t>(std::count(list.begin(), list.end(), ','));
  }
  std::vector<int64_t> ranks_per_node = run.ranks_per_node;
  if (ranks_per_node.empty()) ranks_per_node = {std::max<int64_t>(1, run.world_size)};
  int64_t used = 0;
  for (const int64_t ranks : ranks_per_node) used += std::min(cores, ranks * replicas * run.threads_per_rank);
  return used;
}

// The row's precision and the peak it is held to: its GPUs' data sheet, or its CPU cores.
void set_utilisation(RowSummary& s, const RunResult& run, const Environment& environment) {
  const json amp = config_value(run, "amp");
  const json tf32 = config_value(run, "tf32");
  // TF32 is a CUDA mode: on CPUs the matrix products run in fp32 whatever --tf32 says.
  const bool cuda = run.device.rfind("cuda", 0) == 0;
  s.precision = row_precision(amp.is_string() ? amp.get<std::string>() : "off", cuda && tf32.is_boolean() && tf32.get<bool>());
  if (cuda) {
    if (environment.gpus.empty()) {
      s.peak_source = "no GPU recorded in the result's environment";
      return;
    }
    const std::string& gpu = environment.gpus.front().name;
    const int64_t devices = std::max<int64_t>(1, s.devices);
    s.peak_flops_per_s = peak_flops_per_s(gpu, s.precision);
    s.row_peak_flops_per_s = s.peak_flops_per_s * static_cast<double>(devices);
    s.peak_unit = gpu;
    s.peak_source = std::isfinite(s.peak_flops_per_s)
                        ? gpu + ": NVIDIA's data sheet, dense " + s.precision + ", per GPU"
                        : gpu + " is not in the data-sheet table (reports/device_peaks.cpp): no peak guessed";
  } else if (run.device == "cpu") {
    const CpuCorePeak core = cpu_core_peak(environment.cpu, s.precision);
    s.peak_cores = cores_used(run, environment.cpu);
    s.peak_unit = core.unit;
    s.peak_upper_bound = core.upper_bound;
    if (!core.missing.empty()) {
      s.peak_source = core.missing;
    } else if (s.peak_cores <= 0) {
      s.peak_source = run.threads_per_rank <= 0
                          ? "the row's threads per rank were not recorded (a result from before ddpbench did)"
                          : "the CPU's core count is unknown (cpuinfo gives no core ids)";
    } else {
      s.peak_flops_per_s = core.flops_per_s;
      s.row_peak_flops_per_s = core.flops_per_s * static_cast<double>(s.peak_cores);
      s.peak_source = "per core: " + core.vector_source + ", at " + core.clock_source;
    }
  }
  s.flops_utilisation = s.achieved_flops_per_s / s.row_peak_flops_per_s;
  if (s.flops_utilisation > 1) {
    // Faster than its peak: a figure behind the peak is wrong, and no bound holds.
    s.peak_upper_bound = false;
    s.peak_source += "; the row ran faster than this peak, so a figure behind it (clock, units, cores) is wrong";
  }
}

// The repetition whose rank spread is the median one speaks for the row's ranks.
void set_ranks(RowSummary& s, const std::vector<const RunResult*>& runs) {
  std::vector<const RunResult*> spread;
  for (const RunResult* r : runs) {
    if (r->status == RunStatus::ok && std::isfinite(r->rank_spread)) spread.push_back(r);
  }
  if (spread.empty()) return;
  std::sort(spread.begin(), spread.end(), [](auto* a, auto* b) { return a->rank_spread < b->rank_spread; });
  const RunResult& middle = *spread[(spread.size() - 1) / 2];
  s.ranks = middle.ranks;
  s.slowest_rank = middle.slowest_rank;
  s.rank_spread = middle.rank_spread;
  s.straggler_cause = middle.straggler_cause;
  s.straggler = middle.straggler;
}

// Each planned repetition (0 to planned - 1, and any past it in a file without a sweep) as its
// run ended, or without a status where the document has none.
std::vector<RepetitionOutcome> repetition_outcomes(const std::vector<const RunResult*>& runs, int64_t planned) {
  int64_t count = planned;
  for (const RunResult* r : runs) count = std::max(count, r->repetition + 1);
  std::vector<RepetitionOutcome> outcomes;
  for (int64_t repetition = 0; repetition < count; ++repetition) {
    RepetitionOutcome outcome;
    outcome.repetition = repetition;
    for (const RunResult* r : runs) {
      if (r->repetition != repetition) continue;
      outcome = {repetition, r->status, r->reason, r->steps, r->train_time_s, r->images_per_s};
      break;
    }
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

// The row's status over its repetitions, and the first reason for it.
void set_status(RowSummary& s) {
  s.status = status_over_repetitions(s.outcomes);
  if (s.status == RunStatus::ok) return;
  for (const auto& outcome : s.outcomes) {
    if (outcome.status == s.status) {
      s.reason = outcome.reason;
      return;
    }
  }
  s.reason = "not run";
}

// The medians, spreads and peaks of the repetitions that ran ok.
void set_figures(RowSummary& s, const std::vector<const RunResult*>& runs, const Environment& environment) {
  std::vector<double> train, images, steady, step, step_p90, step_max, accuracy, achieved;
  const RunResult* first_ok = nullptr;
  for (const RunResult* r : runs) {
    if (r->status != RunStatus::ok) continue;
    if (first_ok == nullptr) first_ok = r;
    s.phase_s += r->mean_phase_s;
    step_p90.push_back(r->step_time_s.p90);
    step_max.push_back(r->step_time_s.max);
    achieved.push_back(r->achieved_flops_per_s);
    train.push_back(r->train_time_s);
    images.push_back(r->images_per_s);
    steady.push_back(r->steady_images_per_s);
    step.push_back(r->step_time_s.p50);
    accuracy.push_back(r->test_accuracy);
    s.peak_memory_bytes = std::max(s.peak_memory_bytes, r->peak_memory_bytes);
  }
  s.repetitions = static_cast<int64_t>(train.size());
  if (first_ok == nullptr) return;
  s.train_time_s = median(train);
  s.images_per_s = median(images);
  s.steady_images_per_s = median(steady);
  s.step_time_p50_s = median(step);
  s.step_time_p90_s = median(step_p90);
  s.step_time_max_s = median(step_max);
  s.phase_s = s.phase_s / static_cast<double>(s.repetitions);
  s.train_flops_per_image = first_ok->train_flops_per_image;  // the model's, the same every repetition
  s.achieved_flops_per_s = median(achieved);
  set_utilisation(s, *first_ok, environment);
  for (const auto& record : first_ok->step_records) {
    if (static_cast<int64_t>(s.warmup_step_s.size()) >= first_ok->warmup_steps) break;
    s.warmup_step_s.push_back(record.time_s);
  }
  s.test_accuracy = median(accuracy);
  set_ranks(s, runs);
  s.train_time_min_s = *std::min_element(train.begin(), train.end());
  s.train_time_max_s = *std::max_element(train.begin(), train.end());
  s.unstable = s.repetitions > 1 && (s.train_time_max_s - s.train_time_min_s) > kUnstableRelativeSpread * s.train_time_s;
}

RowSummary summarize_row(const SweepRowInfo& info, const std::vector<const RunResult*>& runs,
                         const Environment& environment, int64_t planned_repetitions) {
  RowSummary s;
  s.name = info.name;
  s.mode = info.mode;
  s.tutorial_seconds = info.tutorial_seconds;
  s.outcomes = repetition_outcomes(runs, planned_repetitions);
  s.planned_repetitions = static_cast<int64_t>(s.outcomes.size());
  set_status(s);
  // What the row ran as: its first repetition that ran ok, else its first record (a skipped or
  // failed row's, which says what was planned).
  const auto ran = std::find_if(runs.begin(), runs.end(), [](const RunResult* r) { return r->status == RunStatus::ok; });
  if (const RunResult* record = ran != runs.end() ? *ran : runs.empty() ? nullptr : runs.front(); record != nullptr) {
    s.devices = devices_ran_on(*record);
    s.world_size = record->world_size;
    s.placement = placement_text(*record);
    s.device = record->device;
    s.dataset = record->dataset;
  }
  set_figures(s, runs, environment);
  return s;
}

}  // namespace

RunStatus status_over_repetitions(const std::vector<RepetitionOutcome>& outcomes) {
  const auto any = [&](RunStatus status) {
    return std::any_of(outcomes.begin(), outcomes.end(), [&](const RepetitionOutcome& o) { return o.status == status; });
  };
  for (const RunStatus worst : {RunStatus::failed, RunStatus::interrupted, RunStatus::skipped}) {
    if (any(worst)) return worst;
  }
  const bool all_ok = !outcomes.empty() &&
                      std::all_of(outcomes.begin(), outcomes.end(), [](const RepetitionOutcome& o) { return o.ran_ok(); });
  return all_ok ? RunStatus::ok : RunStatus::skipped;
}

int64_t devices_ran_on(const RunResult& run) {
  const json listed = run.strategy_details.is_object() ? run.strategy_details.value("devices", json()) : json();
  if (listed.is_array() && !listed.empty()) return static_cast<int64_t>(listed.size());
  const json devices = config_value(run, "devices");
  if ((run.strategy == "dp" || run.strategy == "torch-dp") && devices.is_string() && devices != "all") {
    const std::string list = devices.get<std::string>();
    return 1 + static_cast<int64_t>(std::count(list.begin(), list.end(), ','));
  }
  return std::max<int64_t>(1, run.world_size);
}

std::vector<std::string> sweep_modes(const std::vector<RowSummary>& rows) {
  std::vector<std::string> modes;
  for (const auto& r : rows) {
    if (std::find(modes.begin(), modes.end(), r.mode) == modes.end()) modes.push_back(r.mode);
  }
  return modes;
}

double RowSummary::headline_images_per_s() const { return mode == "controlled" ? steady_images_per_s : images_per_s; }

namespace {

// Options that change neither the work a row does nor its clock (where the output goes, the
// row's name, where the data lies), and those the phrases before them say already. Not
// log-interval-steps: each logged step waits for the device and reads the loss (the clock).
bool said_otherwise(const std::string& key) {
  static const std::set<std::string> kKeys = {"out",      "save-checkpoint", "data-dir", "cache-dir", "name",
                                              "strategy", "nproc",           "nodes",    "devices",   "batch-size",
                                              "sync-bn",  "dataset"};
  return kKeys.contains(key);
}

// An option's value in a row's configuration, or the writer's default where the row does not set it.
json option_value(const RunResult& row, const std::string& key, const json& option_defaults) {
  if (row.config.is_object() && row.config.contains(key)) return row.config.at(key);
  return option_defaults.is_object() && option_defaults.contains(key) ? option_defaults.at(key) : json(nullptr);
}

}  // namespace

std::vector<std::string> differences_from_baseline(const RunResult& row, const RunResult& baseline,
                                                   const json& option_defaults) {
  std::vector<std::string> out;
  if (row.strategy != baseline.strategy) out.push_back("strategy " + row.strategy);
  if (row.world_size != baseline.world_size) out.push_back(std::to_string(row.world_size) + " processes");
  if (const std::string placement = placement_text(row); placement != placement_text(baseline) && !placement.empty()) {
    out.push_back(placement);
  }
  const json devices = config_value(row, "devices");
  if (devices != config_value(baseline, "devices") && !devices.is_null()) out.push_back("devices " + text_of(devices));
  if (row.global_batch != baseline.global_batch) {
    out.push_back("global batch " + std::to_string(row.global_batch) + " (baseline " +
                  std::to_string(baseline.global_batch) + ")");
  }
  if (row.steps_per_epoch != baseline.steps_per_epoch) {
    out.push_back(std::to_string(row.steps_per_epoch) + " steps per epoch (baseline " +
                  std::to_string(baseline.steps_per_epoch) + ")");
  }
  if (row.strategy == "ddp" && row.world_size > 1 && config_value(row, "sync-bn") == json(true)) {
    out.push_back("SyncBatchNorm");
  }
  // Every other option that changes the work or the clock, by option name: the ones people know
  // by another name first, labelled so, then the rest by their flags' names.
  static const std::vector<std::pair<std::string, std::string>> kLabelled = {
      {"amp", "precision"},        {"tf32", "TF32"},        {"channels-last", "channels-last"},
      {"loader", "loader"},        {"workers", "workers"},  {"num-classes", "head size"},
      {"model", "model"},          {"test-transform", "test transform"}, {"crop-padding", "crop padding"},
      {"cudnn-benchmark", "cuDNN benchmark"}, {"dp-impl", "dp implementation"},
  };
  std::vector<std::pair<std::string, std::string>> keys = kLabelled;
  std::set<std::string> listed;
  for (const auto& [key, label] : kLabelled) listed.insert(key);
  for (const json* config : {&row.config, &baseline.config, &option_defaults}) {
    if (!config->is_object()) continue;
    for (const auto& item : config->items()) {
      if (!said_otherwise(item.key()) && listed.insert(item.key()).second) keys.emplace_back(item.key(), item.key());
    }
  }
  for (const auto& [key, label] : keys) {
    const json a = option_value(row, key, option_defaults);
    const json b = option_value(baseline, key, option_defaults);
    if (a != b) out.push_back(label + " " + text_of(a) + " (baseline " + text_of(b) + ")");
  }
  if (row.dataset != baseline.dataset) out.push_back("dataset " + row.dataset + " (baseline " + baseline.dataset + ")");
  return out;
}

namespace {

// The rows a document plans: its sweep's, or each distinct name and mode of its runs.
std::vector<SweepRowInfo> planned_rows(const ResultDocument& doc) {
  if (doc.sweep) return doc.sweep->rows;
  std::vector<SweepRowInfo> rows;
  for (const auto& r : doc.runs) {
    const bool seen = std::any_of(rows.begin(), rows.end(), [&](const SweepRowInfo& i) { return i.name == r.name && i.mode == r.mode; });
    if (!seen) rows.push_back({r.name, r.mode, kNotMeasured, r.world_size, ""});
  }
  return rows;
}

// Repetition i of a row and of its twin ran back to back, on the machine in the same state:
// the median of those pairs' ratios is steadier than the ratio of the medians.
void set_paired_ratios(RowSummary& row, const ResultDocument& doc, const std::string& ours_name,
                       const SweepRowInfo& info) {
  std::vector<double> time_ratios, steady_ratios;
  for (const RunResult* ours : runs_of(doc, ours_name, info.mode)) {
    for (const RunResult* theirs : runs_of(doc, info.name, info.mode)) {
      if (theirs->repetition != ours->repetition || ours->status != RunStatus::ok ||
          theirs->status != RunStatus::ok) {
        continue;
      }
      time_ratios.push_back(theirs->train_time_s / ours->train_time_s);
      steady_ratios.push_back(ours->steady_images_per_s / theirs->steady_images_per_s);
    }
  }
  row.vs_pytorch_train_time = median(time_ratios);
  row.vs_pytorch_steady = median(steady_ratios);
}

// The repetitions a document's sweep planned of each row; 0 without a sweep (each row's runs say).
int64_t planned_repetitions(const ResultDocument& doc) { return doc.sweep ? doc.sweep->repeat : 0; }

// `info`, a PyTorch twin, as the `pytorch` of the row it is the reference for: against the row
// itself, or against ddpbench's run of it as the twin runs it (info.compared_with).
void attach_twin(RowSummary& row, const ResultDocument& doc, const SweepRowInfo& info) {
  const int64_t planned = planned_repetitions(doc);
  const RowSummary twin = summarize_row(info, runs_of(doc, info.name, info.mode), doc.environment, planned);
  const std::string ours_name = info.compared_with.empty() ? info.reference_of : info.compared_with;
  const RowSummary ours_summary =
      info.compared_with.empty()
          ? row
          : summarize_row({ours_name, info.mode, kNotMeasured, info.devices}, runs_of(doc, ours_name, info.mode),
                          doc.environment, planned);
  RowSummary::PyTorchTwin t{twin.name, twin.status, twin.reason, twin.outcomes, twin.train_time_s,
                            twin.steady_images_per_s};
  t.ddpbench_name = ours_name;
  t.compared_without = info.compared_without;
  t.ddpbench_status = ours_summary.status;
  t.ddpbench_reason = ours_summary.reason;
  t.ddpbench_outcomes = ours_summary.outcomes;
  t.ddpbench_train_time_s = ours_summary.train_time_s;
  t.ddpbench_steady_images_per_s = ours_summary.steady_images_per_s;
  row.pytorch = std::move(t);
  set_paired_ratios(row, doc, ours_name, info);
}

// Speed-up, scaling efficiency (over the devices the row ran on, as a multiple of the baseline's:
// a 2-device baseline is 100 % of itself) and differences against the baseline row of the same
// mode, from the repetitions that ran ok on both.
void set_against_baseline(std::vector<RowSummary>& summaries, const ResultDocument& doc,
                          const std::string& baseline_name) {
  for (auto& s : summaries) {
    const auto base = std::find_if(summaries.begin(), summaries.end(), [&](const RowSummary& b) {
      return b.name == baseline_name && b.mode == s.mode;
    });
    if (base == summaries.end() || !base->has_figures() || !s.has_figures()) continue;
    s.speedup = s.headline_images_per_s() / base->headline_images_per_s();
    s.scaling_efficiency = s.speedup * static_cast<double>(std::max<int64_t>(1, base->devices)) /
                           static_cast<double>(std::max<int64_t>(1, s.devices));
    const RunResult* row_run = first_ok_run(doc, s.name, s.mode);
    const RunResult* base_run = first_ok_run(doc, base->name, base->mode);
    if (&*base != &s && row_run != nullptr && base_run != nullptr) {
      s.differences = differences_from_baseline(*row_run, *base_run, doc.option_defaults);
    }
  }
}

}  // namespace

std::vector<RowSummary> summarize_sweep(const ResultDocument& doc) {
  const std::vector<SweepRowInfo> rows = planned_rows(doc);
  std::string baseline_name = doc.sweep ? doc.sweep->baseline_row : "";
  if (baseline_name.empty() && !rows.empty()) baseline_name = rows.front().name;

  std::vector<RowSummary> summaries;
  for (const auto& info : rows) {
    if (info.reference_of.empty() && !is_comparison_run(doc, info.name, info.mode)) {
      summaries.push_back(
          summarize_row(info, runs_of(doc, info.name, info.mode), doc.environment, planned_repetitions(doc)));
    }
  }
  for (const auto& info : rows) {
    if (info.reference_of.empty()) continue;
    const auto row = std::find_if(summaries.begin(), summaries.end(), [&](const RowSummary& s) {
      return s.name == info.reference_of && s.mode == info.mode;
    });
    if (row != summaries.end()) attach_twin(*row, doc, info);
  }
  set_against_baseline(summaries, doc, baseline_name);
  return summaries;
}

}  // namespace ddpbench
