#include "reports/markdown_report.hpp"

#include <sstream>

#include "reports/units.hpp"

namespace ddpbench {
namespace {

// A cell must not break the table: pipes and newlines in free text are escaped.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string markdown_runs_table(const std::vector<RunResult>& runs) {
  std::ostringstream md;
  md << "| row | strategy | processes | device | data | status | train time | images/s"
        " | steady images/s | step p50 | step p90 | test accuracy | final loss | peak memory |\n"
     << "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : runs) {
    md << "| " << cell(r.name) << " | " << cell(r.strategy) << " | " << r.world_size << " | "
       << cell(r.device) << " | " << cell(r.dataset) << " | " << status_name(r.status) << " | "
       << format_seconds(r.train_time_s) << " | " << format_rate(r.images_per_s) << " | "
       << format_rate(r.steady_images_per_s) << " | " << format_seconds(r.step_time_s.p50) << " | "
       << format_seconds(r.step_time_s.p90) << " | " << format_percent(r.test_accuracy) << " | "
       << format_fixed(r.final_loss, 3) << " | " << format_bytes(r.peak_memory_bytes) << " |\n";
  }
  std::ostringstream notes;
  for (const auto& r : runs) {
    if (r.status != RunStatus::ok) {
      notes << "- " << cell(r.name) << ": " << status_name(r.status) << ": " << cell(r.reason) << "\n";
      continue;
    }
    if (r.epoch_cut) {
      notes << "- " << cell(r.name) << ": epoch cut to " << r.steps << " of " << r.steps_per_epoch * r.epochs
            << " steps (--max-steps)\n";
    }
    if (r.eval_cut) {
      notes << "- " << cell(r.name) << ": accuracy over the first " << r.eval_images
            << " test images only (--max-eval-batches)\n";
    }
  }
  if (!notes.str().empty()) md << "\n" << notes.str();
  return md.str();
}

}  // namespace ddpbench
