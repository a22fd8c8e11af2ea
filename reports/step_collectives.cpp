#include "reports/step_collectives.hpp"

#include <algorithm>
#include <cmath>

#include "harness/base/units.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

constexpr double kFloatBytes = 4;  // SyncBatchNorm reduces its statistics in fp32
// Figures no row writes (a layer's channels, a model's buffers), refused before their products
// overflow into a byte count of zero.
constexpr int64_t kMostChannels = int64_t{1} << 24;
constexpr double kMostBufferBytes = 1e12;

// A pipelined chain from rank 0: each level's latency once per hop, the bytes once over its link.
double broadcast_seconds(double bytes, int64_t ranks, int64_t per_node, const Fabric& fabric) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const int64_t k = std::clamp<int64_t>(per_node, 1, ranks);
  const int64_t m = (ranks + k - 1) / k;
  const auto chain = [bytes](int64_t hops, const Link& link) {
    return hops <= 0 ? 0.0 : static_cast<double>(hops) * link.latency_s + bytes / link.bytes_per_s;
  };
  return chain(k - 1, fabric.intra) + chain(m - 1, fabric.inter);
}

std::string seconds_text(double s) { return std::isfinite(s) ? format_seconds(s) : std::string("not recorded"); }

}  // namespace

double StepCollectives::forward_s(int64_t ranks, int64_t per_node, const Fabric& fabric) const {
  if (ranks <= 1) return 0;
  // all_gather_rows: each rank's 2C+1 values in a [ranks, 2C+1] sum.
  double seconds = broadcast_seconds(broadcast_bytes, ranks, per_node, fabric);
  for (int64_t c : sync_bn_features) {
    seconds += allreduce_seconds(static_cast<double>(ranks * (2 * c + 1)) * kFloatBytes, ranks, per_node, fabric);
  }
  return seconds;
}

double StepCollectives::backward_s(int64_t ranks, int64_t per_node, const Fabric& fabric) const {
  double seconds = 0;
  for (std::size_t k = 0; k < sync_bn_features.size(); ++k) seconds += backward_sum_s(k, ranks, per_node, fabric);
  return seconds;
}

double StepCollectives::backward_sum_s(std::size_t from_last, int64_t ranks, int64_t per_node, const Fabric& fabric) const {
  if (ranks <= 1 || from_last >= sync_bn_features.size()) return 0;
  const int64_t c = sync_bn_features[sync_bn_features.size() - 1 - from_last];
  return allreduce_seconds(static_cast<double>(2 * c) * kFloatBytes, ranks, per_node, fabric);
}

Link StepCollectives::with_latency_from_waits(Link link) const {
  // From forward's waits: backward's sums wait behind the gradient buckets on the one stream (14 ms
  // a sum where forward's gathers took 2.7, on 2 emulated hosts 1 ms apart), which is no latency.
  // Forward's first collective also waits out the ranks' skew from the step before: left in.
  const double n = static_cast<double>(measured_ranks);
  const double layers = static_cast<double>(sync_bn_features.size());
  const double steps = 2 * (n - 1) * layers + (broadcast_bytes > 0 ? n - 1 : 0);
  if (link.latency_s > 0 || measured_ranks < 2 || steps <= 0 || !(forward_wait_s > 0) || !(link.bytes_per_s > 0)) {
    return link;
  }
  const Fabric bandwidth_alone{"", {0, link.bytes_per_s}, {0, link.bytes_per_s}, "", 1};
  const double bytes_s = forward_s(measured_ranks, measured_ranks, bandwidth_alone);
  link.latency_s = std::max(0.0, forward_wait_s - bytes_s) / steps;
  return link;
}

bool take_latency_from_waits(Fabric& measured, const StepCollectives& c) {
  if (!(measured.intra.latency_s == 0)) return false;
  const Link link = c.with_latency_from_waits(measured.intra);
  if (link.latency_s == 0) return false;
  measured.intra = measured.inter = link;
  // Its buckets saw no latency; the waits did.
  const std::string unseen = "; latency unseen";
  if (const auto at = measured.source.find(unseen); at != std::string::npos) measured.source.erase(at, unseen.size());
  measured.source += "; the latency from its SyncBatchNorm collectives' waits in forward";
  return true;
}

RowCollectives step_collectives(const RunResult& r, double backward_compute_s) {
  const json& d = r.strategy_details;
  const double layers = json_number_or(d, "sync_bn_layers", 0);
  const double forward_wait = r.mean_phase_s.forward_collective_wait_s;
  const bool recorded_apart = std::isfinite(forward_wait) && d.is_object() && d.contains("sync_bn_features") &&
                              d.at("sync_bn_features").is_array() && d.contains("broadcast_buffer_bytes");
  const std::string sync_bn = "SyncBatchNorm across " + std::to_string(r.world_size) +
                              (r.world_size == 1 ? " rank (" : " ranks (") + std::to_string(static_cast<int64_t>(layers)) +
                              " layers)";
  const bool lists_features = d.is_object() && d.contains("sync_bn_features") && d.at("sync_bn_features").is_array() &&
                              !d.at("sync_bn_features").empty();
  if (lists_features && !(layers > 0)) {  // its waits would be taken for compute
    return {std::nullopt, "strategy_details.sync_bn_features lists " + std::to_string(d.at("sync_bn_features").size()) +
                              " layers where sync_bn_layers says " + (d.contains("sync_bn_layers") ? d.at("sync_bn_layers").dump()
                                                                                                  : std::string("none"))};
  }
  if (layers <= 0) return {};  // its one collective in a step, the broadcast, stays in forward as always
  if (!recorded_apart) {
    return {std::nullopt, sync_bn + ": the file does not record the waits in its collectives apart from forward's and "
                                    "backward's compute (mean_phase_s.forward_collective_wait_s, "
                                    "strategy_details.sync_bn_features), so the model cannot cost them at other world "
                                    "sizes; run the row again with this build, or with --no-sync-bn"};
  }
  StepCollectives c;
  for (const json& f : d.at("sync_bn_features")) {
    if (!f.is_number_integer() || f.get<int64_t>() <= 0 || f.get<int64_t>() > kMostChannels) {
      return {std::nullopt, "strategy_details.sync_bn_features: a layer of " + f.dump() + " channels"};
    }
    c.sync_bn_features.push_back(f.get<int64_t>());
  }
  if (static_cast<double>(c.sync_bn_features.size()) != layers) {
    return {std::nullopt, "strategy_details.sync_bn_features: " + std::to_string(c.sync_bn_features.size()) +
                              " layers where sync_bn_layers says " + std::to_string(static_cast<int64_t>(layers))};
  }
  c.broadcast_bytes = json_number_or(d, "broadcast_buffer_bytes", -1);
  if (!(c.broadcast_bytes >= 0) || !(c.broadcast_bytes <= kMostBufferBytes)) {
    return {std::nullopt, "strategy_details.broadcast_buffer_bytes " + d.at("broadcast_buffer_bytes").dump() + ": not a size"};
  }
  if (!std::isfinite(r.mean_phase_s.collective_wait_s)) {
    return {std::nullopt, "mean_phase_s.collective_wait_s not recorded: forward's part of it cannot be told from backward's"};
  }
  c.measured_ranks = r.world_size;
  c.forward_wait_s = forward_wait;
  c.backward_wait_s = std::max(0.0, r.mean_phase_s.collective_wait_s - forward_wait);
  // The waits lie inside the phases: a wait longer than its phase leaves no compute to model.
  if (!(c.forward_wait_s <= r.mean_phase_s.forward_s)) {
    return {std::nullopt, "its collectives inside forward waited " + seconds_text(c.forward_wait_s) + " a step, forward took " +
                              seconds_text(r.mean_phase_s.forward_s) + ": no compute is left to model"};
  }
  if (std::isfinite(backward_compute_s) && !(c.backward_wait_s < backward_compute_s)) {
    return {std::nullopt, "its collectives inside backward waited " + seconds_text(c.backward_wait_s) +
                              " a step, backward's compute took " + seconds_text(backward_compute_s) +
                              ": no compute is left to model"};
  }
  return {c, ""};
}

}  // namespace ddpbench
