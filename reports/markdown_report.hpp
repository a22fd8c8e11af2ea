#pragma once
// Markdown tables of result rows, as `ddpbench run` prints them.
#include <string>
#include <vector>

#include "reports/run_result.hpp"

namespace ddpbench {

/// Free text as one Markdown table cell: pipes escaped, newlines as spaces.
std::string markdown_table_cell(const std::string& text);

/// Header, separator and one row per result; then a note for each row that was cut,
/// skipped or failed.
std::string markdown_runs_table(const std::vector<RunResult>& runs);

}  // namespace ddpbench
