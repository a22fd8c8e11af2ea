#pragma once
// DDP past the machine it was measured on. From a DDP row's measurements (when backward made
// each gradient bucket ready, each bucket's bytes, forward, backward's compute, optimizer and
// data per step), the step on another cluster: each bucket's allreduce costed by the ring
// model, hierarchical where a node holds several ranks (nccl-tests doc/PERFORMANCE.md:
// t = 2(n-1)a + 2(n-1)/n * S/B); the buckets run one after another on one communication
// stream, each no earlier than backward made it ready; the step is forward + the later of
// backward's end and the last bucket's end + optimizer + data. Left out: compute slowed by
// communication running beside it, stragglers, topologies of more than two levels, and
// collective algorithms other than the ring. No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/run_result.hpp"

namespace ddpbench {

/// One level of a network as the ring model sees it: a per-step latency and a bandwidth.
struct Link {
  double latency_s = 0;
  double bytes_per_s = 0;
};

/// A cluster's two levels, and where their figures come from. `inter` is one NIC's link;
/// a node has `nics_per_node` of them, which its ranks' rings across nodes share: one per GPU
/// in rail-optimised InfiniBand (DGX), one for the whole node in most Ethernet clusters.
struct Fabric {
  std::string name;
  Link intra;  // between ranks of one node
  Link inter;  // between nodes, per NIC
  std::string source;
  int64_t nics_per_node = 1;
};

/// The fabrics ddpbench knows by name, from vendors' data sheets.
const std::vector<Fabric>& named_fabrics();

/// The one called `name`; throws InputError("<flag> <name>: expected measured|hdr-ib|...")
/// when none is.
const Fabric& named_fabric(const std::string& name, std::string_view flag);

/// Seconds to allreduce `bytes` over `ranks` ranks, `per_node` of them to a node: a ring within
/// the node when it holds them all, a ring across nodes when each holds one, else
/// reduce-scatter within the node, a ring across nodes over each rank's share (the node's
/// rings sharing its NICs: each gets min(1, NICs / ranks a node) of one NIC's bandwidth), and
/// all-gather within the node.
double allreduce_seconds(double bytes, int64_t ranks, int64_t per_node, const Fabric& fabric);

/// The ring model's latency and bandwidth fitted (least squares, the latency at least 0) to
/// allreduce times of several sizes at `ranks` ranks. Throws InputError when there is nothing
/// to fit, or the times fall as the bytes grow; one size alone is fitted through the origin.
Link fit_link(const std::vector<std::pair<double, double>>& bytes_and_seconds, int64_t ranks);

/// The link measured by ddpbench_microbench's BM_RankAllreduce (ranks as processes, one per
/// host, across the link), from its Google Benchmark JSON: the largest world among its entries.
/// Other allreduce benchmarks are left out (BM_GlooAllreduce runs its ranks as threads of one
/// process over loopback: no link). Throws InputError naming `source` when it holds none.
struct MeasuredLink {
  Link link;
  int64_t ranks = 0;
  std::string source;
};
MeasuredLink link_from_microbenchmark(const nlohmann::json& document, const std::string& source);

struct ProjectionOptions {
  std::vector<int64_t> ranks = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  int64_t ranks_per_node = 8;
  std::string fabric = "measured";  // `measured` or a named fabric
  std::optional<double> intra_node_gbps, inter_node_gbps, latency_us;  // override the fabric's
  std::optional<int64_t> nics_per_node;                                 // override the fabric's
  std::optional<MeasuredLink> calibration;  // `measured` from a microbenchmark, not from the row
};

struct ProjectedPoint {
  int64_t ranks = 1;
  double step_s = kNotMeasured;
  double images_per_s = kNotMeasured;
  double speedup = kNotMeasured;           // against the same row on one rank
  double scaling_efficiency = kNotMeasured;
  double comm_s = kNotMeasured;            // every bucket's allreduce, one after another
  double exposed_comm_s = kNotMeasured;    // what backward's compute did not hide
  double in_step_collectives_s = 0;        // SyncBatchNorm's and the broadcast inside forward and backward
};

struct RowProjection {
  std::string row;
  std::string mode;
  int64_t repetition = 0;
  int64_t repetitions_left_out = 0;  // of the row's repetitions, those that did not run to a steady state
  int64_t measured_ranks = 1;
  double measured_step_s = kNotMeasured;        // the row's mean steady step
  double measured_images_per_s = kNotMeasured;  // steady, all ranks
  double model_step_s = kNotMeasured;           // the model at the measured ranks, on the measured link
  double model_error = kNotMeasured;            // model_step_s / measured_step_s - 1: its own check
  std::string unchecked;                        // why the model could not be set at its own point
  int64_t sync_bn_layers = 0;                   // their collectives costed as communication
  double measured_collective_wait_s = 0;        // a step's waits in them, taken out of its compute
  Fabric measured_link;                         // the link the row ran on, as fitted
  Fabric fabric;                                // the link projected to
  std::vector<ProjectedPoint> points;
  std::string not_projected;                    // why, when the row cannot be
};

/// How far the model, set at a row's measured ranks on its measured link, may be from the step
/// measured there before its projections are not to be trusted.
inline constexpr double kModelTolerance = 0.15;

/// Whether the projection failed its own check (beyond kModelTolerance at its measured point)
/// or could not be checked (its row's link was not measured).
bool model_off(const RowProjection& projection);

/// The projection of one row (the repetition with the median step), or why there is none.
RowProjection project_row(const std::vector<const RunResult*>& repetitions, const ProjectionOptions& options);

/// Why a row's step cannot feed the step model of `project` and `advise` alike (one set of rules
/// for both: a row one refuses, the other must not project from), naming the field; empty where
/// it can. The step's phases, backward's compute and each bucket's bytes and ready time are
/// times and sizes a run records: finite, not negative, ready within backward.
std::string step_model_problem(const RunResult& row);

/// Why no repetition of a row can be modelled: none ran to a steady state, and what the first
/// that did not says of itself (a failure, the proof's "did less work than configured").
std::string no_steady_repetition(const std::vector<const RunResult*>& repetitions);

/// The document's DDP rows, each with its repetitions, in the order they first appear.
std::vector<std::vector<const RunResult*>> ddp_rows(const ResultDocument& document);

/// Every DDP row of the document (non-DDP rows are not listed).
std::vector<RowProjection> project_document(const ResultDocument& document, const ProjectionOptions& options);

/// The options as `sweep --project` records them in the document, and back.
nlohmann::json projection_options_json(const ProjectionOptions& options);
ProjectionOptions projection_options_from_json(const nlohmann::json& j);

/// The projection `sweep --project` asked for (document.sweep->projection), or nullopt; a
/// projection that cannot be made is one entry saying why.
std::optional<std::vector<RowProjection>> sweep_projections(const ResultDocument& document);

/// A link as JSON: {latency_s, bytes_per_s}, null where not measured.
nlohmann::json link_json(const Link& link);
nlohmann::json projection_json(const std::vector<RowProjection>& projections);
/// The projections as Markdown: rows whose model failed its own check said so first.
std::string markdown_projection(const std::vector<RowProjection>& projections);

}  // namespace ddpbench
