#include "harness/control/project_command.hpp"

#include <algorithm>
#include <iostream>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
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

void write_projection_outputs(const ProjectCommand& command, const ProjectionOptions& options, const std::string& stem,
                              const char* key, nlohmann::json body, const std::string& markdown) {
  const std::filesystem::path dir(command.out_dir);
  const nlohmann::json out = {{"source", command.results},
                              {"options", projection_options_json(options)},
                              {"calibration", options.calibration ? nlohmann::json(options.calibration->source)
                                                                  : nlohmann::json(nullptr)},
                              {key, std::move(body)}};
  write_file_atomically(dir / (stem + ".json"), out.dump(2) + "\n");
  write_file_atomically(dir / (stem + ".md"), markdown);
}

int project_command(const ProjectCommand& command) {
  const ProjectionOptions options = projection_options(command);
  if (!command.out_dir.empty()) require_writable(std::filesystem::path(command.out_dir) / "projection.json", "--out-dir");
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
  const std::string md = "# ddpbench projection of " + command.results + "\n" + markdown_projection(projections);
  if (!command.out_dir.empty()) {
    write_projection_outputs(command, options, "projection", "projections", projection_json(projections), md);
  }
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
