#include "reports/projection.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "harness/base/input_error.hpp"
#include "harness/base/units.hpp"
#include "reports/step_collectives.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

constexpr double kGbit = 1e9 / 8;  // bytes per second in a Gbit/s

// What the hook puts on the wire per gradient byte: fp16 and bf16 compression halve it.
double wire_fraction(const RunResult& r) {
  const json hook = r.config.value("comm-hook", json("allreduce"));
  return hook == "allreduce" ? 1.0 : 0.5;
}

struct MeasuredBucket {
  double bytes = 0;
  double ready_s = 0;
  double start_s = kNotMeasured;
  double allreduce_s = 0;  // launch to completion
  double wire_s = kNotMeasured;  // on the wire: the wait behind earlier buckets left out
};

// Files from before wire_s was recorded: the same rule over the mean launches and completions.
void derive_wire_times(std::vector<MeasuredBucket>& buckets) {
  if (std::all_of(buckets.begin(), buckets.end(), [](const auto& b) { return std::isfinite(b.wire_s); })) return;
  std::vector<MeasuredBucket*> by_launch;
  for (auto& b : buckets) by_launch.push_back(&b);
  std::sort(by_launch.begin(), by_launch.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
  double busy_until = -std::numeric_limits<double>::infinity();
  for (MeasuredBucket* b : by_launch) {
    if (!std::isfinite(b->start_s)) {
      b->wire_s = b->allreduce_s;
      continue;
    }
    const double end = b->start_s + b->allreduce_s;
    b->wire_s = std::max(0.0, end - std::max(b->start_s, busy_until));
    busy_until = std::max(busy_until, end);
  }
}

// Fabric `name` from the table, or the one fitted to what was measured.
Fabric chosen_fabric(const ProjectionOptions& options, const Fabric& measured) {
  Fabric f = options.fabric == "measured" ? measured : named_fabric(options.fabric, "--fabric");
  if (options.intra_node_gbps) f.intra.bytes_per_s = *options.intra_node_gbps * kGbit;
  if (options.inter_node_gbps) f.inter.bytes_per_s = *options.inter_node_gbps * kGbit;
  if (options.latency_us) f.intra.latency_s = f.inter.latency_s = *options.latency_us * 1e-6;
  if (options.nics_per_node) f.nics_per_node = *options.nics_per_node;
  if (options.intra_node_gbps || options.inter_node_gbps || options.latency_us || options.nics_per_node) {
    f.source += ", with the figures given";
  }
  return f;
}

// The step at `ranks` ranks: the buckets' allreduces one after another, each from when
// backward made it ready; backward ends at its compute or at the last allreduce.
ProjectedPoint step_at(int64_t ranks, int64_t per_node, const Fabric& fabric, const std::vector<MeasuredBucket>& buckets,
                       double forward_s, double backward_compute_s, double optimizer_s, double data_s) {
  ProjectedPoint p;
  p.ranks = ranks;
  double stream_free = 0, comm = 0;
  if (ranks > 1) {
    for (const MeasuredBucket& b : buckets) {
      const double t = allreduce_seconds(b.bytes, ranks, per_node, fabric);
      stream_free = std::max(stream_free, b.ready_s) + t;
      comm += t;
    }
  }
  p.comm_s = comm;
  p.exposed_comm_s = std::max(0.0, stream_free - backward_compute_s);
  p.step_s = data_s + forward_s + std::max(backward_compute_s, stream_free) + optimizer_s;
  return p;
}

// The repetition a row is projected from: the median by steady throughput of those that ran
// to a steady state (nullptr where none did).
const RunResult* median_repetition(const std::vector<const RunResult*>& repetitions) {
  std::vector<const RunResult*> ok;
  for (const RunResult* r : repetitions) {
    if (r->status == RunStatus::ok && std::isfinite(r->steady_images_per_s)) ok.push_back(r);
  }
  if (ok.empty()) return nullptr;
  std::sort(ok.begin(), ok.end(), [](auto* a, auto* b) { return a->steady_images_per_s < b->steady_images_per_s; });
  return ok[(ok.size() - 1) / 2];
}

// What the model reads of a row's step: its buckets, by when backward made them ready, and the
// phases around them.
struct RowSteps {
  std::vector<MeasuredBucket> buckets;
  double backward_compute_s = kNotMeasured;
  PhaseSeconds phases;
  std::optional<StepCollectives> collectives;  // SyncBatchNorm's, taken out of forward and backward
};

// The waits in the step's collectives out of forward and backward: their compute alone, each
// bucket ready that much earlier as backward's compute shrinks (the collectives are spread
// through it, a layer at a time).
void take_out_waits(RowSteps& steps, const StepCollectives& c) {
  const double compute_s = steps.backward_compute_s - c.backward_wait_s;
  for (auto& b : steps.buckets) b.ready_s *= compute_s / steps.backward_compute_s;
  steps.backward_compute_s = compute_s;
  steps.phases.forward_s -= c.forward_wait_s;
  steps.collectives = c;
}

// The row's bucket timeline, or nullopt where it has none the model can run (a bucket with no
// ready time or no bytes, or backward's compute unmeasured). Without overlap the row held every
// bucket until backward ended, and so does its projection.
std::optional<RowSteps> read_steps(const RunResult& r) {
  const json& details = r.strategy_details;
  RowSteps steps{{}, json_number_or(details, "backward_compute_s", kNotMeasured), r.mean_phase_s, std::nullopt};
  if (details.is_object() && details.contains("bucket_timeline") && details.at("bucket_timeline").is_array()) {
    for (const json& b : details.at("bucket_timeline")) {
      steps.buckets.push_back({json_number_or(b, "bytes", 0) * wire_fraction(r), json_number_or(b, "ready_s", kNotMeasured),
                               json_number_or(b, "start_s", kNotMeasured), json_number_or(b, "allreduce_s", kNotMeasured),
                               json_number_or(b, "wire_s", kNotMeasured)});
    }
  }
  derive_wire_times(steps.buckets);
  const bool timed = !steps.buckets.empty() && std::isfinite(steps.backward_compute_s) &&
                     std::all_of(steps.buckets.begin(), steps.buckets.end(), [](const MeasuredBucket& b) {
                       return std::isfinite(b.ready_s) && b.bytes > 0;
                     });
  if (!timed) return std::nullopt;
  if (r.config.is_object() && !r.config.value("overlap", true)) {
    for (auto& b : steps.buckets) b.ready_s = steps.backward_compute_s;
  }
  std::sort(steps.buckets.begin(), steps.buckets.end(), [](const auto& a, const auto& b) { return a.ready_s < b.ready_s; });
  return steps;
}

// The link the row's own buckets crossed: the bandwidth that carries all their bytes in their
// total time on the wire, or nullopt where no allreduce was timed on it. Each bucket's time on
// the wire, never launch to completion: that holds the wait behind the buckets before it, which
// the model adds again by running them one after another. A row's few bucket sizes, their
// allreduces overlapping and sharing the link, cannot tell a latency from a bandwidth (a line
// through them put rows 20-40 % off their own step, and a latency so fitted, multiplied by
// 2(n-1), doubled the projections to more hosts); a microbenchmark's sizes (--calibrate) can.
std::optional<Fabric> link_of_own_buckets(const RunResult& r, const std::vector<MeasuredBucket>& buckets) {
  double bytes = 0, seconds = 0;
  int64_t on_wire = 0;
  // A bucket whose allreduce ran wholly beside another's (Gloo runs two at once) has no time
  // of its own on the wire, but its bytes crossed it in the other's: every bucket counts.
  for (const auto& b : buckets) {
    if (!std::isfinite(b.wire_s) || b.wire_s < 0) continue;
    bytes += b.bytes;
    seconds += b.wire_s;
    ++on_wire;
  }
  if (!(bytes > 0 && seconds > 0)) return std::nullopt;
  const double n = static_cast<double>(r.world_size);
  const Link link{0, 2 * (n - 1) / n * bytes / seconds};
  return Fabric{"measured", link, link,
                "all the bytes of this row's own " + std::to_string(on_wire) + " bucket allreduces at " +
                    std::to_string(r.world_size) + " ranks over their total time on the wire; latency unseen"};
}

// The link the row ran on, into p.measured_link: a microbenchmark's, else a fit to the row's own
// buckets. False (p.not_projected says why) where a `measured` fabric has no link to take.
bool set_measured_link(RowProjection& p, const RunResult& r, const std::vector<MeasuredBucket>& buckets,
                       const ProjectionOptions& options) {
  const bool given = options.fabric != "measured" || options.intra_node_gbps || options.inter_node_gbps;
  if (options.calibration) {
    const MeasuredLink& c = *options.calibration;
    p.measured_link = {"measured", c.link, c.link, "fitted to " + c.source + " (" + std::to_string(c.ranks) + " ranks)"};
  } else if (r.world_size > 1) {
    if (const std::optional<Fabric> own = link_of_own_buckets(r, buckets)) {
      p.measured_link = *own;
    } else if (options.fabric == "measured") {
      p.not_projected = "no link to project with: no bucket allreduce was timed on the wire";
      return false;
    } else {
      p.unchecked = "no bucket allreduce was timed on the wire, so no link was measured to set the model on";
    }
  } else if (!given) {
    p.not_projected = "measured on one rank: no link was measured (give --calibrate, a --fabric or link figures)";
    return false;
  }
  return true;
}

// A fabric the points need a bandwidth of and that has none is bad input, named with the flag
// that gives it.
void require_bandwidths(const Fabric& fabric, const ProjectionOptions& options) {
  const bool intra_needed = options.ranks_per_node > 1 &&
                            std::any_of(options.ranks.begin(), options.ranks.end(), [](int64_t n) { return n > 1; });
  if ((intra_needed && !(fabric.intra.bytes_per_s > 0)) || !(fabric.inter.bytes_per_s > 0)) {
    throw InputError("--fabric " + fabric.name + ": no bandwidth for " +
                     (fabric.inter.bytes_per_s > 0 ? "the ranks within a node (--intra-node-gbps)"
                                                   : "the links between nodes (--inter-node-gbps)"));
  }
}

// Backward with SyncBatchNorm's sums at `ranks`: one a layer, spread evenly through backward's
// compute (the model's last layer first), each on the one communication stream behind whatever
// bucket was launched before it, backward blocked until it is done; each bucket launched as
// backward makes it ready. (Measured: a sum behind the buckets waited 14 ms where forward's
// gathers, alone on the link, took 2.7.)
struct BackwardTimeline {
  double compute_end_s = 0, stream_end_s = 0, comm_s = 0, sums_s = 0;
};
BackwardTimeline backward_with_sums(const RowSteps& steps, int64_t ranks, int64_t per_node, const Fabric& fabric) {
  const StepCollectives& c = *steps.collectives;
  const std::size_t layers = c.sync_bn_features.size();
  std::vector<std::pair<double, std::ptrdiff_t>> events;  // (where in backward's compute, bucket b or sum -1-k)
  for (std::size_t b = 0; b < steps.buckets.size(); ++b) events.emplace_back(steps.buckets[b].ready_s, b);
  for (std::size_t k = 0; k < layers; ++k) {
    events.emplace_back((static_cast<double>(k) + 0.5) / static_cast<double>(layers) * steps.backward_compute_s,
                        -1 - static_cast<std::ptrdiff_t>(k));
  }
  std::stable_sort(events.begin(), events.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  BackwardTimeline t;
  double wall = 0, done = 0;
  for (const auto& [at, what] : events) {
    wall += at - done;
    done = at;
    if (what >= 0) {
      const double s = ranks > 1 ? allreduce_seconds(steps.buckets[what].bytes, ranks, per_node, fabric) : 0;
      t.stream_end_s = std::max(t.stream_end_s, wall) + s;
      t.comm_s += s;
    } else {
      const double s = c.backward_sum_s(static_cast<std::size_t>(-1 - what), ranks, per_node, fabric);
      t.stream_end_s = std::max(t.stream_end_s, wall) + s;
      t.sums_s += s;
      wall = t.stream_end_s;
    }
  }
  t.compute_end_s = wall + std::max(0.0, steps.backward_compute_s - done);
  return t;
}

// The in-step collectives at `ranks`: forward longer by its gathers and the broadcast, backward as
// backward_with_sums lays it out.
ProjectedPoint step_of(const RowSteps& steps, int64_t ranks, int64_t per_node, const Fabric& fabric) {
  if (!steps.collectives) {
    return step_at(ranks, per_node, fabric, steps.buckets, steps.phases.forward_s, steps.backward_compute_s,
                   steps.phases.optimizer_s, steps.phases.data_s);
  }
  const double forward_s = steps.collectives->forward_s(ranks, per_node, fabric);
  const BackwardTimeline t = backward_with_sums(steps, ranks, per_node, fabric);
  ProjectedPoint p;
  p.ranks = ranks;
  p.comm_s = t.comm_s;
  p.exposed_comm_s = std::max(0.0, t.stream_end_s - t.compute_end_s);
  p.step_s = steps.phases.data_s + steps.phases.forward_s + forward_s + std::max(t.compute_end_s, t.stream_end_s) +
             steps.phases.optimizer_s;
  p.in_step_collectives_s = forward_s + t.sums_s;
  return p;
}

// The model at the row's own point: its ranks, all on one node (the measured run had one rank
// per node unless they shared one machine: all of them), on the link measured there (one rank
// needs none); else why it could not be set there.
void check_own_point(RowProjection& p, const RunResult& r, const RowSteps& steps) {
  if (p.measured_link.intra.bytes_per_s > 0 || r.world_size == 1) {
    p.model_step_s = step_of(steps, r.world_size, r.world_size, p.measured_link).step_s;
    p.model_error = p.model_step_s / p.measured_step_s - 1;
  } else if (p.unchecked.empty()) {
    p.unchecked = "no link was measured to set the model on";
  }
}

void project_points(RowProjection& p, const RunResult& r, const RowSteps& steps, const ProjectionOptions& options) {
  const double per_rank_batch = static_cast<double>(r.global_batch) / static_cast<double>(std::max<int64_t>(1, r.world_size));
  const double one_rank_step = step_of(steps, 1, options.ranks_per_node, p.fabric).step_s;
  for (int64_t ranks : options.ranks) {
    ProjectedPoint point = step_of(steps, ranks, options.ranks_per_node, p.fabric);
    point.images_per_s = static_cast<double>(ranks) * per_rank_batch / point.step_s;
    point.speedup = static_cast<double>(ranks) * one_rank_step / point.step_s;
    point.scaling_efficiency = point.speedup / static_cast<double>(ranks);
    p.points.push_back(point);
  }
}

}  // namespace

const std::vector<Fabric>& named_fabrics() {
  // Per-direction link bandwidths and latencies as the vendors' data sheets give them.
  static const std::vector<Fabric> fabrics = {
      {"hdr-ib", {2e-6, 300e9}, {5e-6, 200 * kGbit},
       "NVLink 3 within a node (A100: 600 GB/s both ways), HDR InfiniBand between nodes (200 Gbit/s a NIC, one "
       "NIC per GPU as DGX A100's rails)",
       8},
      {"ndr-ib", {2e-6, 450e9}, {5e-6, 400 * kGbit},
       "NVLink 4 within a node (H100/H200: 900 GB/s both ways), NDR InfiniBand between nodes (400 Gbit/s a NIC, "
       "one NIC per GPU as DGX H100's rails)",
       8},
      {"ethernet-100g", {5e-6, 32e9}, {10e-6, 100 * kGbit},
       "PCIe 4.0 x16 within a node (32 GB/s), 100 Gbit/s Ethernet between nodes (one NIC a node)", 1},
  };
  return fabrics;
}

const Fabric& named_fabric(const std::string& name, std::string_view flag) {
  const auto& named = named_fabrics();
  const auto it = std::find_if(named.begin(), named.end(), [&](const Fabric& n) { return n.name == name; });
  if (it == named.end()) {
    std::string names = "measured";
    for (const auto& n : named) names += "|" + n.name;
    throw InputError(std::string(flag) + " " + name + ": expected " + names);
  }
  return *it;
}

double allreduce_seconds(double bytes, int64_t ranks, int64_t per_node, const Fabric& fabric) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const int64_t k = std::clamp<int64_t>(per_node, 1, ranks);  // ranks in a node
  const int64_t m = (ranks + k - 1) / k;                      // nodes
  const auto ring = [](double s, double n, const Link& link) {
    return n <= 1 ? 0.0 : 2 * (n - 1) * link.latency_s + 2 * (n - 1) / n * s / link.bytes_per_s;
  };
  if (m == 1) return ring(bytes, static_cast<double>(ranks), fabric.intra);
  if (k == 1) return ring(bytes, static_cast<double>(ranks), fabric.inter);
  // Reduce-scatter and all-gather within the node are each half of an intra-node ring; across
  // nodes each rank reduces its 1/k share, the node's k rings sharing its NICs.
  const double kd = static_cast<double>(k);
  Link per_ring = fabric.inter;
  per_ring.bytes_per_s *= std::min(1.0, static_cast<double>(std::max<int64_t>(1, fabric.nics_per_node)) / kd);
  return ring(bytes, kd, fabric.intra) + ring(bytes / kd, static_cast<double>(m), per_ring);
}

Link fit_link(const std::vector<std::pair<double, double>>& samples, int64_t ranks) {
  if (samples.empty() || ranks < 2) throw InputError("no allreduce times to fit a link to (at 2 ranks or more)");
  // t = a + b S, with a = 2(n-1) latency and b = 2(n-1)/n / bandwidth.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [s, t] : samples) {
    sx += s;
    sy += t;
    sxx += s * s;
    sxy += s * t;
  }
  const double n = static_cast<double>(samples.size());
  const double denominator = n * sxx - sx * sx;
  double a = 0, b = 0;
  if (denominator > 0) {
    // Times that fall as the bytes grow say nothing about a bandwidth.
    b = (n * sxy - sx * sy) / denominator;
    if (!(b > 0)) throw InputError("the allreduce times fit no bandwidth (they fall as the bytes grow)");
    a = (sy - b * sx) / n;
  }
  if (denominator <= 0 || a < 0) {  // one size, or a latency below what the sizes can see: through the origin
    a = 0;
    b = sxx > 0 ? sxy / sxx : 0;
  }
  if (!(b > 0)) throw InputError("the allreduce times fit no bandwidth");
  const double r = static_cast<double>(ranks);
  return Link{a / (2 * (r - 1)), 2 * (r - 1) / r / b};
}

MeasuredLink link_from_microbenchmark(const json& doc, const std::string& source) {
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc.at("benchmarks").is_array()) {
    throw InputError("--calibrate " + source + ": not Google Benchmark JSON (no \"benchmarks\")");
  }
  std::map<int64_t, std::vector<std::pair<double, double>>> by_ranks;
  for (const json& b : doc.at("benchmarks")) {
    if (!b.is_object() || b.value("name", std::string()).rfind("BM_RankAllreduce", 0) != 0) continue;
    const double bytes = json_number_or(b, "bytes", 0), ranks = json_number_or(b, "ranks", 0), time = json_number_or(b, "real_time", -1);
    if (bytes <= 0 || ranks < 2 || time <= 0 || b.value("error_occurred", false)) continue;
    if (b.value("run_type", std::string("iteration")) != "iteration") continue;
    const std::string unit = b.value("time_unit", std::string("ns"));
    const double scale = unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9;
    by_ranks[static_cast<int64_t>(ranks)].emplace_back(bytes, time * scale);
  }
  if (by_ranks.empty()) {
    throw InputError("--calibrate " + source + ": no BM_RankAllreduce entry with `bytes` and `ranks` (2 or more) in "
                     "it: run ddpbench_microbench --benchmark_filter=RankAllreduce --benchmark_format=json as every rank "
                     "of a world across the link (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set, as torchrun does); "
                     "BM_GlooAllreduce's ranks are threads of one process over loopback and measure no link");
  }
  const auto& [ranks, samples] = *by_ranks.rbegin();
  return MeasuredLink{fit_link(samples, ranks), ranks, source};
}

namespace {

std::string number_text(const json& object, const char* key) {
  return object.is_object() && object.contains(key) ? object.at(key).dump() : std::string("absent");
}

std::string phases_problem(const PhaseSeconds& p) {
  const std::pair<const char*, double> phases[] = {{"data_s", p.data_s},
                                                   {"forward_s", p.forward_s},
                                                   {"backward_s", p.backward_s},
                                                   {"comm_s", p.comm_s},
                                                   {"optimizer_s", p.optimizer_s}};
  for (const auto& [name, seconds] : phases) {
    if (!(seconds >= 0) || !std::isfinite(seconds)) {
      return std::string("mean_phase_s.") + name + " " + (std::isfinite(seconds) ? json(seconds).dump() : "null") +
             ": not a time its steps spent";
    }
  }
  return "";
}

// A timed bucket holds the bytes the Reducer's bucket of its number holds (bucket_bytes): the
// projection costs the timeline's bytes, so one edited there moved every projected allreduce.
std::string bucket_size_problem(const json& d, const json& bucket, double bytes) {
  if (!d.contains("bucket_bytes") || !d.at("bucket_bytes").is_array() || !bucket.contains("bucket")) return "";
  const json& sizes = d.at("bucket_bytes");
  const json& index = bucket.at("bucket");
  if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<uint64_t>() >= sizes.size()) {
    return "bucket_timeline: bucket " + index.dump() + " is none of the " + std::to_string(sizes.size()) +
           " in bucket_bytes";
  }
  const json& size = sizes.at(index.get<std::size_t>());
  if (!size.is_number() || size.get<double>() != bytes) {
    return "bucket_timeline: bucket " + index.dump() + " of " + json(bytes).dump() + " bytes, where bucket_bytes says " +
           size.dump();
  }
  return "";
}

std::string bucket_timeline_problem(const json& d, double backward_s) {
  if (!d.contains("bucket_timeline")) return "";  // none: the model says so itself
  if (!d.at("bucket_timeline").is_array()) return "bucket_timeline: not a list";
  for (const json& b : d.at("bucket_timeline")) {
    const double bytes = json_number_or(b, "bytes", kNotMeasured), ready = json_number_or(b, "ready_s", kNotMeasured);
    if (!(bytes > 0) || bytes != std::floor(bytes)) return "bucket_timeline: a bucket of " + number_text(b, "bytes") + " bytes";
    if (std::string why = bucket_size_problem(d, b, bytes); !why.empty()) return why;
    if (!(ready >= 0 && ready <= backward_s * 1.05 + 1e-3)) {
      return "bucket_timeline: a bucket ready at " + number_text(b, "ready_s") + " s, outside backward (0 to " +
             json(backward_s).dump() + " s)";
    }
    // Its timings, where recorded, are times: when it started, its allreduce (none on one rank)
    // and its own time on the wire (none where it ran wholly beside another: Gloo runs two).
    for (const char* key : {"start_s", "allreduce_s", "wire_s"}) {
      if (!b.is_object() || !b.contains(key) || b.at(key).is_null()) continue;
      const double v = b.at(key).is_number() ? b.at(key).get<double>() : kNotMeasured;
      if (!std::isfinite(v) || v < 0) {
        return "bucket_timeline: a bucket's " + std::string(key) + " " + b.at(key).dump() + ": not a time";
      }
    }
  }
  return "";
}

}  // namespace

std::string step_model_problem(const RunResult& r) {
  if (r.global_batch <= 0) return "global_batch " + std::to_string(r.global_batch) + ": no step to model";
  if (std::string why = phases_problem(r.mean_phase_s); !why.empty()) return why;
  const json& d = r.strategy_details;
  // A traced row's phases leave its profiled steps out, but its bucket timeline and backward's
  // compute hold them (a model 40 % off, or 13 % and passing its own check).
  if (r.trace.traced()) {
    return "a traced row (--trace-steps): its bucket timeline and backward's compute hold the profiled steps, "
           "which its phases leave out; project an untraced run of the row";
  }
  // SyncBatchNorm's collectives wait inside forward and backward: taken for compute, those waits
  // were carried to every world size (a SyncBN row measured slower than the one without
  // projected to 85 % at 8 ranks where it ran at 36 %); a row that does not record them apart
  // cannot be projected from.
  if (std::string why = step_collectives(r, json_number_or(d, "backward_compute_s", kNotMeasured)).why; !why.empty()) {
    return why;
  }
  if (!d.is_object() || !d.contains("backward_compute_s")) return "";  // no timeline: the model says so itself
  const double backward_s = json_number_or(d, "backward_compute_s", kNotMeasured);
  if (!(backward_s > 0) || !std::isfinite(backward_s)) {
    return "backward_compute_s " + number_text(d, "backward_compute_s") + ": not a time";
  }
  return bucket_timeline_problem(d, backward_s);
}

std::string no_steady_repetition(const std::vector<const RunResult*>& repetitions) {
  for (const RunResult* r : repetitions) {
    if (r->status != RunStatus::ok) {
      return "no repetition ran to a steady state (repetition " + std::to_string(r->repetition) + ": " +
             std::string(status_name(r->status)) + (r->reason.empty() ? "" : ": " + r->reason) + ")";
    }
  }
  return "no repetition ran to a steady state (none measured its steady images/s)";
}

RowProjection project_row(const std::vector<const RunResult*>& repetitions, const ProjectionOptions& options) {
  RowProjection p;
  if (repetitions.empty()) return p;
  p.row = repetitions.front()->name;
  p.mode = repetitions.front()->mode;
  const RunResult* median = median_repetition(repetitions);
  if (median == nullptr) {
    p.not_projected = no_steady_repetition(repetitions);
    return p;
  }
  const RunResult& r = *median;
  p.not_projected = step_model_problem(r);
  if (!p.not_projected.empty()) return p;
  p.repetition = r.repetition;
  p.repetitions_left_out = std::count_if(repetitions.begin(), repetitions.end(), [](const RunResult* x) {
    return x->status != RunStatus::ok || !std::isfinite(x->steady_images_per_s);
  });
  p.measured_ranks = r.world_size;
  p.measured_images_per_s = r.steady_images_per_s;
  p.measured_step_s = static_cast<double>(r.global_batch) / r.steady_images_per_s;
  std::optional<RowSteps> steps = read_steps(r);
  if (!steps) {
    p.not_projected = "no bucket timeline (rows of ddpbench's own hook have one; --comm-hook builtin-fp16 runs out of "
                      "sight)";
    return p;
  }
  if (const std::optional<StepCollectives> c = step_collectives(r, steps->backward_compute_s).collectives) {
    take_out_waits(*steps, *c);
    p.sync_bn_layers = static_cast<int64_t>(c->sync_bn_features.size());
    p.measured_collective_wait_s = c->forward_wait_s + c->backward_wait_s;
  }
  if (!set_measured_link(p, r, steps->buckets, options)) return p;
  // A link measured without a latency (the row's buckets cannot tell one) takes the one its
  // SyncBatchNorm collectives waited: small messages, latency all but alone.
  if (steps->collectives) (void)take_latency_from_waits(p.measured_link, *steps->collectives);
  p.fabric = chosen_fabric(options, p.measured_link);
  require_bandwidths(p.fabric, options);
  check_own_point(p, r, *steps);
  project_points(p, r, *steps, options);
  return p;
}

bool model_off(const RowProjection& p) {
  return !p.unchecked.empty() || (std::isfinite(p.model_error) && std::fabs(p.model_error) > kModelTolerance);
}

std::vector<std::vector<const RunResult*>> ddp_rows(const ResultDocument& doc) {
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  std::vector<std::vector<const RunResult*>> rows;
  for (const auto& r : doc.runs) {
    // ddpbench's run of a row for the comparison with PyTorch alone is not a row to project.
    if (r.strategy != "ddp" || is_comparison_run(doc, r.name, r.mode)) continue;
    const auto [it, added] = index.try_emplace(std::make_pair(r.name, r.mode), rows.size());
    if (added) rows.emplace_back();
    rows[it->second].push_back(&r);
  }
  return rows;
}

std::vector<RowProjection> project_document(const ResultDocument& doc, const ProjectionOptions& options) {
  std::vector<RowProjection> out;
  for (const auto& repetitions : ddp_rows(doc)) out.push_back(project_row(repetitions, options));
  return out;
}

std::optional<std::vector<RowProjection>> sweep_projections(const ResultDocument& doc) {
  if (!doc.sweep || doc.sweep->projection.is_null()) return std::nullopt;
  try {
    return project_document(doc, projection_options_from_json(doc.sweep->projection));
  } catch (const std::exception& e) {
    RowProjection why;
    why.row = "projection";
    why.not_projected = e.what();
    return std::vector<RowProjection>{why};
  }
}

json projection_options_json(const ProjectionOptions& o) {
  json j = {{"ranks", o.ranks}, {"ranks_per_node", o.ranks_per_node}, {"fabric", o.fabric}};
  if (o.intra_node_gbps) j["intra_node_gbps"] = *o.intra_node_gbps;
  if (o.inter_node_gbps) j["inter_node_gbps"] = *o.inter_node_gbps;
  if (o.latency_us) j["latency_us"] = *o.latency_us;
  if (o.nics_per_node) j["nics_per_node"] = *o.nics_per_node;
  return j;
}

ProjectionOptions projection_options_from_json(const json& j) {
  ProjectionOptions o;
  if (!j.is_object()) return o;
  o.ranks = j.value("ranks", o.ranks);
  o.ranks_per_node = j.value("ranks_per_node", o.ranks_per_node);
  o.fabric = j.value("fabric", o.fabric);
  if (j.contains("intra_node_gbps")) o.intra_node_gbps = j.at("intra_node_gbps").get<double>();
  if (j.contains("inter_node_gbps")) o.inter_node_gbps = j.at("inter_node_gbps").get<double>();
  if (j.contains("latency_us")) o.latency_us = j.at("latency_us").get<double>();
  if (j.contains("nics_per_node")) o.nics_per_node = j.at("nics_per_node").get<int64_t>();
  return o;
}

json link_json(const Link& l) {
  return json{{"latency_s", json_number(l.latency_s)}, {"bytes_per_s", json_number(l.bytes_per_s)}};
}

json projection_json(const std::vector<RowProjection>& projections) {
  json out = json::array();
  const auto link = link_json;
  for (const auto& p : projections) {
    json points = json::array();
    for (const auto& q : p.points) {
      points.push_back({{"ranks", q.ranks},
                        {"step_s", json_number(q.step_s)},
                        {"images_per_s", json_number(q.images_per_s)},
                        {"speedup", json_number(q.speedup)},
                        {"scaling_efficiency", json_number(q.scaling_efficiency)},
                        {"comm_s", json_number(q.comm_s)},
                        {"exposed_comm_s", json_number(q.exposed_comm_s)},
                        {"in_step_collectives_s", json_number(q.in_step_collectives_s)}});
    }
    out.push_back({{"row", p.row},
                   {"mode", p.mode},
                   {"repetition", p.repetition},
                   {"repetitions_left_out", p.repetitions_left_out},
                   {"measured_ranks", p.measured_ranks},
                   {"measured_step_s", json_number(p.measured_step_s)},
                   {"measured_images_per_s", json_number(p.measured_images_per_s)},
                   {"model_step_s", json_number(p.model_step_s)},
                   {"model_error", json_number(p.model_error)},
                   {"model_off", model_off(p)},
                   {"unchecked", p.unchecked},
                   {"sync_bn_layers", p.sync_bn_layers},
                   {"measured_collective_wait_s", json_number(p.measured_collective_wait_s)},
                   {"measured_link", {{"intra", link(p.measured_link.intra)}, {"source", p.measured_link.source}}},
                   {"fabric", {{"name", p.fabric.name}, {"intra", link(p.fabric.intra)}, {"inter", link(p.fabric.inter)},
                               {"nics_per_node", p.fabric.nics_per_node}, {"source", p.fabric.source}}},
                   {"points", std::move(points)},
                   {"not_projected", p.not_projected}});
  }
  return out;
}

namespace {

// The link the row was measured on, as far as one was: none on one rank, or where no allreduce
// was timed on the wire (once printed as "0 s latency, 0 B/s ()").
std::string measured_link_words(const RowProjection& p) {
  const Link& link = p.measured_link.intra;
  if (link.bytes_per_s > 0 && std::isfinite(link.bytes_per_s)) {
    return "Link measured: " + format_seconds(link.latency_s) + " latency, " + format_si(link.bytes_per_s, "B/s") +
           " (" + p.measured_link.source + ").";
  }
  const std::string why = !p.unchecked.empty() ? p.unchecked
                          : p.measured_ranks <= 1 ? std::string("measured on one rank, which crosses no link")
                                                  : std::string("none was timed");
  return "No link measured (" + why + ").";
}

}  // namespace

std::string markdown_projection(const std::vector<RowProjection>& projections) {
  std::ostringstream md;
  for (const auto& p : projections) {
    if (!model_off(p)) continue;
    if (!p.unchecked.empty()) {
      md << "\n**Not to be trusted: " << row_label(p.row, p.mode) << "'s model could not be set at its own measured "
         << "point (" << p.unchecked << "), so its projections below are unchecked.**\n";
      continue;
    }
    md << "\n**Not to be trusted: " << row_label(p.row, p.mode) << "'s model, set at its " << p.measured_ranks
       << (p.measured_ranks == 1 ? " measured rank" : " measured ranks") << " on the link measured there, is "
       << (p.model_error >= 0 ? "+" : "")
       << format_fixed(100 * p.model_error, 1) << " % off the step it measured (more than "
       << format_percent(kModelTolerance) << "), so its projections below are not either.**\n";
  }
  for (const auto& p : projections) {
    const std::string label = row_label(p.row, p.mode);
    if (!p.not_projected.empty()) {
      md << "- " << label << ": not projected: " << p.not_projected << "\n";
      continue;
    }
    md << "\n### " << label << " on " << p.fabric.name << "\n\n"
       << "Measured at " << p.measured_ranks << " ranks: " << format_seconds(p.measured_step_s) << " per step; the model "
       << "on the link measured there: " << format_seconds(p.model_step_s);
    if (std::isfinite(p.model_step_s) && p.measured_step_s > 0) {
      md << " (" << (p.model_step_s >= p.measured_step_s ? "+" : "")
         << format_fixed(100 * (p.model_step_s / p.measured_step_s - 1), 1) << " %)";
    }
    md << ". " << measured_link_words(p);
    if (p.sync_bn_layers > 0) {
      md << " SyncBatchNorm (" << p.sync_bn_layers << " layers): its collectives and the buffers' broadcast waited "
         << format_seconds(p.measured_collective_wait_s)
         << " a step here, taken out of forward's and backward's compute and costed as communication at each world "
            "size (in the steps below).";
    }
    if (p.repetitions_left_out > 0) {  // as advise says it: the median is over the others
      md << " From repetition " << p.repetition << ", the median of the others: " << p.repetitions_left_out
         << " of its repetitions did not run to a steady state and are left out.";
    }
    md << " Projected to: "
       << p.fabric.name << " (" << p.fabric.source << "; " << p.fabric.nics_per_node
       << (p.fabric.nics_per_node == 1 ? " NIC" : " NICs") << " a node).\n\n"
       << "| ranks | step | images/s | speed-up | scaling efficiency | allreduce | exposed communication |\n"
       << "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const auto& q : p.points) {
      md << "| " << q.ranks << " | " << format_seconds(q.step_s) << " | " << format_rate(q.images_per_s) << " | "
         << format_fixed(q.speedup, 2) << "x | " << format_percent(q.scaling_efficiency) << " | "
         << format_seconds(q.comm_s) << " | " << format_seconds(q.exposed_comm_s) << " |\n";
    }
  }
  return md.str();
}

}  // namespace ddpbench
