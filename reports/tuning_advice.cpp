#include "reports/tuning_advice.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "harness/base/input_error.hpp"
#include "harness/base/units.hpp"
#include "reports/bucket_assignment.hpp"
#include "reports/step_collectives.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// The most of its speed the model lets backward or the stream lose beside the other: past it the
// two did not share the host so much as take turns, which the model does not describe.
constexpr double kMostSlowdown = 0.9;

// One gradient as the row measured it: its bytes, dtype, and when backward made it ready
// with no compression cast before it (its own time, less the casts of the buckets the row
// launched earlier in backward).
struct MeasuredGradient {
  GradientSize size;
  double ready_s = kNotMeasured;
  int64_t parameter = -1;  // the Reducer's index: its registration order
};

// The buckets DDP builds from `gradients` (as listed: the order of the first backward) at
// `bucket_mb`: the rebuild's, from that order; with find_unused_parameters the Reducer never
// rebuilds and keeps its first layout, from the registration order, last parameters first.
// Each bucket lists positions in `gradients`.
std::vector<std::vector<std::size_t>> ddp_buckets(const std::vector<MeasuredGradient>& gradients, double bucket_mb,
                                                  bool find_unused) {
  std::vector<std::size_t> order(gradients.size());
  std::iota(order.begin(), order.end(), 0);
  if (find_unused) {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return gradients[x].parameter < gradients[y].parameter; });
  }
  std::vector<GradientSize> sizes;
  for (std::size_t i : order) sizes.push_back(gradients[i].size);
  auto buckets = assign_buckets(sizes, ddp_bucket_limits(bucket_mb));
  for (auto& bucket : buckets) {
    for (std::size_t& position : bucket) position = order[position];
  }
  if (find_unused) std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

// The row's gradient_timeline as the model reads it.
std::vector<MeasuredGradient> read_gradients(const json& timeline) {
  std::vector<MeasuredGradient> gradients;
  for (const json& g : timeline) {
    gradients.push_back({{static_cast<int64_t>(json_number_or(g, "bytes", 0)), g.value("dtype", std::string("float"))},
                         json_number_or(g, "ready_s", kNotMeasured),
                         static_cast<int64_t>(json_number_or(g, "parameter", -1))});
  }
  return gradients;
}

// What one step of the row costs apart from its buckets, and how much its compute slowed
// beside its allreduces where they shared the host (CPUs: Gloo's threads and backward's
// kernels on the same cores).
struct StepParts {
  double data_s = 0, forward_s = 0, optimizer_s = 0;
  double backward_compute_s = kNotMeasured;  // to the last gradient alone: no cast, no allreduce beside it
  double compute_slowdown = 0;  // the share of its speed backward loses while an allreduce is in flight
  double comm_slowdown = 0;     // the share of its speed an allreduce loses while backward computes
  // An fp16 or bf16 allreduce's time against fp32's on the same elements, as measured alone: half
  // the bytes need not be half the time (Gloo sums half-precision values on the CPU).
  double fp16_wire_fraction = 0.5, bf16_wire_fraction = 0.5;
  bool find_unused = false;  // the row's --find-unused-parameters: buckets in its first layout
  bool contention_measured = false;  // an allreduce ran beside backward, and backward ran alone
  bool allreduce_alone_measured = false;
  std::optional<StepCollectives> collectives;  // SyncBatchNorm's, out of forward and backward
};

double wire_fraction_of(const StepParts& parts, const std::string& hook) {
  return hook == "fp16" ? parts.fp16_wire_fraction : hook == "bf16" ? parts.bf16_wire_fraction : 1.0;
}

// Backward's compute and the communication stream over one step, as two fluids: the compute
// works through `work_s` seconds of work (its gradients and the casts), launching bucket b once
// it has done launch_at[b] of it; the stream runs the launched buckets one after another,
// `duration[b]` seconds of work each; while both run, each goes at (1 - its slowdown) of its speed.
struct Fluid {
  double compute_end_s = 0, stream_end_s = 0;
};
Fluid run_fluid(const std::vector<double>& launch_at, const std::vector<double>& duration, double work_s,
                double compute_slowdown, double comm_slowdown) {
  constexpr double kEpsilon = 1e-12;
  double t = 0, done = 0;               // wall clock, compute work done
  std::size_t launched = 0, next = 0;   // buckets launched; the next to run on the stream
  bool running = false;
  double left = 0;                      // work left of the bucket on the stream
  Fluid f;
  bool computing = work_s > kEpsilon;
  // Each pass ends an event (a launch, a bucket, the compute), give or take rounding: far more
  // passes than events mean figures the timeline cannot take (a bucket of 1e308 s, a rate of 0),
  // bad input rather than a process that never ends.
  const std::size_t most_passes = 8 * (launch_at.size() + duration.size()) + 64;
  for (std::size_t pass = 0;; ++pass) {
    if (pass > most_passes || !std::isfinite(t)) {
      throw InputError("the row's figures give a step timeline that does not end (compute " + std::to_string(work_s) +
                       " s, slowdowns " + std::to_string(compute_slowdown) + " and " + std::to_string(comm_slowdown) +
                       "): a time in its strategy_details is not a time");
    }
    while (launched < launch_at.size() && done + kEpsilon >= launch_at[launched]) ++launched;
    if (!running && next < launched) {
      running = true;
      left = duration[next];
    }
    if (!computing && !running) break;
    const double compute_rate = running ? 1 - compute_slowdown : 1;
    const double comm_rate = computing ? 1 - comm_slowdown : 1;
    double dt = std::numeric_limits<double>::infinity();
    if (computing) {
      const double target = launched < launch_at.size() ? std::min(launch_at[launched], work_s) : work_s;
      dt = std::max(0.0, target - done) / compute_rate;
    }
    if (running) dt = std::min(dt, left / comm_rate);
    t += dt;
    if (computing) {
      done += dt * compute_rate;
      if (done + kEpsilon >= work_s) {
        computing = false;
        done = std::max(done, work_s);
        f.compute_end_s = t;
      }
    }
    if (running) {
      left -= dt * comm_rate;
      if (left <= kEpsilon) {
        running = false;
        ++next;
        f.stream_end_s = t;
      }
    }
  }
  if (work_s <= kEpsilon) f.compute_end_s = 0;
  return f;
}

// A hook's device time per gradient byte, the cast with its division for the wire and the
// copy back (measured by the row): taken as half each.
double cast_seconds_per_byte(const json& details, const std::string& hook) {
  if (hook == "allreduce") return 0;
  const json costs = details.value("compression_s_per_byte", json::object());
  return json_number_or(costs, hook.c_str(), 0);
}

// As the --bucket-mb flag takes it: whole numbers without a point, never an exponent.
std::string format_mb(double mb) {
  if (mb == std::floor(mb) && mb < 1e12) return std::to_string(static_cast<int64_t>(mb));
  std::ostringstream out;
  out << std::fixed << std::setprecision(6) << mb;
  std::string text = out.str();
  text.erase(text.find_last_not_of('0') + 1);
  return text;
}

// The first DDP setting (or rank count, or batch) in which two repetitions of a row differ; empty
// where none does.
std::string differing_setting(const RunResult& a, const RunResult& b) {
  if (a.world_size != b.world_size) return "ranks " + std::to_string(a.world_size) + " and " + std::to_string(b.world_size);
  if (a.global_batch != b.global_batch) return "global batch";
  for (const char* key : {"model", "batch-size", "bucket-mb", "comm-hook", "overlap", "find-unused-parameters",
                          "gradient-as-bucket-view", "amp", "sync-bn", "nodes"}) {
    const json x = a.config.is_object() ? a.config.value(key, json(nullptr)) : json(nullptr);
    const json y = b.config.is_object() ? b.config.value(key, json(nullptr)) : json(nullptr);
    if (x != y) return std::string("--") + key + " " + x.dump() + " and " + y.dump();
  }
  return "";
}

// Each rule below: why a row's recorded figures cannot be advised from, named with the field
// (empty where they can): what a real row never writes.
std::string batch_and_hook_problem(const RunResult& r) {
  if (r.global_batch <= 0) return "global_batch " + std::to_string(r.global_batch) + ": no step to advise on";
  const json hook = r.config.is_object() ? r.config.value("comm-hook", json("allreduce")) : json("allreduce");
  if (hook != "allreduce" && hook != "fp16" && hook != "bf16") {
    return "--comm-hook " + hook.dump() + ": only ddpbench's own hooks (allreduce, fp16, bf16) are timed";
  }
  return "";
}

// Every gradient has whole bytes, a ready time within backward and a parameter of its own;
// `bytes` their sum.
std::string gradient_timeline_problem(const json& d, double& bytes) {
  if (!d.is_object() || !d.contains("gradient_timeline") || !d.at("gradient_timeline").is_array() ||
      d.at("gradient_timeline").empty()) {
    return "no gradient timeline (rows of ddpbench's own hook record one from this version on)";
  }
  const double backward_s = json_number_or(d, "backward_compute_s", kNotMeasured);
  if (!(backward_s > 0)) return "backward_compute_s " + d.value("backward_compute_s", json(nullptr)).dump() + ": not a time";
  std::set<int64_t> parameters;
  for (const json& g : d.at("gradient_timeline")) {
    const double b = json_number_or(g, "bytes", 0), ready = json_number_or(g, "ready_s", kNotMeasured);
    if (!(b > 0) || b != std::floor(b)) return "gradient_timeline: a gradient of " + g.value("bytes", json(nullptr)).dump() + " bytes";
    if (!(ready >= 0 && ready <= backward_s * 1.05 + 1e-3)) {
      return "gradient_timeline: a gradient ready at " + g.value("ready_s", json(nullptr)).dump() +
             " s, outside backward (0 to " + json(backward_s).dump() + " s)";
    }
    if (g.contains("parameter") && !parameters.insert(g.value("parameter", int64_t{-1})).second) {
      return "gradient_timeline: parameter " + g.at("parameter").dump() + " listed twice";
    }
    bytes += b;
  }
  return "";
}

std::string step_quantiles_problem(const Quantiles& q) {
  if (!std::isfinite(q.p50) && !std::isfinite(q.p90)) return "";
  if (q.p50 > 0 && q.p90 >= q.p50 && (!std::isfinite(q.max) || q.p90 <= q.max * (1 + 1e-9))) return "";
  return "step_time_s p50 " + json(json_number(q.p50)).dump() + ", p90 " + json(json_number(q.p90)).dump() + ", max " +
         json(json_number(q.max)).dump() + ": not the quantiles of a row's steps";
}

// The configuration and the details agree on the setting the row ran.
std::string declared_setting_problem(const RunResult& r, const json& d) {
  const double cap_bytes = json_number_or(d, "bucket_cap_bytes", kNotMeasured);
  const double bucket_mb = r.config.is_object() ? json_number_or(r.config, "bucket-mb", kDefaultBucketCapMb) : kDefaultBucketCapMb;
  if (std::isfinite(cap_bytes) && cap_bytes != std::floor(bucket_mb * 1024 * 1024)) {
    return "--bucket-mb " + json(bucket_mb).dump() + " in its configuration, bucket_cap_bytes " + json(cap_bytes).dump() +
           " in its details: which it ran is not known";
  }
  if (d.contains("overlap") && r.config.is_object() && r.config.contains("overlap") && d.at("overlap") != r.config.at("overlap")) {
    return "overlap " + r.config.at("overlap").dump() + " in its configuration, " + d.at("overlap").dump() +
           " in its details: which it ran is not known";
  }
  return "";
}

// The gradients hold the bytes the buckets do.
std::string gradient_bytes_problem(const RunResult& r, const json& d, double bytes) {
  double expected = json_number_or(d, "gradient_bytes_per_step", kNotMeasured);
  if (!std::isfinite(expected) && d.contains("bucket_bytes") && d.at("bucket_bytes").is_array()) {
    expected = 0;
    for (const json& b : d.at("bucket_bytes")) expected += b.is_number() ? b.get<double>() : 0;
  }
  if (!std::isfinite(expected) || expected == bytes) return "";
  if (r.config.is_object() && r.config.value("find-unused-parameters", false) && bytes < expected) {
    return "parameters of " + json(expected - bytes).dump() + " bytes produced no gradient in its steps "
           "(--find-unused-parameters): where their buckets start is not known";
  }
  return "gradient_timeline: its gradients hold " + json(bytes).dump() + " bytes, the buckets " + json(expected).dump();
}

// What the row measured alone, where it did: times and figures, never text or negatives.
std::string alone_figures_problem(const json& d) {
  if (d.contains("backward_alone_s") && !d.at("backward_alone_s").is_null() &&
      !(json_number_or(d, "backward_alone_s", -1) > 0)) {
    return "backward_alone_s " + d.at("backward_alone_s").dump() + ": not a time";
  }
  for (const char* object : {"compression_s_per_byte", "allreduce_alone"}) {
    if (!d.contains(object) || d.at(object).is_null()) continue;
    if (!d.at(object).is_object()) return std::string(object) + ": not an object";
    for (const auto& [key, value] : d.at(object).items()) {
      if (!value.is_null() && !(value.is_number() && value.get<double>() >= 0)) {
        return std::string(object) + "." + key + " " + value.dump() + ": not a figure";
      }
    }
  }
  return "";
}

// The first rule the row breaks, each read only once those before it hold.
std::string unusable_inputs(const RunResult& r) {
  const json& d = r.strategy_details;
  double bytes = 0;
  std::string why = step_model_problem(r);  // the projection's rules first: one set for both
  if (why.empty()) why = batch_and_hook_problem(r);
  if (why.empty()) why = gradient_timeline_problem(d, bytes);
  if (why.empty()) why = step_quantiles_problem(r.step_time_s);
  if (why.empty()) why = declared_setting_problem(r, d);
  if (why.empty()) why = gradient_bytes_problem(r, d, bytes);
  if (why.empty()) why = alone_figures_problem(d);
  return why;
}

TuningSetting measured_setting(const RunResult& r) {
  TuningSetting s;
  if (!r.config.is_object()) return s;
  s.bucket_mb = json_number_or(r.config, "bucket-mb", s.bucket_mb);
  s.comm_hook = r.config.value("comm-hook", s.comm_hook);
  s.overlap = r.config.value("overlap", s.overlap);
  return s;
}

// The step of `setting` at `ranks` ranks, `per_node` a node, on `fabric`: buckets from the
// Reducer's assignment, each launched once its last gradient and every bucket before it are
// ready (the Reducer launches them in order) and its cast done (on backward's thread, so the
// casts are backward's work too); one allreduce after another on one communication stream,
// each followed by its copy back; backward and the stream slower while the other runs
// (run_fluid); the step forward + the later of backward's end and the last bucket's + the
// optimizer + data.
SettingProjection project_setting(const TuningSetting& setting, const std::vector<MeasuredGradient>& gradients,
                                  const StepParts& parts, double cast_s_per_byte, int64_t ranks, int64_t per_node,
                                  const Fabric& fabric, double images_per_rank) {
  const auto buckets = ddp_buckets(gradients, setting.bucket_mb, parts.find_unused);
  // The collectives inside the step at `ranks`: forward and backward longer by theirs, each
  // gradient later as backward stretches.
  const double forward_s = parts.forward_s + (parts.collectives ? parts.collectives->forward_s(ranks, per_node, fabric) : 0);
  const double collectives_backward_s = parts.collectives ? parts.collectives->backward_s(ranks, per_node, fabric) : 0;
  const double backward_compute_s = parts.backward_compute_s + collectives_backward_s;
  const double stretch = backward_compute_s / parts.backward_compute_s;
  const bool compressed = setting.comm_hook != "allreduce";
  const double wire_fraction = wire_fraction_of(parts, setting.comm_hook);
  const double half_cast = compressed ? cast_s_per_byte / 2 : 0;
  std::vector<double> launch_at, duration;
  double ready = 0, casts = 0, comm = 0;
  for (const auto& bucket : buckets) {
    double bytes = 0, last_gradient = 0;
    for (std::size_t i : bucket) {
      bytes += static_cast<double>(gradients[i].size.bytes);
      last_gradient = std::max(last_gradient, gradients[i].ready_s * stretch);
    }
    // Overlap off: held until backward's last gradient, then cast and launched in order.
    ready = std::max(ready, setting.overlap ? last_gradient : backward_compute_s);
    casts += bytes * half_cast;
    launch_at.push_back(ready + casts);
    const double t = ranks > 1 ? allreduce_seconds(bytes * wire_fraction, ranks, per_node, fabric) + bytes * half_cast : 0;
    duration.push_back(t);
    comm += t;
  }
  const double work_s = std::max(backward_compute_s + casts, launch_at.empty() ? 0.0 : launch_at.back());
  const Fluid f = run_fluid(launch_at, duration, work_s, parts.compute_slowdown, parts.comm_slowdown);
  SettingProjection p;
  p.setting = setting;
  p.buckets = static_cast<int64_t>(buckets.size());
  p.comm_s = comm;
  p.exposed_comm_s = std::max(0.0, f.stream_end_s - f.compute_end_s);
  p.step_s = parts.data_s + forward_s + std::max(f.compute_end_s, f.stream_end_s) + parts.optimizer_s;
  p.images_per_s = static_cast<double>(ranks) * images_per_rank / p.step_s;
  return p;
}

// The row's gradients with the casts its own compression hook made inside backward taken out
// (each gradient after a bucket launched during backward came that much later), and backward's
// compute likewise; an uncompressed row or one without overlap had none.
std::vector<MeasuredGradient> gradients_without_casts(const RunResult& r, const TuningSetting& measured,
                                                      double cast_s_per_byte, StepParts& parts) {
  const json& details = r.strategy_details;
  std::vector<MeasuredGradient> gradients = read_gradients(details.at("gradient_timeline"));
  if (measured.comm_hook == "allreduce" || !measured.overlap || cast_s_per_byte <= 0) return gradients;
  std::vector<std::pair<double, double>> launches;  // (ready, bytes) of each bucket the row launched
  if (details.contains("bucket_timeline") && details.at("bucket_timeline").is_array()) {
    for (const json& b : details.at("bucket_timeline")) {
      launches.emplace_back(json_number_or(b, "ready_s", kNotMeasured), json_number_or(b, "bytes", 0));
    }
  }
  std::sort(launches.begin(), launches.end());
  const double half_cast = cast_s_per_byte / 2;
  for (auto& g : gradients) {
    double before = 0;
    for (const auto& [ready, bytes] : launches) before += ready < g.ready_s ? bytes * half_cast : 0;
    g.ready_s -= before;
  }
  double all_but_last = 0;
  for (std::size_t i = 0; i + 1 < launches.size(); ++i) all_but_last += launches[i].second * half_cast;
  parts.backward_compute_s -= all_but_last;
  return gradients;
}

// The largest bucket's allreduce alone after the steps, where the row measured it: compression's
// wire fractions into `parts`, and the link alone (`calibration` where given).
std::optional<Link> read_allreduce_alone(const RunResult& r, const std::optional<MeasuredLink>& calibration,
                                         StepParts& parts) {
  const json alone_allreduce = r.strategy_details.value("allreduce_alone", json::object());
  const double probe_bytes = json_number_or(alone_allreduce, "bytes", 0);
  const double fp32_s = json_number_or(alone_allreduce, "fp32_s", kNotMeasured);
  parts.allreduce_alone_measured = probe_bytes > 0 && fp32_s > 0;
  if (parts.allreduce_alone_measured) {
    for (const auto& [key, fraction] : {std::pair{"fp16_s", &parts.fp16_wire_fraction},
                                        std::pair{"bf16_s", &parts.bf16_wire_fraction}}) {
      const double seconds = json_number_or(alone_allreduce, key, kNotMeasured);
      if (seconds > 0) *fraction = seconds / fp32_s;
    }
  }
  if (calibration) return calibration->link;
  if (!parts.allreduce_alone_measured || r.world_size <= 1) return std::nullopt;
  const double n = static_cast<double>(r.world_size);
  return Link{0, 2 * (n - 1) / n * probe_bytes / fp32_s};
}

// The communication stream as the row ran it: time with at least one allreduce in flight, in
// all and within backward, and what its allreduces would have taken on the link alone.
struct StreamOccupancy {
  double busy_s = 0, beside_s = 0, alone_s = 0;
};
StreamOccupancy stream_occupancy(const RunResult& r, const TuningSetting& measured, const std::optional<Link>& link,
                                 double backward_s, const StepParts& parts) {
  std::vector<std::pair<double, double>> spans;
  StreamOccupancy o;
  for (const json& b : r.strategy_details.at("bucket_timeline")) {
    const double start = json_number_or(b, "start_s", kNotMeasured);
    const double end = start + json_number_or(b, "allreduce_s", kNotMeasured);
    if (std::isfinite(start) && std::isfinite(end)) spans.emplace_back(start, end);
    if (link) {
      o.alone_s += allreduce_seconds(json_number_or(b, "bytes", 0) * wire_fraction_of(parts, measured.comm_hook),
                                     r.world_size, r.world_size, Fabric{"alone", *link, *link, "", 1});
    }
  }
  std::sort(spans.begin(), spans.end());
  double covered_until = -std::numeric_limits<double>::infinity();
  for (const auto& [start, end] : spans) {
    const double from = std::max(start, covered_until);
    if (end > from) o.busy_s += end - from;
    if (std::min(end, backward_s) > std::max(from, 0.0)) o.beside_s += std::min(end, backward_s) - std::max(from, 0.0);
    covered_until = std::max(covered_until, end);
  }
  return o;
}

// Backward's own spread in seconds: its runs alone after the steps (backward_alone_runs_s) from
// fastest to slowest, or its steps' spread (p90 over p50) as a share of it, whichever is wider.
double backward_spread_s(const RunResult& r, double alone_s) {
  double fastest = std::numeric_limits<double>::infinity(), slowest = 0;
  const json runs = r.strategy_details.value("backward_alone_runs_s", json::array());
  for (const json& t : runs) {
    if (!t.is_number() || !(t.get<double>() > 0) || !std::isfinite(t.get<double>())) continue;
    fastest = std::min(fastest, t.get<double>());
    slowest = std::max(slowest, t.get<double>());
  }
  double spread = slowest >= fastest ? slowest - fastest : 0;
  const double steps = r.step_time_s.p90 / r.step_time_s.p50 - 1;
  if (std::isfinite(steps) && steps > 0) spread = std::max(spread, steps * alone_s);
  return spread;
}

// How much backward lost beside the allreduces: (beside - alone) / the time an allreduce was in
// flight during it, with the gradients put on backward's time alone. A difference inside
// backward's own spread is its wobble, not contention: measured, and no slowdown.
void measure_backward_slowdown(const RunResult& r, double beside_s, std::vector<MeasuredGradient>& gradients,
                               StepParts& parts) {
  // Backward alone ran the same SyncBatchNorm collectives at the same ranks: their waits out.
  const double alone = json_number_or(r.strategy_details, "backward_alone_s", kNotMeasured) -
                       (parts.collectives ? parts.collectives->backward_wait_s : 0);
  if (!std::isfinite(alone) || !(alone > 0)) return;
  parts.contention_measured = true;
  if (!(parts.backward_compute_s - alone > backward_spread_s(r, alone))) return;
  parts.compute_slowdown = std::clamp((parts.backward_compute_s - alone) / beside_s, 0.0, kMostSlowdown);
  for (auto& g : gradients) g.ready_s *= alone / parts.backward_compute_s;
  parts.backward_compute_s = alone;
}

// How the row's backward and its allreduces slowed each other (they shared the host), from
// what it measured: backward alone and the largest bucket's allreduce alone (after the timed
// steps, each with nothing beside it) against both as they ran in the steps. The allreduces, on
// the link alone, would have taken D, and took their time busy W, of which O beside backward, so
// they lost (W - D) / O. Sets the parts' slowdowns and compression's wire fractions, puts the
// gradients on backward's time alone, and returns the link alone (`calibration` where given,
// else the row's own allreduce alone; none where neither was measured).
std::optional<Link> measure_contention(const RunResult& r, const TuningSetting& measured,
                                       const std::optional<MeasuredLink>& calibration,
                                       std::vector<MeasuredGradient>& gradients, StepParts& parts) {
  const json& details = r.strategy_details;
  const std::optional<Link> link = read_allreduce_alone(r, calibration, parts);
  const double backward_s = json_number_or(details, "backward_compute_s", kNotMeasured);
  if (!std::isfinite(backward_s) || !details.contains("bucket_timeline") || !details.at("bucket_timeline").is_array()) {
    return link;
  }
  const StreamOccupancy o = stream_occupancy(r, measured, link, backward_s, parts);
  if (!(o.beside_s > 0)) return link;
  measure_backward_slowdown(r, o.beside_s, gradients, parts);
  if (link && o.alone_s > 0) parts.comm_slowdown = std::clamp((o.busy_s - o.alone_s) / o.beside_s, 0.0, kMostSlowdown);
  return link;
}

}  // namespace

const char* const kAdviceLeavesOut =
    "compression's effect on accuracy (fp16 and bf16 round every gradient; check the row's accuracy with the flags), "
    "memory (gradient_as_bucket_view and bucket sizes change it), stragglers, topologies of more than two levels, "
    "collectives other than the ring";

std::vector<TuningSetting> tuning_grid(const TuningGridValues& values) {
  std::vector<TuningSetting> grid;
  for (bool overlap : values.overlap) {
    for (const std::string& hook : values.comm_hooks) {
      for (double mb : values.bucket_mb) {
        const TuningSetting s{mb, hook, overlap};
        if (std::find(grid.begin(), grid.end(), s) == grid.end()) grid.push_back(s);
      }
    }
  }
  if (std::find(grid.begin(), grid.end(), kPyTorchDefaults) == grid.end()) grid.push_back(kPyTorchDefaults);
  return grid;
}

std::vector<TuningSetting> default_tuning_grid() { return tuning_grid({}); }

std::string setting_label(const TuningSetting& s) {
  return format_mb(s.bucket_mb) + " MB, " + (s.comm_hook == "allreduce" ? "no hook" : s.comm_hook) + ", " +
         (s.overlap ? "overlap" : "no overlap");
}

std::string setting_flags(const TuningSetting& s) {
  std::string flags;
  const auto add = [&](const std::string& flag) { flags += (flags.empty() ? "" : " ") + flag; };
  if (s.bucket_mb != kPyTorchDefaults.bucket_mb) add("--bucket-mb " + format_mb(s.bucket_mb));
  if (s.comm_hook != kPyTorchDefaults.comm_hook) add("--comm-hook " + s.comm_hook);
  if (!s.overlap) add("--no-overlap");
  return flags.empty() ? "(the defaults)" : flags;
}

std::vector<int64_t> ddp_bucket_bytes(const RunResult& row, double bucket_mb) {
  const std::vector<MeasuredGradient> gradients = read_gradients(row.strategy_details.value("gradient_timeline", json::array()));
  const bool find_unused = row.config.is_object() && row.config.value("find-unused-parameters", false);
  std::vector<int64_t> bytes;
  for (const auto& bucket : ddp_buckets(gradients, bucket_mb, find_unused)) {
    bytes.push_back(0);
    for (std::size_t i : bucket) bytes.back() += gradients[i].size.bytes;
  }
  return bytes;
}

bool advice_off(const RowAdvice& a) {
  return a.not_advised.empty() &&
         (!a.unchecked.empty() || !std::isfinite(a.model_error) || std::fabs(a.model_error) > kModelTolerance);
}

bool RankAdvice::defaults_tie() const { return std::find(ties.begin(), ties.end(), defaults) != ties.end(); }

namespace {

// The repetitions that ran to a steady state, in the document's order.
std::vector<const RunResult*> steady_repetitions(const std::vector<const RunResult*>& repetitions) {
  std::vector<const RunResult*> ok;
  for (const RunResult* r : repetitions) {
    if (r->status == RunStatus::ok && std::isfinite(r->steady_images_per_s) && r->steady_images_per_s > 0) ok.push_back(r);
  }
  return ok;
}

// Why the repetitions cannot be pooled into one row: two of one number, or different settings.
std::string repetitions_problem(const std::vector<const RunResult*>& ok) {
  std::set<int64_t> numbers;
  for (const RunResult* r : ok) {
    if (!numbers.insert(r->repetition).second) {
      return "two runs are its repetition " + std::to_string(r->repetition) + ": give each its own number or name";
    }
  }
  for (const RunResult* r : ok) {
    if (const std::string differs = differing_setting(*ok.front(), *r); !differs.empty()) {
      return "its repetitions ran different settings (" + differs + "): give each its own row name";
    }
  }
  return "";
}

// How far the row's own steps spread (p90 against p50), and its repetitions' from each other.
void measure_step_spread(RowAdvice& a, const RunResult& r, const std::vector<const RunResult*>& ok) {
  a.step_spread = r.step_time_s.p90 / r.step_time_s.p50 - 1;
  a.step_spread_measured = std::isfinite(a.step_spread) || ok.size() > 1;
  if (!std::isfinite(a.step_spread)) a.step_spread = 0;
  a.step_spread = std::max(a.step_spread, ok.back()->steady_images_per_s / ok.front()->steady_images_per_s - 1);
}

// The row's step as the advisor models it: its gradients on backward's time alone, its parts,
// and each setting's step from them (project_setting).
struct AdviceModel {
  const RunResult& row;
  StepParts parts;
  std::vector<MeasuredGradient> gradients;
  [[nodiscard]] SettingProjection at(const TuningSetting& s, int64_t ranks, int64_t per_node, const Fabric& fabric) const {
    const double images_per_rank =
        static_cast<double>(row.global_batch) / static_cast<double>(std::max<int64_t>(1, row.world_size));
    return project_setting(s, gradients, parts, cast_seconds_per_byte(row.strategy_details, s.comm_hook), ranks,
                           per_node, fabric, images_per_rank);
  }
  [[nodiscard]] bool timed() const {
    return std::isfinite(parts.backward_compute_s) &&
           std::all_of(gradients.begin(), gradients.end(),
                       [](const MeasuredGradient& g) { return std::isfinite(g.ready_s) && g.size.bytes > 0; });
  }
};

// A SyncBatchNorm row's waits in its collectives out of forward's and backward's compute (each
// gradient ready that much earlier as backward shrinks), to be costed again at each world size.
void take_out_waits(const RunResult& r, AdviceModel& m) {
  const std::optional<StepCollectives> c = step_collectives(r, m.parts.backward_compute_s).collectives;
  if (!c || !std::isfinite(m.parts.backward_compute_s)) return;
  const double compute_s = m.parts.backward_compute_s - c->backward_wait_s;
  for (auto& g : m.gradients) g.ready_s *= compute_s / m.parts.backward_compute_s;
  m.parts.backward_compute_s = compute_s;
  m.parts.forward_s -= c->forward_wait_s;
  m.parts.collectives = c;
}

// The link measured without a latency (the largest bucket alone cannot tell one) takes the one
// the SyncBatchNorm collectives waited in backward, as the projection's does; so does the measured fabric.
void latency_from_waits(RowAdvice& a, const StepParts& parts, const ProjectionOptions& options) {
  if (!parts.collectives || !take_latency_from_waits(a.measured_link, *parts.collectives)) return;
  if (options.fabric == "measured" && !options.latency_us) {
    a.fabric.intra.latency_s = a.fabric.inter.latency_s = a.measured_link.intra.latency_s;
  }
}

// The model of the row's measured setting, its casts and how backward and the allreduces slowed
// each other; the link alone, where measured, is the advice's measured link (and its fabric's,
// where the fabric is the measured one).
AdviceModel read_model(RowAdvice& a, const RunResult& r, const ProjectionOptions& options) {
  const json& details = r.strategy_details;
  StepParts parts;
  parts.data_s = r.mean_phase_s.data_s;
  parts.forward_s = r.mean_phase_s.forward_s;
  parts.optimizer_s = r.mean_phase_s.optimizer_s;
  parts.backward_compute_s = json_number_or(details, "backward_compute_s", kNotMeasured);
  AdviceModel m{r, parts, {}};
  m.parts.find_unused = r.config.is_object() && r.config.value("find-unused-parameters", false);
  m.gradients = gradients_without_casts(r, a.measured_setting,
                                        cast_seconds_per_byte(details, a.measured_setting.comm_hook), m.parts);
  take_out_waits(r, m);
  if (const std::optional<Link> alone = measure_contention(r, a.measured_setting, options.calibration, m.gradients, m.parts)) {
    a.measured_link.intra = a.measured_link.inter = *alone;
    a.measured_link.source = options.calibration ? a.measured_link.source
                                                 : "the row's largest bucket allreduced alone after its steps";
    if (options.fabric == "measured" && !options.intra_node_gbps && !options.inter_node_gbps) {
      a.fabric.intra.bytes_per_s = a.fabric.inter.bytes_per_s = alone->bytes_per_s;
      a.fabric.source = a.measured_link.source;
    }
  }
  latency_from_waits(a, m.parts, options);
  a.compute_slowdown = m.parts.compute_slowdown;
  a.comm_slowdown = m.parts.comm_slowdown;
  a.contention_measured = m.parts.contention_measured;
  a.allreduce_alone_measured = m.parts.allreduce_alone_measured;
  a.fp16_wire_fraction = m.parts.fp16_wire_fraction;
  a.bf16_wire_fraction = m.parts.bf16_wire_fraction;
  if (std::max(a.compute_slowdown, a.comm_slowdown) >= kMostSlowdown) {
    a.unchecked = "backward or its allreduces lost " + format_percent(kMostSlowdown) +
                  " of their speed or more beside each other, past what the model takes: the host could not run both, "
                  "and what overlap costs is not known";
  }
  return m;
}

// Its own check: the measured setting where it was measured (all its ranks on the link fitted
// there); the tie band the wider of its error, its steps' spread and the least band.
void check_own_point(RowAdvice& a, const RunResult& r, const AdviceModel& m) {
  if (r.world_size > 1 && a.measured_link.intra.bytes_per_s > 0) {
    a.model_step_s = m.at(a.measured_setting, r.world_size, r.world_size, a.measured_link).step_s;
    a.model_error = a.model_step_s / a.measured_step_s - 1;
    a.tie_band = std::max({kMinimumTieBand, std::fabs(a.model_error), a.step_spread});
  } else {
    a.unchecked = "measured on one rank: no link was measured to set the model on";
    a.tie_band = std::max(kMinimumTieBand, a.step_spread);
  }
}

// Every setting at `ranks` ranks, the fastest, its ties, and the advice: the defaults where
// they tie with the fastest (a tie is no reason to change them).
RankAdvice advise_at(int64_t ranks, const std::vector<TuningSetting>& settings, const AdviceModel& m,
                     const ProjectionOptions& options, const RowAdvice& a) {
  RankAdvice advice;
  advice.ranks = ranks;
  for (const TuningSetting& s : settings) advice.settings.push_back(m.at(s, ranks, options.ranks_per_node, a.fabric));
  std::vector<std::size_t> order(advice.settings.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return advice.settings[x].step_s < advice.settings[y].step_s;
  });
  advice.best = order.front();
  const double best_s = advice.settings[advice.best].step_s;
  for (std::size_t i : order) {
    if (advice.settings[i].step_s <= best_s * (1 + a.tie_band)) advice.ties.push_back(i);
  }
  advice.defaults =
      static_cast<std::size_t>(std::find(settings.begin(), settings.end(), kPyTorchDefaults) - settings.begin());
  advice.advised = advice.defaults_tie() ? advice.defaults : advice.best;
  advice.fastest_gain_over_defaults = advice.settings[advice.defaults].step_s / best_s - 1;
  advice.gain_over_defaults = advice.settings[advice.defaults].step_s / advice.settings[advice.advised].step_s - 1;
  return advice;
}

}  // namespace

// Read (the median steady repetition, pooled only where its repetitions ran one setting), prove
// (unusable_inputs, the projection's link), model, check at its own point, advise per rank count.
RowAdvice advise_row(const std::vector<const RunResult*>& repetitions, const ProjectionOptions& options,
                     const std::vector<TuningSetting>& grid) {
  RowAdvice a;
  if (repetitions.empty()) return a;
  a.row = repetitions.front()->name;
  a.mode = repetitions.front()->mode;
  std::vector<const RunResult*> ok = steady_repetitions(repetitions);
  if (ok.empty()) {
    a.not_advised = no_steady_repetition(repetitions);
    return a;
  }
  a.repetitions_left_out = static_cast<int64_t>(repetitions.size() - ok.size());
  a.not_advised = repetitions_problem(ok);
  if (!a.not_advised.empty()) return a;
  std::sort(ok.begin(), ok.end(), [](auto* x, auto* y) { return x->steady_images_per_s < y->steady_images_per_s; });
  const RunResult& r = *ok[(ok.size() - 1) / 2];
  a.not_advised = unusable_inputs(r);
  if (!a.not_advised.empty()) return a;
  // The projection picks the repetition, fits the link and names the fabric.
  const RowProjection projection = project_row({&r}, options);
  a.repetition = projection.repetition;
  a.measured_ranks = projection.measured_ranks;
  a.measured_step_s = projection.measured_step_s;
  a.measured_link = projection.measured_link;
  a.fabric = projection.fabric;
  a.not_advised = projection.not_projected;
  if (!a.not_advised.empty()) return a;
  measure_step_spread(a, r, ok);
  a.measured_setting = measured_setting(r);
  a.compression_cost_measured = r.strategy_details.contains("compression_s_per_byte");
  const AdviceModel m = read_model(a, r, options);
  if (!m.timed()) {
    a.not_advised = "the gradient timeline has a gradient with no ready time or no bytes, or backward's compute was "
                    "not measured";
    return a;
  }
  check_own_point(a, r, m);
  std::vector<TuningSetting> settings = grid;
  if (std::find(settings.begin(), settings.end(), kPyTorchDefaults) == settings.end()) settings.push_back(kPyTorchDefaults);
  for (int64_t ranks : options.ranks) {
    if (ranks >= 2) a.ranks.push_back(advise_at(ranks, settings, m, options, a));
  }
  return a;
}

std::vector<RowAdvice> advise_document(const ResultDocument& doc, const ProjectionOptions& options,
                                       const std::vector<TuningSetting>& grid) {
  std::vector<RowAdvice> out;
  for (const auto& repetitions : ddp_rows(doc)) out.push_back(advise_row(repetitions, options, grid));
  return out;
}

std::optional<std::vector<RowAdvice>> sweep_advice(const ResultDocument& doc) {
  if (!doc.sweep || doc.sweep->projection.is_null()) return std::nullopt;
  try {
    ProjectionOptions options = projection_options_from_json(doc.sweep->projection);
    options.ranks = {8, 64, 512};
    return advise_document(doc, options);
  } catch (const std::exception& e) {
    RowAdvice why;
    why.row = "advice";
    why.not_advised = e.what();
    return std::vector<RowAdvice>{why};
  }
}

json advice_json(const std::vector<RowAdvice>& advice) {
  const auto setting_json = [](const TuningSetting& s) {
    return json{{"bucket_mb", s.bucket_mb}, {"comm_hook", s.comm_hook}, {"overlap", s.overlap},
                {"label", setting_label(s)}, {"flags", setting_flags(s)}};
  };
  json out = json::array();
  for (const RowAdvice& a : advice) {
    json ranks = json::array();
    for (const RankAdvice& k : a.ranks) {
      json settings = json::array();
      for (const SettingProjection& p : k.settings) {
        settings.push_back({{"setting", setting_json(p.setting)},
                            {"buckets", p.buckets},
                            {"step_s", json_number(p.step_s)},
                            {"images_per_s", json_number(p.images_per_s)},
                            {"comm_s", json_number(p.comm_s)},
                            {"exposed_comm_s", json_number(p.exposed_comm_s)}});
      }
      json ties = json::array();
      for (std::size_t i : k.ties) {
        if (i != k.advised) ties.push_back(setting_json(k.settings[i].setting));
      }
      ranks.push_back({{"ranks", k.ranks},
                       {"advised", setting_json(k.settings[k.advised].setting)},
                       {"advised_step_s", json_number(k.settings[k.advised].step_s)},
                       {"fastest", setting_json(k.settings[k.best].setting)},
                       {"fastest_step_s", json_number(k.settings[k.best].step_s)},
                       {"defaults_step_s", json_number(k.settings[k.defaults].step_s)},
                       {"gain_over_defaults", json_number(k.gain_over_defaults)},
                       {"fastest_gain_over_defaults", json_number(k.fastest_gain_over_defaults)},
                       {"defaults_tie", k.defaults_tie()},
                       {"ties", std::move(ties)},
                       {"settings", std::move(settings)}});
    }
    const auto link = link_json;
    out.push_back({{"row", a.row},
                   {"mode", a.mode},
                   {"repetition", a.repetition},
                   {"measured_ranks", a.measured_ranks},
                   {"measured_setting", setting_json(a.measured_setting)},
                   {"measured_step_s", json_number(a.measured_step_s)},
                   {"model_step_s", json_number(a.model_step_s)},
                   {"model_error", json_number(a.model_error)},
                   {"step_spread", a.step_spread_measured ? json_number(a.step_spread) : json(nullptr)},
                   {"repetitions_left_out", a.repetitions_left_out},
                   {"tie_band", a.tie_band},
                   {"advice_off", advice_off(a)},
                   {"unchecked", a.unchecked},
                   {"compression_cost_measured", a.compression_cost_measured},
                   {"contention_measured", a.contention_measured},
                   {"compute_slowdown", a.compute_slowdown},
                   {"comm_slowdown", a.comm_slowdown},
                   {"fp16_wire_fraction", a.fp16_wire_fraction},
                   {"bf16_wire_fraction", a.bf16_wire_fraction},
                   {"measured_link", {{"intra", link(a.measured_link.intra)}, {"source", a.measured_link.source}}},
                   {"fabric", {{"name", a.fabric.name}, {"intra", link(a.fabric.intra)}, {"inter", link(a.fabric.inter)},
                               {"nics_per_node", a.fabric.nics_per_node}, {"source", a.fabric.source}}},
                   {"ranks", std::move(ranks)},
                   {"not_modelled", kAdviceLeavesOut},
                   {"not_advised", a.not_advised}});
  }
  return out;
}

namespace {

// Where the advice was measured, how far its model is off there, and its tie band.
void markdown_advice_measured(std::ostringstream& md, const RowAdvice& a, const std::string& label) {
  md << "\n### " << label << " on " << a.fabric.name << "\n\n"
     << "Measured at " << a.measured_ranks << " ranks with " << setting_label(a.measured_setting) << ": "
     << format_seconds(a.measured_step_s) << " per step; this model there: " << format_seconds(a.model_step_s);
  if (std::isfinite(a.model_error)) {
    md << " (" << (a.model_error >= 0 ? "+" : "") << format_fixed(100 * a.model_error, 1) << " %)";
  }
  if (a.step_spread_measured) {
    md << "; its steps spread " << format_percent(a.step_spread) << " (p90 against p50, or its repetitions apart)";
  } else {
    md << "; its steps' spread was not recorded";
  }
  md << "; so settings within " << format_percent(a.tie_band) << " of each other are a tie.";
  if (a.repetitions_left_out > 0) {
    md << " " << a.repetitions_left_out << " of its repetitions did not run to a steady state and are left out.";
  }
  if (!a.unchecked.empty()) {
    md << " **Not to be trusted: the model could not be checked at its own point (" << a.unchecked << ").**";
  } else if (advice_off(a)) {
    md << " **Not to be trusted: the model is more than " << format_percent(kModelTolerance)
       << " off the step it measured.**";
  }
}

// What the row measured, or did not, of what the model takes: compression, contention,
// latency, the wire fractions.
void markdown_advice_inputs(std::ostringstream& md, const RowAdvice& a) {
  if (!a.compression_cost_measured) md << " The row did not measure compression's cost: fp16 and bf16 pay none here.";
  if (a.contention_measured) {
    md << " Backward and the allreduces shared the host: backward lost " << format_percent(a.compute_slowdown)
       << " of its speed while an allreduce ran, the allreduces "
       << (a.allreduce_alone_measured ? format_percent(a.comm_slowdown) + " of theirs while backward ran"
                                      : std::string("an unmeasured share of theirs (no allreduce alone)"))
       << " (as measured: each alone against both together), in every setting.";
  } else {
    md << " How backward and the allreduces slow each other was not measured (the row ran no allreduce beside "
          "backward, or no backward alone): overlapped settings are advised as if they did not.";
  }
  if (a.fabric.inter.latency_s == 0 && a.fabric.intra.latency_s == 0) {
    md << " Latency taken as 0 (the measured link cannot show one): small buckets look cheaper than they are; "
          "give --latency-us.";
  }
  if (a.fp16_wire_fraction != 0.5 || a.bf16_wire_fraction != 0.5) {
    md << " An fp16 allreduce took " << format_fixed(a.fp16_wire_fraction, 2) << " and a bf16 one "
       << format_fixed(a.bf16_wire_fraction, 2) << " of an fp32 one's time alone here.";
  }
}

// The advice per rank count, against PyTorch's defaults, with the closest ties.
void markdown_advice_table(std::ostringstream& md, const RowAdvice& a) {
  md << "\n\n| ranks | advice | flags | step | images/s | against PyTorch's defaults | also within " << format_percent(a.tie_band)
     << " |\n| ---: | --- | --- | ---: | ---: | --- | --- |\n";
  for (const RankAdvice& k : a.ranks) {
    const SettingProjection& best = k.settings[k.advised];
    std::string against;
    if (k.best == k.defaults) {
      against = "the defaults are the fastest";
    } else if (k.defaults_tie()) {
      against = "the fastest, " + setting_label(k.settings[k.best].setting) + " (" +
                format_seconds(k.settings[k.best].step_s) + "), is a tie with them: keep them";
    } else {
      against = format_fixed(1 + k.gain_over_defaults, 2) + "x the defaults' speed (" +
                format_seconds(k.settings[k.defaults].step_s) + ")";
    }
    // The closest three by name, the rest counted (every one is in the table below and the JSON).
    std::string ties;
    std::size_t named = 0;
    for (std::size_t i : k.ties) {
      if (i == k.advised || ++named > 3) continue;
      ties += (ties.empty() ? "" : "; ") + setting_label(k.settings[i].setting);
    }
    if (named > 3) ties += "; and " + std::to_string(named - 3) + " more";
    md << "| " << k.ranks << " | " << setting_label(best.setting) << " | `" << setting_flags(best.setting) << "` | "
       << format_seconds(best.step_s) << " | " << format_rate(best.images_per_s) << " | " << against << " | "
       << (ties.empty() ? "-" : ties) << " |\n";
  }
}

// Every setting's projected step at every rank count, the advised one in bold.
void markdown_every_setting(std::ostringstream& md, const RowAdvice& a) {
  if (a.ranks.empty()) return;
  md << "\nEvery setting, projected step (buckets):\n\n| setting |";
  for (const RankAdvice& k : a.ranks) md << " " << k.ranks << " ranks |";
  md << "\n| --- |";
  for (std::size_t i = 0; i < a.ranks.size(); ++i) md << " ---: |";
  md << "\n";
  for (std::size_t s = 0; s < a.ranks.front().settings.size(); ++s) {
    md << "| " << setting_label(a.ranks.front().settings[s].setting) << " |";
    for (const RankAdvice& k : a.ranks) {
      const bool mark = s == k.advised;
      md << " " << (mark ? "**" : "") << format_seconds(k.settings[s].step_s) << (mark ? "**" : "") << " ("
         << k.settings[s].buckets << ") |";
    }
    md << "\n";
  }
}

}  // namespace

std::string markdown_advice(const std::vector<RowAdvice>& advice, bool every_setting) {
  std::ostringstream md;
  for (const RowAdvice& a : advice) {
    const std::string label = row_label(a.row, a.mode);
    if (!a.not_advised.empty()) {
      md << "- " << label << ": no advice: " << a.not_advised << "\n";
      continue;
    }
    markdown_advice_measured(md, a, label);
    markdown_advice_inputs(md, a);
    markdown_advice_table(md, a);
    if (every_setting) markdown_every_setting(md, a);
    md << "\nNot modelled: " << kAdviceLeavesOut << ".\n";
  }
  return md.str();
}

}  // namespace ddpbench
