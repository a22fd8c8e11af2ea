#include "reports/reporter.hpp"

#include "harness/base/atomic_file.hpp"
#include "reports/projection.hpp"
#include "reports/tuning_advice.hpp"

namespace ddpbench {
namespace {

class JsonReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& document, const std::vector<RowSummary>& rows) const override {
    nlohmann::json j = document;
    if (document.sweep) {
      nlohmann::json summary = nlohmann::json::array();
      for (const auto& r : rows) summary.push_back(summary_json(r));
      j["summary"] = std::move(summary);
      if (const auto projections = sweep_projections(document)) j["projection"] = projection_json(*projections);
      if (const auto advice = sweep_advice(document)) j["advice"] = advice_json(*advice);
    }
    return j.dump(2) + "\n";
  }
  [[nodiscard]] std::string do_file_name() const override { return "results.json"; }
};

}  // namespace

void Reporter::write(const ResultDocument& document, const std::filesystem::path& path) const {
  write_file_atomically(path, render(document));
}

nlohmann::json summary_json(const RowSummary& r) {
  nlohmann::json mean_phases = phases_json(r.phase_s);
  mean_phases["hidden_comm_s"] = json_number(r.phase_s.hidden_comm_s());
  return {{"name", r.name},
          {"mode", r.mode},
          {"status", status_name(r.status)},
          {"reason", r.reason},
          {"devices", r.devices},
          {"world_size", r.world_size},
          {"placement", r.placement},
          {"repetitions", r.repetitions},
          {"tutorial_seconds", json_number(r.tutorial_seconds)},
          {"train_time_s", json_number(r.train_time_s)},
          {"train_time_min_s", json_number(r.train_time_min_s)},
          {"train_time_max_s", json_number(r.train_time_max_s)},
          {"unstable", r.unstable},
          {"images_per_s", json_number(r.images_per_s)},
          {"steady_images_per_s", json_number(r.steady_images_per_s)},
          {"step_time_p50_s", json_number(r.step_time_p50_s)},
          {"step_time_p90_s", json_number(r.step_time_p90_s)},
          {"step_time_max_s", json_number(r.step_time_max_s)},
          {"mean_phase_s", mean_phases},
          {"train_flops_per_image", json_number(r.train_flops_per_image)},
          {"achieved_flops_per_s", json_number(r.achieved_flops_per_s)},
          {"precision", r.precision},
          {"peak_flops_per_s", json_number(r.peak_flops_per_s)},
          {"flops_utilisation", json_number(r.flops_utilisation)},
          {"test_accuracy", json_number(r.test_accuracy)},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"speedup", json_number(r.speedup)},
          {"scaling_efficiency", json_number(r.scaling_efficiency)},
          {"differences", r.differences},
          {"slowest_rank", r.slowest_rank < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.slowest_rank)},
          {"rank_spread", json_number(r.rank_spread)},
          {"straggler_cause", r.straggler_cause},
          {"straggler", r.has_straggler()},
          {"pytorch", r.pytorch ? nlohmann::json{{"name", r.pytorch->name},
                                                 {"status", status_name(r.pytorch->status)},
                                                 {"reason", r.pytorch->reason},
                                                 {"train_time_s", json_number(r.pytorch->train_time_s)},
                                                 {"steady_images_per_s", json_number(r.pytorch->steady_images_per_s)},
                                                 {"vs_pytorch_train_time", json_number(r.vs_pytorch_train_time)},
                                                 {"vs_pytorch_steady", json_number(r.vs_pytorch_steady)}}
                                : nlohmann::json(nullptr)}};
}

std::unique_ptr<Reporter> make_json_reporter() { return std::make_unique<JsonReporter>(); }

std::vector<std::unique_ptr<Reporter>> default_reporters() {
  std::vector<std::unique_ptr<Reporter>> reporters;
  // JSON last: it is what a reader waits on (scripts/device-check, the tests), and the others
  // are whole by the time it holds a row.
  reporters.push_back(make_markdown_reporter());
  reporters.push_back(make_html_reporter());
  reporters.push_back(make_json_reporter());
  return reporters;
}

}  // namespace ddpbench
