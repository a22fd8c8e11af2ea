#include "harness/control/project_command.hpp"

#include <algorithm>
#include <iostream>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/output_rule.hpp"
#include "harness/base/text_file.hpp"
#include "reports/result_file.hpp"
#include "reports/result_proof.hpp"
#include "harness/control/run_options.hpp"

namespace ddpbench {

ProjectionOptions projection_options(const ProjectCommand& c) {
  ProjectionOptions o;
  o.ranks = c.ranks;
  o.ranks_per_node = c.ranks_per_node;
  o.fabric = c.fabric;
  if (c.intra_node_gbps > 0) o.intra_node_gbps = c.intra_node_gbps;
  if (c.inter_node_gbps > 0) o.inter_node_gbps = c.inter_node_gbps;
  if (c.latency_us >= 0) o.latency_us = c.latency_us;
  if (c.nics_per_node > 0) o.nics_per_node = c.nics_per_node;
  if (!c.calibrate.empty()) {
    const std::string text = read_text_file(c.calibrate, "--calibrate: cannot read");
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw InputError("--calibrate: '" + c.calibrate + "' is not valid JSON: " + e.what());
    }
    o.calibration = link_from_microbenchmark(doc, c.calibrate);
  }
  return o;
}

void check_projection_files(const ProjectCommand& command, const ProjectionFiles& files) {
  if (command.out_dir.empty()) return;
  const std::filesystem::path dir(command.out_dir);
  const std::string stem = files.stem;
  const auto json_of_kind = [key = std::string(files.key)](std::string_view text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    return j.is_object() && j.contains("source") && j.contains("options") && j.contains("calibration") &&
           j.contains(key);
  };
  const auto markdown_of_kind = [marker = std::string(files.marker)](std::string_view text) {
    return text.starts_with(marker);
  };
  check_command_files({{"RESULTS", command.results}, {"--calibrate", command.calibrate}},
                      {{"--out-dir's " + stem + ".json", dir / (stem + ".json"), "the " + stem + " JSON it wrote",
                        own_kind_by_text(json_of_kind)},
                       {"--out-dir's " + stem + ".md", dir / (stem + ".md"), "the " + stem + " Markdown it wrote",
                        own_kind_by_text(markdown_of_kind)}});
}

std::string projection_heading(const ProjectCommand& command, const ProjectionFiles& files) {
  return files.heading + command.results + "\n";
}

void write_projection_outputs(const ProjectCommand& command, const ProjectionOptions& options,
                              const ProjectionFiles& files, nlohmann::json body, const std::string& markdown) {
  const std::filesystem::path dir(command.out_dir);
  // Only now, every input read and proven: a bad one leaves no folder made for the outputs.
  require_writable(dir / (std::string(files.stem) + ".json"), "--out-dir");
  const nlohmann::json out = {{"source", command.results},
                              {"options", projection_options_json(options)},
                              {"calibration", options.calibration ? nlohmann::json(options.calibration->source)
                                                                  : nlohmann::json(nullptr)},
                              {files.key, std::move(body)}};
  write_file_atomically(dir / (std::string(files.stem) + ".json"), out.dump(2) + "\n");
  write_file_atomically(dir / (std::string(files.stem) + ".md"), files.marker + markdown);
}

int project_command(const ProjectCommand& command) {
  check_projection_files(command, kProjectionFiles);
  const ProjectionOptions options = projection_options(command);
  const ProvenResults proven =
      read_results_here(command.results, "the results");
  const ResultDocument& doc = proven.document();
  const std::vector<RowProjection> projections = project_document(doc, options);
  if (projections.empty()) throw InputError(command.results + " has no DDP row to project");
  // As advise: a file none of whose rows the model can read projects nothing (exit 2, each row's
  // reason), never an exit 0 over a table of dashes.
  if (std::all_of(projections.begin(), projections.end(), [](const RowProjection& p) { return !p.not_projected.empty(); })) {
    std::string why;
    for (const RowProjection& p : projections) why += "; " + row_label(p.row, p.mode) + ": " + p.not_projected;
    throw InputError(command.results + " has no DDP row to project" + why);
  }
  const std::string md = projection_heading(command, kProjectionFiles) + markdown_projection(projections);
  if (!command.out_dir.empty())
    write_projection_outputs(command, options, kProjectionFiles, projection_json(projections), md);
  std::cout << md << std::flush;
  // A model that misses the step it measured projects nothing worth acting on.
  const auto off = std::count_if(projections.begin(), projections.end(), [](const auto& p) { return model_off(p); });
  if (off > 0 && !command.force) {
    std::cerr << "ddpbench project: " << off << " row(s) whose model is more than "
              << static_cast<int>(100 * kModelTolerance)
              << " % off its own measured step, or could not be checked there (above); --force exits 0 anyway\n";
    return 1;
  }
  return 0;
}

}  // namespace ddpbench
