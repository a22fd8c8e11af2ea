#include "reports/result_proof.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "harness/base/input_error.hpp"
#include "harness/base/units.hpp"
#include "reports/result_file.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;
using RowKey = std::pair<std::string, std::string>;  // name, mode

// Keys of a row's config that do not change what is measured. The injected slowdown is the
// gate's own test: it plays a slower build of the same row, so the gate must match it.
const char* const kIgnoredConfigKeys[] = {"out",       "save-checkpoint", "log-interval-steps",   "data-dir",
                                          "cache-dir", "name",            "inject-slowdown",      "inject-slowdown-rank",
                                          "inject-slowdown-phase"};

std::string run_label(const RunResult& r) {
  return "row '" + row_label(r.name, r.mode) + "' repetition " + std::to_string(r.repetition);
}

std::string scientific(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

// No C0 or C1 control character, DEL, U+2028 or U+2029 (Python's splitlines() breaks a line at
// each of them), nor a table's '|'.
bool fits_a_line_and_a_cell(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0; };
    if (c < 0x20 || c == 0x7f || c == '|') return false;
    if (c == 0xc2 && next(1) >= 0x80 && next(1) <= 0x9f) return false;
    if (c == 0xe2 && next(1) == 0x80 && (next(2) == 0xa8 || next(2) == 0xa9)) return false;
  }
  return true;
}

// A name is a line of the gate's outputs (the rows to run next, one a line) and a table cell.
void prove_names(const RunResult& r, const std::string& side) {
  for (const auto& [what, text] : {std::pair<const char*, const std::string*>{"name", &r.name}, {"mode", &r.mode}}) {
    if (!fits_a_line_and_a_cell(*text) || (text == &r.name && text->empty())) {
      throw InputError(side + ": a row's " + std::string(what) + " " + json(*text).dump() +
                       " is empty or holds a control character, a line separator or '|': rows are named by sweep "
                       "files, and a name is a line and a table cell of the gate's outputs");
    }
  }
}

// Each repetition of a row once, numbered within the sweep's --repeat (a file without a sweep
// holds one run of each row): a merged or edited file would otherwise add repetitions that
// outvote the ones that ran.
void prove_repetitions(const ResultDocument& doc, const std::string& side) {
  const int64_t repeat = doc.sweep ? doc.sweep->repeat : 1;
  if (repeat < 1) throw InputError(side + ": the sweep's repeat is " + std::to_string(repeat) + ", not 1 or more");
  std::set<std::pair<RowKey, int64_t>> seen;
  for (const auto& r : doc.runs) {
    if (r.repetition < 0 || r.repetition >= repeat) {
      throw InputError(side + ": " + run_label(r) + " is not one of the " + std::to_string(repeat) + " repetition(s) " +
                       (doc.sweep ? "its sweep ran (repeat " + std::to_string(repeat) + ")"
                                  : "of a file without a sweep section") +
                       ": a merged or edited file (each repetition is numbered 0 to repeat - 1)");
    }
    if (!seen.insert({{r.name, r.mode}, r.repetition}).second) {
      throw InputError(side + ": row '" + row_label(r.name, r.mode) + "' holds repetition " +
                       std::to_string(r.repetition) +
                       " more than once; a result file holds each repetition of a row once (a sweep's --repeat "
                       "numbers them): a merged file");
    }
  }
}

// Options a file's writer did not know, at the defaults the file (or else the reader) gives.
// A row that records no configuration stays so: completing it would claim settings it never said.
void complete_configs(ResultDocument& doc, const json& defaults) {
  for (auto& r : doc.runs) {
    if (!r.config.is_object() || r.config.empty()) continue;
    for (const auto& [key, value] : defaults.items()) {
      if (!r.config.contains(key)) r.config[key] = value;
    }
  }
}

// Every repetition of a row measures one configuration; repetitions of other settings pooled
// would read as one row's noise.
void prove_one_configuration(const ProvenResults& file) {
  std::map<RowKey, const RunResult*> first_of;
  for (const auto& r : file.document().runs) {
    const auto [first, inserted] = first_of.emplace(RowKey{r.name, r.mode}, &r);
    if (inserted) continue;
    const std::string difference = settings_difference(*first->second, file, r, file);
    if (!difference.empty()) {
      throw InputError(file.side() + ": the repetitions of row '" + row_label(r.name, r.mode) +
                       "' were run with different configurations (" + difference +
                       "); a row's repetitions measure one configuration");
    }
  }
}

struct Figure {
  const char* name;
  double value;
  bool is_rate;
  bool steady;  // measured after warm-up: absent where the row ran no step past it
};

std::vector<std::pair<const char*, double>> phases_of(const PhaseSeconds& p) {
  return {{"data_s", p.data_s},         {"forward_s", p.forward_s},     {"backward_s", p.backward_s},
          {"comm_s", p.comm_s},         {"optimizer_s", p.optimizer_s}, {"allreduce_s", p.allreduce_s},
          {"collective_wait_s", p.collective_wait_s}, {"replicate_s", p.replicate_s},
          {"forward_collective_wait_s", p.forward_collective_wait_s}};
}

std::vector<Figure> figures_of(const RunResult& r) {
  return {{"train_time_s", r.train_time_s, false, false},
          {"total_time_s", r.total_time_s, false, false},
          {"images_per_s", r.images_per_s, true, false},
          {"steady_images_per_s", r.steady_images_per_s, true, true},
          {"step_time_s", r.step_time_s.p50, false, true}};
}

// A row's step records, which matched steps compare one by one (matched_steps.hpp): each a
// time a step takes, in the order the steps ran, none twice.
void prove_step_records(const RunResult& r, const std::string& side) {
  for (std::size_t k = 0; k < r.step_records.size(); ++k) {
    const StepRecord& s = r.step_records[k];
    if (!(std::isfinite(s.time_s) && s.time_s > 1e-6 && s.time_s <= 365.0 * 24 * 3600)) {
      throw InputError(side + ": " + run_label(r) + " has step_records[" + std::to_string(k) + "].time_s " +
                       scientific(s.time_s) + ": not a time a step takes (a damaged or edited file)");
    }
    if (k > 0 && std::pair(s.epoch, s.step) <= std::pair(r.step_records[k - 1].epoch, r.step_records[k - 1].step)) {
      throw InputError(side + ": " + run_label(r) + " has step_records[" + std::to_string(k) + "] (epoch " +
                       std::to_string(s.epoch) + ", step " + std::to_string(s.step) +
                       ") out of order or repeated (a damaged or edited file)");
    }
  }
}

// Every figure of a row that ran is a time or a rate a run measures: never zero, negative, or
// beyond a year or a trillion images a second where given (a damaged or edited file: bad input).
// A row that did not run is read for its status and reason alone.
void prove_figures(const RunResult& r, const std::string& side) {
  if (r.status != RunStatus::ok) return;
  for (const Figure& f : figures_of(r)) {
    const double most = f.is_rate ? 1e12 : 365.0 * 24 * 3600;
    const double least = f.is_rate ? 0 : 1e-6;
    if (std::isfinite(f.value) && (f.value <= least || f.value > most)) {
      throw InputError(side + ": " + run_label(r) + " has " + f.name + " " +
                       (f.value <= 0 ? format_fixed(f.value, 6) : scientific(f.value)) +
                       ": not a time or a rate a run measures (a damaged or edited file)");
    }
  }
  for (const auto& [name, seconds] : phases_of(r.mean_phase_s)) {
    if (std::isfinite(seconds) && (seconds < 0 || seconds > 365.0 * 24 * 3600)) {
      throw InputError(side + ": " + run_label(r) + " has mean_phase_s." + name + " " + scientific(seconds) +
                       ": not a time a step spends (a damaged or edited file)");
    }
  }
  const PhaseSeconds& p = r.mean_phase_s;
  if (p.forward_collective_wait_s > p.collective_wait_s * (1 + 1e-9) + 1e-12) {
    throw InputError(side + ": " + run_label(r) + " has mean_phase_s.forward_collective_wait_s " +
                     scientific(p.forward_collective_wait_s) + " above collective_wait_s " +
                     scientific(p.collective_wait_s) + ", the whole it is part of (a damaged or edited file)");
  }
  if (std::isfinite(r.lockstep_wait_s) && (r.lockstep_wait_s < 0 || r.lockstep_wait_s > 365.0 * 24 * 3600)) {
    throw InputError(side + ": " + run_label(r) + " has lockstep_wait_s " + scientific(r.lockstep_wait_s) +
                     ": not a time a run waits (a damaged or edited file)");
  }
  if (std::isfinite(r.test_accuracy) && (r.test_accuracy < 0 || r.test_accuracy > 1)) {
    throw InputError(side + ": " + run_label(r) + " has test_accuracy " + format_fixed(r.test_accuracy, 4) +
                     ": a fraction lies in [0, 1]");
  }
}

// A traced row's trace names one file per rank beside its JSON: plain names, never a path a
// reader would follow out of the row's folder, and steps the row ran.
void prove_trace(const RunResult& r, const std::string& side) {
  const TraceRecord& t = r.trace;
  if (!t.traced()) return;
  const std::string at = side + ": " + run_label(r) + " has a trace ";
  if (t.last_step < t.first_step) {
    throw InputError(at + "of steps " + std::to_string(t.first_step) + " to " + std::to_string(t.last_step) +
                     ": the last comes before the first (a damaged or edited file)");
  }
  if (r.status == RunStatus::ok && t.last_step >= r.steps) {
    throw InputError(at + "of steps " + std::to_string(t.first_step) + " to " + std::to_string(t.last_step) +
                     " but ran " + std::to_string(r.steps) + " steps (a damaged or edited file)");
  }
  if (static_cast<int64_t>(t.files.size()) != r.world_size || t.crc32.size() != t.files.size()) {
    throw InputError(at + "of " + std::to_string(t.files.size()) + " files and " + std::to_string(t.crc32.size()) +
                     " CRC-32s for " + std::to_string(r.world_size) + " ranks: one each per rank (a damaged or edited file)");
  }
  for (const std::string& file : t.files) {
    const bool plain = !file.empty() && file.front() != '.' && file.find_first_of("/\\") == std::string::npos &&
                       fits_a_line_and_a_cell(file) &&
                       (file.ends_with(".trace.json") || file.ends_with(".trace.json.gz"));
    if (!plain) {
      throw InputError(at + "file '" + file + "': not a plain NAME.trace.json[.gz] beside the row's JSON");
    }
  }
  for (const double seconds : {t.traced_step_time_s, t.untraced_step_time_s, t.profiler_switch_s, t.save_s}) {
    if (std::isfinite(seconds) && (seconds < 0 || seconds > 365.0 * 24 * 3600)) {
      throw InputError(at + "time of " + scientific(seconds) + " s: not a time (a damaged or edited file)");
    }
  }
}

// An ok row measured every figure a verdict may use (the steady ones unless no step ran past
// warm-up). One that says ok without them did not finish what it says: it is failed, with the
// reason, and a value that is not a number is never read as a pass.
std::string unmeasured_figure(const RunResult& r) {
  const bool ran_past_warmup = r.steps > r.warmup_steps;
  for (const Figure& f : figures_of(r)) {
    if (std::string_view(f.name) == "total_time_s" || (f.steady && !ran_past_warmup)) continue;
    if (!std::isfinite(f.value)) return std::string("it measured no ") + f.name + " (null, NaN or infinite)";
  }
  return {};
}

// a x b, or nothing where it overflows: an edited file's numbers must not overflow the
// arithmetic that proves them.
std::optional<int64_t> product(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The row's own setting of `key`, else the default (its writer's, else the reader's for an option
// its file names nowhere): the configuration the verdicts read. A whole number written as 16.0
// is 16.
const json* config_value(const RunResult& r, const json& defaults, const char* key) {
  return r.config.is_object() && r.config.contains(key) ? &r.config.at(key)
         : defaults.contains(key)                         ? &defaults.at(key)
                                                          : nullptr;
}

std::optional<int64_t> config_integer(const RunResult& r, const json& defaults, const char* key) {
  const json* value = config_value(r, defaults, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_integer()) return value->get<int64_t>();
  if (value->is_number_float()) {
    const double v = value->get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) return static_cast<int64_t>(v);
  }
  return std::nullopt;
}

bool config_is_null(const RunResult& r, const json& defaults, const char* key) {
  const json* value = config_value(r, defaults, key);
  return value != nullptr && value->is_null();
}

std::string config_text(const RunResult& r, const json& defaults, const char* key) {
  const json* value = config_value(r, defaults, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

// The device kind a device's name says ("cpu", "cuda"), empty for "auto" or none.
std::string device_kind(const std::string& device) {
  if (device.starts_with("cpu")) return "cpu";
  if (device.starts_with("cuda")) return "cuda";
  return {};
}

// Where a row says it ran, against its configuration and its file's machine ("other: " work):
// the device kind and the reduction's backend its configuration asks (under auto, NCCL on GPUs and
// Gloo on CPUs), a GPU only where the environment found one, DataParallel over as many devices as
// its configuration lists.
std::string misplaced(const RunResult& r, const json& defaults, const Environment& environment) {
  const std::string asked_kind = device_kind(config_text(r, defaults, "device"));
  if (!asked_kind.empty() && device_kind(r.device) != asked_kind) {
    return "other: it says it ran on " + r.device + " where its configuration asks " + asked_kind;
  }
  if (r.device.starts_with("cuda") && environment.gpus.empty()) {
    return "other: it says it ran on " + r.device + ", but its file's environment found no GPU";
  }
  const json details = r.strategy_details.is_object() ? r.strategy_details : json::object();
  const json backend = details.value("backend", json());
  if (backend == "nccl" && r.device.starts_with("cpu")) return "other: it says it reduced with NCCL on " + r.device;
  std::string asked_backend = config_text(r, defaults, "backend");
  if (asked_backend == "auto") asked_backend = r.device.starts_with("cuda") ? "nccl" : "gloo";
  if (backend.is_string() && !asked_backend.empty() && backend != asked_backend) {
    return "other: it says it reduced with " + backend.get<std::string>() + " where its configuration asks " +
           asked_backend;
  }
  const std::string listed = config_text(r, defaults, "devices");
  if ((r.strategy == "dp" || r.strategy == "torch-dp") && details.contains("devices") && details.at("devices").is_array()) {
    // "all" (or unset) is every GPU the environment found; a list names its devices.
    const bool every_gpu = listed.empty() || listed == "all";
    const std::size_t asked = every_gpu ? (r.device.starts_with("cuda") ? environment.gpus.size() : 0)
                                        : static_cast<std::size_t>(std::count(listed.begin(), listed.end(), ',') + 1);
    if (asked > 0 && details.at("devices").size() != asked) {
      return "other: it scattered over " + std::to_string(details.at("devices").size()) + " devices where its " +
             (every_gpu ? "configuration asks every GPU its environment found: " + std::to_string(asked)
                        : "configuration lists " + std::to_string(asked) + " (" + listed + ")");
    }
  }
  return {};
}

// What a row recorded of its ranks and its steps, against the work proven from its configuration
// (less_work): a rank's record for each rank, a step record for each step it trained, holding the
// images it trained (the paired statistic reads the records one by one: half of them read as a
// row twice as fast).
std::string recorded_otherwise(const RunResult& r) {
  if (!r.ranks.empty() && static_cast<int64_t>(r.ranks.size()) != r.world_size) {
    return "other: it records " + std::to_string(r.ranks.size()) + " ranks' timings where it ran " +
           std::to_string(r.world_size) + " ranks";
  }
  if (r.step_records.empty()) return {};
  if (static_cast<int64_t>(r.step_records.size()) != r.steps) {
    return "other: it holds " + std::to_string(r.step_records.size()) + " step records where it trained " +
           std::to_string(r.steps) + " steps";
  }
  int64_t images = 0;
  for (const StepRecord& step : r.step_records) {
    if (__builtin_add_overflow(images, step.images, &images)) return "other: its step records' images overflow";
  }
  if (product(images, r.world_size) != std::optional<int64_t>(r.images_trained)) {
    return "other: its step records hold " + std::to_string(images) + " images a rank where it trained " +
           std::to_string(r.images_trained) + " over " + std::to_string(r.world_size) +
           (r.world_size == 1 ? " rank" : " ranks");
  }
  return {};
}

// CIFAR-10's training set: five files of 10,000 records (data/cifar10.cpp reads no other); its
// test set, one of 10,000.
constexpr int64_t kCifar10TrainImagesInAnEpoch = 50000;
constexpr int64_t kCifar10TestImages = 10000;

// What a row did (`did`) against what it was configured to do: "" where equal, else `says`,
// marked "other: " where it did more than configured (another row's work, not less of this one).
std::string against_configured(int64_t did, int64_t configured, const std::string& says) {
  if (did == configured) return {};
  return (did > configured ? "other: " : "") + says;
}

// The test images a row's evaluation counts: each rank's shard (rank, rank + world, ...: every
// image once over the ranks), cut to max-eval-batches batches a rank where set. nullopt where its
// file does not say the test set's size, its batch or its ranks.
std::optional<int64_t> configured_eval_images(const RunResult& r, const json& defaults,
                                              const std::string& dataset) {
  const int64_t test_images = dataset == "cifar10"     ? kCifar10TestImages
                              : dataset == "synthetic" ? config_integer(r, defaults, "synthetic-test-images").value_or(0)
                                                       : 0;
  const int64_t batch = config_integer(r, defaults, "batch-size").value_or(0);
  const auto batches = config_integer(r, defaults, "max-eval-batches");
  constexpr int64_t kMost = int64_t{1} << 30;  // as configured_work: an edited file's figures must not overflow
  if (test_images <= 0 || test_images > kMost || batch <= 0 || batch > kMost || r.world_size <= 0 ||
      r.world_size > kMost || (batches && (*batches < 0 || *batches > kMost))) {
    return std::nullopt;
  }
  int64_t seen = 0;
  for (int64_t rank = 0; rank < std::min(r.world_size, test_images); ++rank) {
    const int64_t shard = (test_images - rank + r.world_size - 1) / r.world_size;
    seen += batches ? std::min(shard, *batches * batch) : shard;
  }
  return seen;
}

// An ok row evaluated: the whole test set where its configuration says so (max-eval-batches
// unset), some of it where it asks for batches; as many images as those make where its file says them.
std::string less_evaluation(const RunResult& r, const json& defaults, const std::string& dataset) {
  const bool whole_test_set = config_is_null(r, defaults, "max-eval-batches");
  const auto batches = config_integer(r, defaults, "max-eval-batches");
  const std::string asked = batches ? std::to_string(*batches) + " batches a rank" : std::string("the whole test set");
  // Its own count is held to the configuration's, never taken from it: one image evaluated read
  // as an accuracy of 100 %.
  if (const auto configured = configured_eval_images(r, defaults, dataset)) {
    if (auto why = against_configured(r.eval_images, *configured,
                                      "it evaluated " + std::to_string(r.eval_images) +
                                          " test images where its configuration asks for " + asked + ": " +
                                          std::to_string(*configured));
        !why.empty()) {
      return why;
    }
  }
  if ((whole_test_set && (r.eval_cut || r.eval_images <= 0)) || (batches && *batches > 0 && r.eval_images <= 0)) {
    return "it evaluated " + std::to_string(r.eval_images) + " images" + (r.eval_cut ? ", cut short," : "") +
           " where its configuration asks for " + asked;
  }
  return {};
}

// Why an ok row did not do the work its configuration and data ask (configured_work: steps per
// epoch, steps, ranks, batch, images, evaluation); empty where it did. Such a row is failed: less
// work reads as speed, other work measures another row. "other: " marks work that is not less
// but other. Nothing here trusts the row's own figures to say what a full epoch is.
std::string less_work(const RunResult& r, const json& defaults) {
  const ConfiguredWork work = configured_work(r, defaults);
  if (!work.unknown.empty()) return "its work cannot be proven: " + work.unknown;
  if (const json* asked = r.config.is_object() && r.config.contains("strategy") ? &r.config.at("strategy") : nullptr;
      asked && asked->is_string() && asked->get<std::string>() != r.strategy) {
    return "other: it ran strategy " + r.strategy + " where its configuration asks " + asked->get<std::string>();
  }
  if (!work.dataset_asked.empty() && !r.dataset.empty() && r.dataset != work.dataset_asked) {
    return "other: it trained on " + r.dataset + " where its configuration asks " + work.dataset_asked;
  }
  if (r.train_images > 0 && r.train_images != work.train_images) {
    return "other: its loader found " + std::to_string(r.train_images) + " training images where " +
           (work.dataset == "synthetic" ? "its configuration asks for a synthetic set of "
                                        : std::string("CIFAR-10's training set has ")) +
           std::to_string(work.train_images);
  }
  if (auto why = against_configured(r.steps_per_epoch, work.steps_per_epoch,
                                    "its file says an epoch has " + std::to_string(r.steps_per_epoch) +
                                        " steps where " + work.data + " make " + std::to_string(work.steps_per_epoch));
      !why.empty()) {
    return why;
  }
  if (auto why = against_configured(r.steps, work.steps,
                                    "it trained " + std::to_string(r.steps) + " of the " + std::to_string(work.steps) +
                                        " steps its configuration asks (epochs x " +
                                        std::to_string(work.steps_per_epoch) + " a full epoch, cut by max-steps)");
      !why.empty()) {
    return why;
  }
  if (const auto nproc = config_integer(r, defaults, "nproc"); nproc && *nproc != r.world_size) {
    return "other: it ran " + std::to_string(r.world_size) + " ranks where its configuration asks " + std::to_string(*nproc);
  }
  const auto batch = config_integer(r, defaults, "batch-size");
  if (product(*batch, r.world_size) != std::optional<int64_t>(r.global_batch)) {
    return "other: its global batch is " + std::to_string(r.global_batch) + " where its configuration asks " +
           std::to_string(*batch) + " x " + std::to_string(r.world_size) + " ranks";
  }
  if (auto why = against_configured(r.images_trained, work.images,
                                    "it trained " + std::to_string(r.images_trained) + " images where its " +
                                        std::to_string(work.steps) + " steps of " + work.data + " train " +
                                        std::to_string(work.images));
      !why.empty()) {
    return why;
  }
  // Its warm-up is its configuration's: fewer read as more steady steps (the paired statistic fell
  // back from matched steps to the row's own quantiles).
  if (const auto warmup = config_integer(r, defaults, "warmup-steps"); warmup && *warmup != r.warmup_steps) {
    return "other: its file says " + std::to_string(r.warmup_steps) + " warm-up steps where its configuration asks " +
           std::to_string(*warmup);
  }
  // --threads N sets each rank's threads; the count a row records is what LibTorch then had.
  if (const auto threads = config_integer(r, defaults, "threads");
      threads && *threads > 0 && r.threads_per_rank > 0 && r.threads_per_rank != *threads) {
    return "other: it computed with " + std::to_string(r.threads_per_rank) + " threads a rank where its configuration "
           "asks " + std::to_string(*threads);
  }
  return less_evaluation(r, defaults, work.dataset);
}


// The images a row's training set holds: the synthetic set's configured size, or CIFAR-10's 50,000
// (ddpbench's loader reads its five files of 10,000 records and refuses any other); the row's own
// count is held to it, never taken from it. 0 where unknown.
int64_t training_set_images(const RunResult& r, const json& defaults, const std::string& dataset) {
  if (dataset == "synthetic") return config_integer(r, defaults, "synthetic-train-images").value_or(0);
  return dataset == "cifar10" ? kCifar10TrainImagesInAnEpoch : 0;
}

}  // namespace

ConfiguredWork configured_work(const RunResult& run, const json& defaults) {
  ConfiguredWork work;
  // The dataset its configuration asks; only where it asks "auto" (the data found decides) does the
  // row's own record of what it found say which.
  const json* named = run.config.is_object() && run.config.contains("dataset") ? &run.config.at("dataset") : nullptr;
  const std::string asked = named && named->is_string() ? named->get<std::string>() : "";
  work.dataset_asked = asked == "synthetic" || asked == "cifar10" ? asked : "";
  const std::string dataset = !work.dataset_asked.empty() ? work.dataset_asked : run.dataset;
  work.dataset = dataset;
  const int64_t epochs = config_integer(run, defaults, "epochs").value_or(run.epochs);
  const int64_t batch = config_integer(run, defaults, "batch-size").value_or(0);
  work.train_images = training_set_images(run, defaults, dataset);
  // No run has a billion steps or images a step; an edited file's would overflow (and prove nothing).
  constexpr int64_t kMost = int64_t{1} << 30;
  if (work.train_images <= 0 || work.train_images > kMost || batch <= 0 || batch > kMost || run.world_size <= 0 ||
      run.world_size > kMost || epochs <= 0 || epochs > kMost) {
    work.unknown = "its file does not say its training set's size, batch-size, ranks and epochs (dataset '" + dataset +
                   "', " + std::to_string(work.train_images) + " images, batch-size " + std::to_string(batch) + ", " +
                   std::to_string(run.world_size) + " ranks, " + std::to_string(epochs) + " epochs)";
    return work;
  }
  const int64_t shard = (work.train_images + run.world_size - 1) / run.world_size;
  work.steps_per_epoch = (shard + batch - 1) / batch;
  int64_t per_epoch = work.steps_per_epoch;
  if (const auto max_steps = config_integer(run, defaults, "max-steps"); max_steps && *max_steps > 0) {
    per_epoch = std::min(per_epoch, *max_steps);
  }
  work.steps = epochs * per_epoch;
  // A cut epoch's batches are whole; a full one trains each rank's shard, padded as the sampler pads it.
  const auto epoch_images = product(per_epoch < work.steps_per_epoch ? per_epoch * batch : shard, run.world_size);
  const auto images = epoch_images ? product(*epoch_images, epochs) : std::nullopt;
  if (!images) {
    work.unknown = "its configuration's images per epoch times its epochs overflow what any run trains";
    return work;
  }
  work.images = *images;
  work.data = std::to_string(work.train_images) + " " + (dataset.empty() ? "" : dataset + " ") + "images over " +
              std::to_string(run.world_size) + (run.world_size == 1 ? " rank" : " ranks") + " in batches of " +
              std::to_string(batch);
  return work;
}

json comparable_config(const json& config) {
  json c = config;
  for (const char* key : kIgnoredConfigKeys) c.erase(key);
  // Files from before --nodes ran on one node.
  if (c.is_object() && !c.contains("nodes")) c["nodes"] = 1;
  // Files from before --trace-steps traced nothing.
  if (c.is_object() && !c.contains("trace-steps")) c["trace-steps"] = "";
  // Files from before --cuda-graphs ran eagerly.
  if (c.is_object() && !c.contains("cuda-graphs")) c["cuda-graphs"] = false;
  return c;
}

std::string config_difference(const json& a, const json& b) {
  std::string out;
  for (const auto& [key, value] : a.items()) {
    const json other = b.contains(key) ? b.at(key) : json(nullptr);
    if (value != other) out += (out.empty() ? "" : ", ") + key + " " + value.dump() + " vs " + other.dump();
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) out += (out.empty() ? "" : ", ") + key + " unset vs " + value.dump();
  }
  return out;
}

bool runs_the_same(const json& a, const json& b, const json& a_defaults, const json& b_defaults) {
  if (!settings_difference_of(a, a_defaults, b, b_defaults).empty()) return false;
  for (const char* key : {"inject-slowdown", "inject-slowdown-rank", "inject-slowdown-phase"}) {
    const json none = nullptr;
    if ((a.contains(key) ? a.at(key) : none) != (b.contains(key) ? b.at(key) : none)) return false;
  }
  return true;
}

std::string settings_difference_of(const json& a, const json& a_defaults, const json& b, const json& b_defaults) {
  json left = comparable_config(a);
  json right = comparable_config(b);
  // An option only one side's writer knew is, on the other side, the knowing side's default.
  if (left.is_object() && right.is_object() && !left.empty() && !right.empty()) {
    for (const auto& [key, value] : right.items()) {
      if (!left.contains(key) && b_defaults.contains(key)) left[key] = b_defaults.at(key);
    }
    for (const auto& [key, value] : left.items()) {
      if (!right.contains(key) && a_defaults.contains(key)) right[key] = a_defaults.at(key);
    }
  }
  return config_difference(left, right);
}

std::string settings_difference(const RunResult& a, const ProvenResults& a_file, const RunResult& b,
                                const ProvenResults& b_file) {
  return settings_difference_of(a.config, a_file.option_defaults(), b.config, b_file.option_defaults());
}

ProvenResults prove_results(ResultDocument document, std::string side, const json& reader_defaults,
                            const ConfigProof& prove_config) {
  ProvenResults proven;
  proven.side_ = std::move(side);
  if (!document.option_defaults.is_object() || !reader_defaults.is_object()) {
    throw InputError(proven.side_ + ": option_defaults is not an object");
  }
  // The writer's defaults, and the reader's for what the writer did not know of.
  proven.option_defaults_ = reader_defaults;
  for (const auto& [key, value] : document.option_defaults.items()) proven.option_defaults_[key] = value;
  prove_repetitions(document, proven.side_);
  // The work is proven against the configuration the verdicts read: the row's own settings, its
  // writer's defaults, and the reader's for an option the file names in neither (proven against
  // the file alone, such an option was asked nothing of, and the comparison then took the reader's
  // default: warm-up and epochs edited out of both, or the whole table deleted, judged 2x the work
  // "the same").
  const json& work_defaults = proven.option_defaults_;
  for (auto& r : document.runs) {
    prove_names(r, proven.side_);
    prove_figures(r, proven.side_);
    prove_trace(r, proven.side_);
    if (r.status == RunStatus::ok) prove_step_records(r, proven.side_);
    if (r.status != RunStatus::ok) continue;
    const std::string unmeasured = unmeasured_figure(r);
    std::string less = unmeasured.empty() ? misplaced(r, work_defaults, document.environment) : std::string();
    if (unmeasured.empty() && less.empty()) less = less_work(r, work_defaults);
    if (unmeasured.empty() && less.empty()) less = recorded_otherwise(r);
    if (unmeasured.empty() && less.empty()) continue;
    r.status = RunStatus::failed;
    r.reason = !unmeasured.empty()         ? "says ok, but " + unmeasured
               : less.starts_with("other: ") ? "did other work than configured: " + less.substr(7)
                                             : "did less work than configured: " + less;
    proven.failed_by_proof_.push_back(row_label(r.name, r.mode) + " repetition " + std::to_string(r.repetition) +
                                      ": " + r.reason);
  }
  complete_configs(document, proven.option_defaults_);
  for (const auto& r : document.runs) {
    if (!prove_config) break;
    try {
      prove_config(r.config, r.status != RunStatus::skipped);
    } catch (const InputError& e) {
      throw InputError(proven.side_ + ": " + run_label(r) + " has a configuration no run has: " + e.what() +
                       " (a damaged or edited file)");
    }
  }
  proven.document_ = std::move(document);
  prove_one_configuration(proven);
  return proven;
}

std::vector<std::string> failed_by_proofs(const ProvenResults& baseline, const ProvenResults& current) {
  std::vector<std::string> out;
  for (const auto* file : {&baseline, &current}) {
    for (const auto& f : file->failed_by_proof()) out.push_back(file->side() + ": " + f);
  }
  return out;
}

ProvenResults read_proven_results(const std::filesystem::path& path, const std::string& side,
                                  const json& reader_defaults, const ConfigProof& prove_config) {
  return prove_results(read_result_file(path), side + " '" + path.string() + "'", reader_defaults, prove_config);
}

}  // namespace ddpbench
