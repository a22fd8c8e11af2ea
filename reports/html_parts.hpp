#pragma once
// What only the HTML page draws: escaping for well-formed XHTML, its tables' frame, and its
// charts as inline SVG (each with a title, axis labels and units; series told apart by shape
// or pattern as well as colour, so they read in grey), the parts report sections carry.
#include <string>
#include <vector>

#include "reports/projection.hpp"
#include "reports/sweep_summary.hpp"
#include "reports/table_notes.hpp"
#include "reports/tuning_advice.hpp"

namespace ddpbench {

/// `text` with &, <, > and " as entities.
std::string html_escape(const std::string& text);
/// A table's frame: it scrolls sideways in its own box; the notes its cells marked follow it.
std::string html_table_open();
std::string html_table_close(const TableNotes& notes);

/// Per row, the tutorial's epoch time beside this run's in each mode.
std::string time_chart(const std::vector<RowSummary>& rows);
/// Where a step's time goes: each row's phases as stacked bars.
std::string phase_chart(const std::vector<RowSummary>& rows);
/// Speed-up and scaling efficiency against device count, each series against its own
/// one-device baseline (`baseline`, the tutorial's among them), beside the ideal.
std::string scaling_chart(const std::vector<RowSummary>& rows, const std::string& baseline);
/// Each row's step-time p50, p90 and max after warm-up, and its warm-up steps.
std::string step_chart(const std::vector<RowSummary>& rows);
/// Each row's epoch-time and steady-throughput ratios to its PyTorch twin, beside parity.
std::string pytorch_chart(const std::vector<RowSummary>& rows);
/// The advised DDP settings per row and rank count, as a table (ddpbench advise gives every setting).
std::string advice_table(const std::vector<RowAdvice>& advice);
/// Images/s against rank count as projected, beside the rows measured here; then each row not
/// projected, and why.
std::string projection_figure(const std::vector<RowProjection>& projections, const std::vector<RowSummary>& rows);

}  // namespace ddpbench
