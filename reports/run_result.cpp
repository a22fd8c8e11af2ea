#include "reports/run_result.hpp"

#include <algorithm>

#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <optional>
#include <stdexcept>

namespace ddpbench {
namespace {

using nlohmann::json;

double read_number(const json& j, const char* key) {
  const json& v = j.at(key);
  if (v.is_null()) return kNotMeasured;
  if (!v.is_number()) throw std::invalid_argument(std::string("'") + key + "' must be a number or null");
  return v.get<double>();
}

// A count a row records (steps, images, ranks, bytes): a whole number, never a fraction read as
// its floor (8.5 steps passed as 8); `fallback` where the file leaves it out, else required.
int64_t read_count(const json& j, const char* key, std::optional<int64_t> fallback = std::nullopt) {
  if (!j.contains(key) && fallback) return *fallback;
  const json& v = j.at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  const double d = v.is_number_float() ? v.get<double>() : std::nan("");
  if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9e15) return static_cast<int64_t>(d);
  throw std::invalid_argument(std::string("'") + key + "' must be a whole number, not " + v.dump());
}

json quantiles_json(const Quantiles& q) {
  return {{"p50", json_number(q.p50)}, {"p90", json_number(q.p90)}, {"max", json_number(q.max)}};
}

// Absent, null, or a quantile missing: not measured (the proof then fails a row that says ok
// without them), never a reader's error.
Quantiles read_quantiles(const json& j) {
  if (j.is_null()) return {kNotMeasured, kNotMeasured, kNotMeasured};
  if (!j.is_object()) throw std::invalid_argument("step_time_s must be an object of p50, p90 and max, or null");
  const auto quantile = [&](const char* key) { return j.contains(key) ? read_number(j, key) : kNotMeasured; };
  return {quantile("p50"), quantile("p90"), quantile("max")};
}

// A number that older files may lack.
double read_optional_number(const json& j, const char* key, double absent) {
  return j.contains(key) ? read_number(j, key) : absent;
}

json trace_json(const TraceRecord& t) {
  return {{"first_step", t.first_step},
          {"last_step", t.last_step},
          {"files", t.files},
          {"crc32", t.crc32},
          {"traced_step_time_s", json_number(t.traced_step_time_s)},
          {"untraced_step_time_s", json_number(t.untraced_step_time_s)},
          {"profiler_switch_s", json_number(t.profiler_switch_s)},
          {"save_s", json_number(t.save_s)}};
}

TraceRecord read_trace(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("'trace' must be an object");
  TraceRecord t;
  for (const char* key : {"first_step", "last_step"}) {
    if (!j.contains(key) || !j.at(key).is_number_integer()) {
      throw std::invalid_argument(std::string("trace.") + key + " must be a whole number");
    }
  }
  t.first_step = j.at("first_step").get<int64_t>();
  t.last_step = j.at("last_step").get<int64_t>();
  // A trace's steps are steps: a negative first step would read as no trace at all.
  if (t.first_step < 0) throw std::invalid_argument("trace.first_step must not be negative");
  if (!j.contains("files") || !j.at("files").is_array()) throw std::invalid_argument("trace.files must be a list");
  for (const auto& file : j.at("files")) {
    if (!file.is_string()) throw std::invalid_argument("trace.files must hold file names");
    t.files.push_back(file.get<std::string>());
  }
  if (!j.contains("crc32") || !j.at("crc32").is_array()) throw std::invalid_argument("trace.crc32 must be a list");
  for (const auto& crc : j.at("crc32")) {
    if (!crc.is_number_unsigned() || crc.get<uint64_t>() > 0xffffffffu) {
      throw std::invalid_argument("trace.crc32 must hold CRC-32s (whole numbers below 2^32)");
    }
    t.crc32.push_back(static_cast<uint32_t>(crc.get<uint64_t>()));
  }
  t.traced_step_time_s = read_optional_number(j, "traced_step_time_s", kNotMeasured);
  t.untraced_step_time_s = read_optional_number(j, "untraced_step_time_s", kNotMeasured);
  t.profiler_switch_s = read_optional_number(j, "profiler_switch_s", kNotMeasured);
  t.save_s = read_optional_number(j, "save_s", kNotMeasured);
  return t;
}

PhaseSeconds read_phases(const json& j) {
  return {read_number(j, "data_s"),     read_number(j, "forward_s"),   read_number(j, "backward_s"),
          read_number(j, "comm_s"),     read_number(j, "optimizer_s"), read_optional_number(j, "allreduce_s", 0.0),
          read_optional_number(j, "collective_wait_s", 0.0), read_optional_number(j, "replicate_s", 0.0),
          read_optional_number(j, "forward_collective_wait_s", kNotMeasured)};
}

json ranks_json(const std::vector<RankTiming>& ranks) {
  json out = json::array();
  for (const auto& r : ranks) {
    out.push_back({{"rank", r.rank},
                   {"train_time_s", json_number(r.train_time_s)},
                   {"step_time_s", quantiles_json(r.step_time_s)},
                   {"peak_memory_bytes", r.peak_memory_bytes},
                   {"compute_s", json_number(r.compute_s)},
                   {"data_s", json_number(r.data_s)},
                   {"wait_s", json_number(r.wait_s)}});
  }
  return out;
}

}  // namespace

double json_number_or(const json& object, const char* key, double fallback) {
  if (!object.is_object() || !object.contains(key) || !object.at(key).is_number()) return fallback;
  return object.at(key).get<double>();
}

json json_number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

json phases_json(const PhaseSeconds& p) {
  return {{"data_s", json_number(p.data_s)},           {"forward_s", json_number(p.forward_s)},
          {"backward_s", json_number(p.backward_s)},   {"comm_s", json_number(p.comm_s)},
          {"optimizer_s", json_number(p.optimizer_s)}, {"allreduce_s", json_number(p.allreduce_s)},
          {"collective_wait_s", json_number(p.collective_wait_s)}, {"replicate_s", json_number(p.replicate_s)},
          {"forward_collective_wait_s", json_number(p.forward_collective_wait_s)}};
}

std::string row_label(const std::string& name, const std::string& mode) {
  return mode.empty() ? name : name + " (" + mode + ")";
}

std::string placement_text(const RunResult& r) {
  if (r.nodes.size() < 2) return "";
  const std::string nodes = std::to_string(r.nodes.size()) + " nodes";
  if (r.ranks_per_node.size() != r.nodes.size()) return nodes;
  const bool even = std::all_of(r.ranks_per_node.begin(), r.ranks_per_node.end(),
                                [&](int64_t n) { return n == r.ranks_per_node.front(); });
  if (even) return nodes + " x " + std::to_string(r.ranks_per_node.front()) + (r.ranks_per_node.front() == 1 ? " rank" : " ranks");
  std::string split;
  for (const int64_t n : r.ranks_per_node) split += (split.empty() ? "" : "+") + std::to_string(n);
  return nodes + ": " + split + " ranks";
}

std::string reason_text(std::string_view what) {
  std::string text;
  bool in_backtrace = false;
  for (std::size_t start = 0; start <= what.size();) {
    const std::size_t end = std::min(what.find('\n', start), what.size());
    const std::string_view line = what.substr(start, end - start);
    in_backtrace = in_backtrace || line.starts_with("Exception raised from ");
    if (!in_backtrace && !line.starts_with("frame #") && !line.empty()) text += (text.empty() ? "" : "\n") + std::string(line);
    start = end + 1;
  }
  return text.empty() ? std::string(what.substr(0, what.find('\n'))) : text;
}

std::string_view status_name(RunStatus status) {
  switch (status) {
    case RunStatus::ok: return "ok";
    case RunStatus::skipped: return "skipped";
    case RunStatus::failed: return "failed";
    case RunStatus::interrupted: return "interrupted";
  }
  return "?";
}

RunStatus parse_status(std::string_view name) {
  if (name == "ok") return RunStatus::ok;
  if (name == "skipped") return RunStatus::skipped;
  if (name == "failed") return RunStatus::failed;
  if (name == "interrupted") return RunStatus::interrupted;
  throw std::invalid_argument("unknown status '" + std::string(name) + "' (expected ok|skipped|failed|interrupted)");
}

void to_json(json& j, const RunResult& r) {
  json steps = json::array();
  for (const auto& s : r.step_records) {
    steps.push_back({{"epoch", s.epoch}, {"step", s.step}, {"images", s.images},
                     {"time_s", json_number(s.time_s)}, {"loss", json_number(s.loss)},
                     {"phases", phases_json(s.phases)}});
  }
  j = json{{"name", r.name},
           {"mode", r.mode},
           {"repetition", r.repetition},
           {"strategy", r.strategy},
           {"world_size", r.world_size},
           {"device", r.device},
           {"dataset", r.dataset},
           {"dataset_origin", r.dataset_origin},
           {"status", status_name(r.status)},
           {"reason", r.reason},
           {"train_time_s", json_number(r.train_time_s)},
           {"total_time_s", json_number(r.total_time_s)},
           {"images_per_s", json_number(r.images_per_s)},
           {"steady_images_per_s", json_number(r.steady_images_per_s)},
           {"step_time_s", quantiles_json(r.step_time_s)},
           {"mean_phase_s", phases_json(r.mean_phase_s)},
           {"train_flops_per_image", json_number(r.train_flops_per_image)},
           {"achieved_flops_per_s", json_number(r.achieved_flops_per_s)},
           {"test_accuracy", json_number(r.test_accuracy)},
           {"eval_images", r.eval_images},
           {"eval_cut", r.eval_cut},
           {"final_loss", json_number(r.final_loss)},
           {"epochs", r.epochs},
           {"steps", r.steps},
           {"steps_per_epoch", r.steps_per_epoch},
           {"epoch_cut", r.epoch_cut},
           {"warmup_steps", r.warmup_steps},
           {"global_batch", r.global_batch},
           {"images_trained", r.images_trained},
           {"train_images", r.train_images},
           {"peak_memory_bytes", r.peak_memory_bytes},
           {"peak_memory_source", r.peak_memory_source},
           {"nodes", r.nodes},
           {"ranks_per_node", r.ranks_per_node},
           {"ranks", ranks_json(r.ranks)},
           {"slowest_rank", r.slowest_rank >= 0 ? json(r.slowest_rank) : json(nullptr)},
           {"rank_spread", json_number(r.rank_spread)},
           {"straggler", r.straggler},
           {"straggler_steps", r.straggler_steps},
           {"straggler_of_steps", r.straggler_of_steps},
           {"straggler_p", json_number(r.straggler_p)},
           {"straggler_cause", r.straggler_cause},
           {"rank_compute_spread", json_number(r.rank_compute_spread)},
           {"config", r.config},
           {"strategy_details", r.strategy_details},
           {"step_records", std::move(steps)}};
  // Only a lockstep run has it: files of free runs stay as they were.
  if (std::isfinite(r.lockstep_wait_s)) j["lockstep_wait_s"] = r.lockstep_wait_s;
  if (r.trace.traced()) j["trace"] = trace_json(r.trace);
  if (r.threads_per_rank > 0) j["threads_per_rank"] = r.threads_per_rank;  // left out where none was counted
}

namespace {

// A repetition is a round's number: 2.9 is no round, and 2^63 read as an int64 is negative.
int64_t read_repetition(const json& repetition, const std::string& run_name) {
  if (!repetition.is_number_integer() ||
      (repetition.is_number_unsigned() &&
       repetition.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    throw std::invalid_argument("run '" + run_name + "': repetition " + repetition.dump() + " is not a whole number");
  }
  return repetition.get<int64_t>();
}

// The row's figures: times, throughput, FLOPs, accuracy, loss and the work it did.
void read_figures(const json& j, RunResult& r) {
  r.train_time_s = read_number(j, "train_time_s");
  r.total_time_s = read_number(j, "total_time_s");
  if (j.contains("lockstep_wait_s")) r.lockstep_wait_s = read_number(j, "lockstep_wait_s");
  r.images_per_s = read_number(j, "images_per_s");
  r.steady_images_per_s = read_number(j, "steady_images_per_s");
  r.step_time_s = read_quantiles(j.value("step_time_s", json(nullptr)));
  if (j.contains("mean_phase_s")) r.mean_phase_s = read_phases(j.at("mean_phase_s"));
  if (j.contains("train_flops_per_image")) r.train_flops_per_image = read_number(j, "train_flops_per_image");
  if (j.contains("achieved_flops_per_s")) r.achieved_flops_per_s = read_number(j, "achieved_flops_per_s");
  r.test_accuracy = read_number(j, "test_accuracy");
  r.eval_images = read_count(j, "eval_images");
  r.eval_cut = j.value("eval_cut", false);
  r.final_loss = read_number(j, "final_loss");
  r.epochs = read_count(j, "epochs", 0);
  r.steps = read_count(j, "steps");
  r.steps_per_epoch = read_count(j, "steps_per_epoch", 0);
  r.epoch_cut = j.value("epoch_cut", false);
  r.warmup_steps = read_count(j, "warmup_steps", 0);
  r.global_batch = read_count(j, "global_batch", 0);
  r.images_trained = read_count(j, "images_trained", 0);
  r.train_images = 0;  // not recorded (0, as a writer before the loader's count had it)
  if (j.contains("train_images")) {
    const json& n = j.at("train_images");
    if (!n.is_number_integer() || n.get<int64_t>() < 0) {
      throw std::invalid_argument("train_images must be the whole number of images the loader found, not " + n.dump());
    }
    r.train_images = n.get<int64_t>();
  }
  r.peak_memory_bytes = read_count(j, "peak_memory_bytes");
  r.peak_memory_source = j.value("peak_memory_source", "");
}

// Each rank's timings and what they say of a straggler.
void read_rank_timings(const json& j, RunResult& r) {
  r.ranks.clear();
  for (const auto& rank : j.value("ranks", json::array())) {
    r.ranks.push_back({read_count(rank, "rank"), read_number(rank, "train_time_s"),
                       read_quantiles(rank.at("step_time_s")), read_count(rank, "peak_memory_bytes", 0),
                       read_optional_number(rank, "compute_s", kNotMeasured),
                       read_optional_number(rank, "data_s", kNotMeasured),
                       read_optional_number(rank, "wait_s", kNotMeasured)});
  }
  // Absent or null: no rank's compute was measured (older files wrote 0 then).
  r.slowest_rank = j.contains("slowest_rank") && !j.at("slowest_rank").is_null() && !r.ranks.empty()
                       ? read_count(j, "slowest_rank")
                       : -1;
  r.rank_compute_spread = read_optional_number(j, "rank_compute_spread", kNotMeasured);
  // Files from before own time ranked the ranks ranked them by compute alone.
  r.rank_spread = read_optional_number(j, "rank_spread", r.rank_compute_spread);
  r.straggler_cause = j.value("straggler_cause", std::string(std::isfinite(r.rank_spread) ? "compute" : ""));
  r.straggler_steps = read_count(j, "straggler_steps", 0);
  r.straggler_of_steps = read_count(j, "straggler_of_steps", 0);
  r.straggler_p = read_optional_number(j, "straggler_p", kNotMeasured);
  // Files from before the step-by-step test flagged on the spread alone.
  r.straggler = j.contains("straggler") ? j.at("straggler").get<bool>() : r.rank_spread > 1.0 + kStragglerSpread;
}

std::vector<StepRecord> read_step_records(const json& records) {
  std::vector<StepRecord> out;
  for (const auto& s : records) {
    StepRecord rec;
    rec.epoch = read_count(s, "epoch");
    rec.step = read_count(s, "step");
    rec.images = read_count(s, "images");
    rec.time_s = read_number(s, "time_s");
    rec.loss = read_number(s, "loss");
    rec.phases = read_phases(s.at("phases"));
    out.push_back(rec);
  }
  return out;
}

}  // namespace

void from_json(const json& j, RunResult& r) {
  r.name = j.at("name").get<std::string>();
  r.mode = j.value("mode", "");
  if (j.contains("repetition")) r.repetition = read_repetition(j.at("repetition"), r.name);
  r.strategy = j.at("strategy").get<std::string>();
  r.world_size = read_count(j, "world_size");
  r.device = j.at("device").get<std::string>();
  r.threads_per_rank = read_count(j, "threads_per_rank", 0);
  r.dataset = j.at("dataset").get<std::string>();
  r.dataset_origin = j.value("dataset_origin", "");
  r.status = parse_status(j.at("status").get<std::string>());
  // A row that finished computed with a thread at least: 0 is written by no writer (it leaves the
  // count out where it has none), so an ok row saying 0 is an edited file hiding its threads.
  if (j.contains("threads_per_rank") && r.status == RunStatus::ok && r.threads_per_rank < 1) {
    throw std::invalid_argument("run '" + r.name + "': threads_per_rank " + std::to_string(r.threads_per_rank) +
                                " in a row that finished: no writer's (an edited file)");
  }
  r.reason = j.value("reason", "");
  read_figures(j, r);
  r.nodes = j.value("nodes", std::vector<std::string>{});
  r.ranks_per_node = j.value("ranks_per_node", std::vector<int64_t>{});
  read_rank_timings(j, r);
  r.config = j.value("config", json::object());
  r.strategy_details = j.value("strategy_details", json::object());
  r.step_records = read_step_records(j.value("step_records", json::array()));
  r.trace = j.contains("trace") ? read_trace(j.at("trace")) : TraceRecord{};
}

void to_json(json& j, const CpuFacts& c) {
  j = json{{"architecture", c.architecture},
           {"vendor", c.vendor},
           {"family", c.family},
           {"model", c.model},
           {"model_name", c.model_name},
           {"flags", c.flags},
           {"logical_processors", c.logical_processors},
           {"physical_cores", c.physical_cores},
           {"max_mhz", json_number(c.max_mhz)},
           {"base_mhz", json_number(c.base_mhz)},
           {"base_mhz_source", c.base_mhz_source},
           {"cpuinfo_mhz", json_number(c.cpuinfo_mhz)}};
}

void from_json(const json& j, CpuFacts& c) {
  c.architecture = j.value("architecture", "");
  c.vendor = j.value("vendor", "");
  c.family = j.value("family", int64_t{-1});
  c.model = j.value("model", int64_t{-1});
  c.model_name = j.value("model_name", "");
  c.flags = j.value("flags", std::vector<std::string>{});
  c.logical_processors = j.value("logical_processors", int64_t{0});
  c.physical_cores = j.value("physical_cores", int64_t{0});
  c.max_mhz = read_number(j, "max_mhz");
  c.base_mhz = read_number(j, "base_mhz");
  c.base_mhz_source = j.value("base_mhz_source", "");
  c.cpuinfo_mhz = read_number(j, "cpuinfo_mhz");
}

void to_json(json& j, const Environment& e) {
  json gpus = json::array();
  for (const auto& g : e.gpus) {
    gpus.push_back({{"name", g.name}, {"memory_bytes", g.memory_bytes},
                    {"compute_capability", g.compute_capability}});
  }
  j = json{{"host", e.host},
           {"os", e.os},
           {"cpu_model", e.cpu_model},
           {"cpu_cores", e.cpu_cores},
           {"cpu", e.cpu},
           {"gpus", std::move(gpus)},
           {"driver_version", e.driver_version},
           {"cuda_runtime_version", e.cuda_runtime_version},
           {"cudnn_version", e.cudnn_version},
           {"nccl_version", e.nccl_version},
           {"libtorch_version", e.libtorch_version},
           {"compiler", e.compiler},
           {"build_type", e.build_type},
           {"git_revision", e.git_revision}};
  // Left out where not known, never written blank: a blank value is an edited file's (the reader's rule).
  if (!e.omp_num_threads.empty()) j["omp_num_threads"] = e.omp_num_threads;
  if (!e.cpu_affinity.empty()) j["cpu_affinity"] = e.cpu_affinity;
}

void from_json(const json& j, Environment& e) {
  e.host = j.value("host", "");
  e.os = j.value("os", "");
  e.cpu_model = j.value("cpu_model", "");
  e.cpu_cores = j.value("cpu_cores", int64_t{0});
  e.cpu = j.contains("cpu") && j.at("cpu").is_object() ? j.at("cpu").get<CpuFacts>() : CpuFacts{};
  e.gpus.clear();
  for (const auto& g : j.value("gpus", json::array())) {
    e.gpus.push_back({g.value("name", ""), g.value("memory_bytes", int64_t{0}),
                      g.value("compute_capability", "")});
  }
  e.driver_version = j.value("driver_version", "");
  e.cuda_runtime_version = j.value("cuda_runtime_version", "");
  e.cudnn_version = j.value("cudnn_version", "");
  e.nccl_version = j.value("nccl_version", "");
  e.libtorch_version = j.value("libtorch_version", "");
  e.compiler = j.value("compiler", "");
  e.build_type = j.value("build_type", "");
  e.git_revision = j.value("git_revision", "");
  // Absent: not recorded (an older writer, or an edited file), a difference from a file that says them. Present
  // but blank: no writer's (ddpbench writes "unset", "empty" or the value, and the CPUs' list or
  // "unknown"), so a file that would pass every environment check by blanking them is refused.
  for (auto [key, value] : {std::pair{"omp_num_threads", &e.omp_num_threads}, std::pair{"cpu_affinity", &e.cpu_affinity}}) {
    *value = j.value(key, "");
    if (j.contains(key) && value->empty()) {
      throw std::invalid_argument(std::string("environment.") + key + " is blank, which ddpbench never writes (an "
                                  "edited file: leave out what was not recorded)");
    }
  }
}

void to_json(json& j, const SweepInfo& s) {
  json rows = json::array();
  for (const auto& r : s.rows) {
    json row = {{"name", r.name}, {"mode", r.mode}, {"tutorial_seconds", json_number(r.tutorial_seconds)},
                {"devices", r.devices}};
    if (!r.reference_of.empty()) row["reference_of"] = r.reference_of;
    if (!r.compared_with.empty()) row["compared_with"] = r.compared_with;
    if (!r.compared_without.empty()) row["compared_without"] = r.compared_without;
    if (!r.preset_changes.empty()) row["preset_changes"] = r.preset_changes;
    rows.push_back(std::move(row));
  }
  j = json{{"preset", s.preset}, {"note", s.note}, {"baseline_row", s.baseline_row}, {"repeat", s.repeat},
           {"rows", std::move(rows)}, {"rows_href", s.rows_href}};
  if (!s.projection.is_null()) j["projection"] = s.projection;
}

void from_json(const json& j, SweepInfo& s) {
  s.preset = j.value("preset", "");
  s.note = j.value("note", "");
  s.baseline_row = j.value("baseline_row", "");
  if (j.contains("repeat") && !j.at("repeat").is_number_integer()) {
    throw std::invalid_argument("sweep.repeat " + j.at("repeat").dump() + " is not a whole number");
  }
  s.repeat = j.value("repeat", int64_t{1});
  s.projection = j.value("projection", json(nullptr));
  s.rows_href = j.value("rows_href", "rows");
  // A link's prefix in the HTML report: a relative path, never a scheme ("javascript:") or a root.
  if (s.rows_href.empty() || s.rows_href.front() == '/' ||
      s.rows_href.find_first_of(":\\\"<>") != std::string::npos ||
      std::any_of(s.rows_href.begin(), s.rows_href.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
    throw std::invalid_argument("sweep.rows_href " + json(s.rows_href).dump() + " is not a relative path");
  }
  s.rows.clear();
  for (const auto& r : j.value("rows", json::array())) {
    for (const char* key : {"reference_of", "compared_with", "compared_without"}) {
      if (r.contains(key) && !r.at(key).is_string()) {
        throw std::invalid_argument("sweep row " + r.value("name", json("?")).dump() + ": '" + key +
                                    "' must be a string (got " + r.at(key).dump() + ")");
      }
    }
    s.rows.push_back({r.at("name").get<std::string>(), r.value("mode", ""), read_number(r, "tutorial_seconds"),
                      r.value("devices", int64_t{1}), r.value("reference_of", ""), r.value("compared_with", ""),
                      r.value("compared_without", "")});
    const json changes = r.value("preset_changes", json::array());
    if (!changes.is_array() || !std::all_of(changes.begin(), changes.end(), [](const json& c) { return c.is_string(); })) {
      throw std::invalid_argument("sweep row " + r.value("name", json("?")).dump() +
                                  ": 'preset_changes' must be a list of strings (got " + changes.dump() + ")");
    }
    s.rows.back().preset_changes = changes.get<std::vector<std::string>>();
    const SweepRowInfo& row = s.rows.back();
    // The run a twin is compared with is ddpbench's run of the twin's own row without
    // SyncBatchNorm, by its one name: any other would gate another pair, or none.
    if (!row.compared_with.empty() && row.compared_with != row.reference_of + kWithoutSyncBnSuffix) {
      throw std::invalid_argument(
          "sweep row '" + row.name + "': compared_with '" + row.compared_with + "' must be " +
          (row.reference_of.empty() ? std::string("absent: only a PyTorch twin (reference_of) is compared with a run")
                                    : "'" + row.reference_of + kWithoutSyncBnSuffix + "', ddpbench's run of row '" +
                                          row.reference_of + "' beside this twin"));
    }
  }
}

void to_json(json& j, const ResultDocument& d) {
  j = json{{"schema", d.schema},         {"tool_version", d.tool_version},
           {"created_utc", d.created_utc}, {"argv", d.argv},
           {"environment", d.environment}, {"runs", d.runs}};
  if (d.sweep) j["sweep"] = *d.sweep;
  if (!d.option_defaults.empty()) j["option_defaults"] = d.option_defaults;
}

void from_json(const json& j, ResultDocument& d) {
  d.schema = j.at("schema").get<std::string>();
  if (d.schema != kResultSchema) {
    throw std::invalid_argument("schema is '" + d.schema + "', expected '" + kResultSchema + "'");
  }
  d.tool_version = j.value("tool_version", "");
  d.created_utc = j.value("created_utc", "");
  d.argv = j.value("argv", std::vector<std::string>{});
  d.environment = j.at("environment").get<Environment>();
  d.runs = j.at("runs").get<std::vector<RunResult>>();
  d.sweep.reset();
  if (j.contains("sweep")) d.sweep = j.at("sweep").get<SweepInfo>();
  d.option_defaults = j.value("option_defaults", json::object());
  if (!d.option_defaults.is_object()) throw std::invalid_argument("option_defaults is not an object");
}

bool is_comparison_run(const ResultDocument& document, const std::string& name, const std::string& mode) {
  if (!document.sweep) return false;
  return std::any_of(document.sweep->rows.begin(), document.sweep->rows.end(), [&](const SweepRowInfo& info) {
    return !info.reference_of.empty() && info.compared_with == name && info.mode == mode;
  });
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ddpbench
