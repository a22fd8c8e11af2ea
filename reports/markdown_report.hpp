#pragma once
// Markdown tables of result rows, as `ddpbench run` prints them.
#include <string>
#include <vector>

#include "reports/run_result.hpp"

namespace ddpbench {

/// Header, separator and one row per result; then a note for each row that was cut,
/// skipped or failed.
std::string markdown_runs_table(const std::vector<RunResult>& runs);

}  // namespace ddpbench
