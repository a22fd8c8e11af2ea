#include "reports/reporter.hpp"

#include <algorithm>
#include <cmath>

#include "harness/base/atomic_file.hpp"
#include "harness/base/units.hpp"
#include "reports/projection.hpp"
#include "reports/result_file.hpp"
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
  [[nodiscard]] bool do_wrote(std::string_view text) const override { return is_result_document(text); }
};

}  // namespace

void Reporter::write(const ResultDocument& document, const std::filesystem::path& path) const {
  write_file_atomically(path, file_text(render(document)));
}

namespace {

// Each planned repetition's status ("not run" where it has no result) and reason.
nlohmann::json outcomes_json(const std::vector<RepetitionOutcome>& outcomes) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& o : outcomes) {
    list.push_back({{"repetition", o.repetition},
                    {"status", o.status ? std::string(status_name(*o.status)) : std::string("not run")},
                    {"reason", o.reason}});
  }
  return list;
}

}  // namespace

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
          {"planned_repetitions", r.planned_repetitions},
          {"repetition_outcomes", outcomes_json(r.outcomes)},
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
          {"row_peak_flops_per_s", json_number(r.row_peak_flops_per_s)},
          {"peak_cores", r.peak_cores},
          {"peak_unit", r.peak_unit},
          {"peak_source", r.peak_source},
          {"peak_upper_bound", r.peak_upper_bound},
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
                                                 {"repetition_outcomes", outcomes_json(r.pytorch->outcomes)},
                                                 {"train_time_s", json_number(r.pytorch->train_time_s)},
                                                 {"steady_images_per_s", json_number(r.pytorch->steady_images_per_s)},
                                                 {"ddpbench", {{"name", r.pytorch->ddpbench_name},
                                                               {"compared_without", r.pytorch->compared_without},
                                                               {"status", status_name(r.pytorch->ddpbench_status)},
                                                               {"reason", r.pytorch->ddpbench_reason},
                                                               {"repetition_outcomes",
                                                                outcomes_json(r.pytorch->ddpbench_outcomes)},
                                                               {"train_time_s", json_number(r.pytorch->ddpbench_train_time_s)},
                                                               {"steady_images_per_s",
                                                                json_number(r.pytorch->ddpbench_steady_images_per_s)}}},
                                                 {"vs_pytorch_train_time", json_number(r.vs_pytorch_train_time)},
                                                 {"vs_pytorch_steady", json_number(r.vs_pytorch_steady)}}
                                : nlohmann::json(nullptr)}};
}

bool compared_without_shown(const RowSummary::PyTorchTwin& twin) {
  return !twin.compared_without.empty() &&
         (twin.status == RunStatus::ok || twin.ddpbench_status == RunStatus::ok);
}

std::string compared_without_note(const RowSummary& row) {
  // The run's name is the row's with kWithoutSyncBnSuffix (checked where the file is read).
  return "compared without " + row.pytorch->compared_without +
         ": both sides ran without it, ddpbench's figures are the row's run without it (ROW" + kWithoutSyncBnSuffix +
         " in results.json) right before the twin; the tables above keep the row as the tutorial ran it";
}

std::string status_cell(RunStatus status, const std::string& reason, TableNotes& notes) {
  const std::string word(status_name(status));
  return status == RunStatus::ok ? word : word + " " + notes.mark(reason.empty() ? "no reason given" : reason);
}

namespace {

// The repetitions in words: "repetition 2", "repetitions 0 and 2", "repetitions 0, 1 and 2".
std::string repetitions_text(const std::vector<int64_t>& repetitions) {
  std::string text = repetitions.size() == 1 ? "repetition " : "repetitions ";
  for (std::size_t i = 0; i < repetitions.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == repetitions.size() ? " and " : ", ") + std::to_string(repetitions[i]);
  }
  return text;
}

std::string outcome_word(const std::optional<RunStatus>& status) {
  return status ? std::string(status_name(*status)) : std::string("not run");
}

}  // namespace

std::string repetitions_status_cell(RunStatus status, const std::string& reason,
                                    const std::vector<RepetitionOutcome>& outcomes, TableNotes& notes) {
  if (outcomes.empty()) return status_cell(status, reason, notes);
  const RepetitionOutcome& first = outcomes.front();
  const bool alike = std::all_of(outcomes.begin(), outcomes.end(), [&](const RepetitionOutcome& o) {
    return o.status == first.status && o.reason == first.reason;
  });
  if (alike) return first.status ? status_cell(*first.status, first.reason, notes) : "not run";
  const std::string of = " of " + std::to_string(outcomes.size());
  std::string cell;
  for (const std::optional<RunStatus> word : {std::optional(RunStatus::failed), std::optional(RunStatus::interrupted),
                                              std::optional(RunStatus::skipped), std::optional<RunStatus>()}) {
    // This status's repetitions, grouped by reason in the order met.
    std::vector<std::pair<std::string, std::vector<int64_t>>> reasons;
    int64_t count = 0;
    for (const auto& o : outcomes) {
      if (o.status != word) continue;
      ++count;
      auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == o.reason; });
      if (it == reasons.end()) it = reasons.insert(reasons.end(), {o.reason, {}});
      it->second.push_back(o.repetition);
    }
    if (count == 0) continue;
    cell += (cell.empty() ? "" : ", ") + outcome_word(word) + " in " + std::to_string(count) + of;
    if (!word) continue;
    for (const auto& [why, repetitions] : reasons) {
      cell += " " + notes.mark(repetitions_text(repetitions) + ": " + (why.empty() ? "no reason given" : why));
    }
  }
  return cell;
}

std::string twin_status(const RowSummary::PyTorchTwin& twin, TableNotes& notes) {
  std::string out;
  const auto side = [&](const char* who, RunStatus status, const std::string& reason,
                        const std::vector<RepetitionOutcome>& outcomes) {
    const std::string cell = repetitions_status_cell(status, reason, outcomes, notes);
    if (cell == "ok") return;
    out += (out.empty() ? "" : ", ") + std::string(who) + " " + cell;
  };
  side("ddpbench", twin.ddpbench_status, twin.ddpbench_reason, twin.ddpbench_outcomes);
  side("PyTorch", twin.status, twin.reason, twin.outcomes);
  return out.empty() ? "ok" : out;
}

std::string peak_of_cell(const RowSummary& row, TableNotes& notes) {
  if (row.peak_source.empty()) return "-";
  const std::string mark = notes.mark(row.peak_source);
  if (!std::isfinite(row.row_peak_flops_per_s)) return "none " + mark;
  if (row.peak_cores > 0) {
    return std::to_string(row.peak_cores) + (row.peak_cores == 1 ? " core, " : " cores, ") + row.peak_unit + " " + mark;
  }
  return std::to_string(std::max<int64_t>(1, row.devices)) + " x " + row.peak_unit + " " + mark;
}

std::string utilisation_cell(const RowSummary& row) {
  const std::string percent = format_percent(row.flops_utilisation);
  return row.peak_upper_bound && std::isfinite(row.flops_utilisation) ? "≥ " + percent : percent;
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
