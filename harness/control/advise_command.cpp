#include "harness/control/advise_command.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/control/project_command.hpp"
#include "reports/result_file.hpp"
#include "reports/result_proof.hpp"
#include "harness/control/run_options.hpp"
#include "reports/tuning_advice.hpp"

namespace ddpbench {

namespace {

// The grid the command asks for: the default one's values where it names none.
std::vector<TuningSetting> tuning_grid(const AdviseCommand& c) {
  const TuningGridValues all;
  TuningGridValues chosen;
  chosen.bucket_mb = c.bucket_mb.empty() ? all.bucket_mb : c.bucket_mb;
  chosen.comm_hooks = c.comm_hooks.empty() ? all.comm_hooks : c.comm_hooks;
  if (!c.overlap.empty()) {
    chosen.overlap.clear();
    for (const std::string& o : c.overlap) chosen.overlap.push_back(o == "on");
  }
  return tuning_grid(chosen);
}

}  // namespace

int advise_command(const AdviseCommand& command) {
  check_projection_files(command, kAdviceFiles);
  const ProjectionOptions options = projection_options(command);
  const ProvenResults proven =
      read_results_here(command.results, "the results");
  const ResultDocument& doc = proven.document();
  const std::vector<RowAdvice> advice = advise_document(doc, options, tuning_grid(command));
  if (advice.empty()) throw InputError(command.results + " has no DDP row to advise on");
  if (std::all_of(advice.begin(), advice.end(), [](const RowAdvice& a) { return !a.not_advised.empty(); })) {
    std::string why;
    for (const RowAdvice& a : advice) why += "; " + row_label(a.row, a.mode) + ": " + a.not_advised;
    throw InputError(command.results + " has no DDP row to advise on" + why);
  }
  const std::string md = projection_heading(command, kAdviceFiles) + markdown_advice(advice, true);
  if (!command.out_dir.empty()) write_projection_outputs(command, options, kAdviceFiles, advice_json(advice), md);
  std::cout << md << std::flush;
  // Advice from a model that misses the step it measured is not worth acting on.
  const auto off = std::count_if(advice.begin(), advice.end(), [](const RowAdvice& a) { return advice_off(a); });
  if (off > 0 && !command.force) {
    std::cerr << "ddpbench advise: " << off << " row(s) whose model is more than "
              << static_cast<int>(100 * kModelTolerance)
              << " % off its own measured step, or could not be checked there (above); --force exits 0 anyway\n";
    return 1;
  }
  return 0;
}

}  // namespace ddpbench
