#include "reports/report_sections.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "harness/base/units.hpp"
#include "reports/html_parts.hpp"
#include "reports/projection.hpp"
#include "reports/reporter.hpp"
#include "reports/straggler_judgement.hpp"
#include "reports/tuning_advice.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// What a mode's rows ran, each as the row's first repetition that ran ok recorded it: `value` of
// each, in words, "1000" where all agree, else each value with its rows ("10 (single), 1000
// (ddp-2gpu)"); empty where no row of the mode ran.
template <typename Value>
std::string across_rows(const ResultDocument& doc, const std::vector<RowSummary>& rows, const std::string& mode,
                        Value value) {
  std::vector<std::pair<std::string, std::string>> groups;  // value, its rows
  for (const auto& row : rows) {
    if (row.mode != mode) continue;
    const auto ran = std::find_if(doc.runs.begin(), doc.runs.end(), [&](const RunResult& r) {
      return r.name == row.name && r.mode == mode && r.status == RunStatus::ok;
    });
    if (ran == doc.runs.end()) continue;
    const std::string text = value(*ran);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == text; });
    if (it == groups.end()) it = groups.insert(groups.end(), {text, ""});
    it->second += (it->second.empty() ? "" : ", ") + row.name;
  }
  if (groups.size() == 1) return groups.front().first;
  std::string out;
  for (const auto& [text, names] : groups) out += (out.empty() ? "" : ", ") + text + " (" + names + ")";
  return out;
}

std::string config_text(const RunResult& run, const char* key) {
  if (!run.config.is_object() || !run.config.contains(key)) return "unknown";
  const nlohmann::json& value = run.config.at(key);
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// A mode in words: what it promises, then what its rows ran, from their records (never the plan):
// the head, the loader and the global batch. Controlled mode promises one global batch; rows that
// ran others are named.
std::string mode_description(const ResultDocument& doc, const std::vector<RowSummary>& rows, const std::string& mode) {
  const std::string heads = across_rows(doc, rows, mode, [](const RunResult& r) { return config_text(r, "num-classes"); });
  const std::string loaders = across_rows(doc, rows, mode, [](const RunResult& r) { return config_text(r, "loader"); });
  const std::string batches =
      across_rows(doc, rows, mode, [](const RunResult& r) { return format_rate(static_cast<double>(r.global_batch)); });
  const std::string ran = heads.empty() ? std::string()
                                        : " Its rows ran: a head of " + heads + " classes; the " + loaders +
                                              " loader; global batch " + batches + ".";
  if (mode == "faithful") {
    return "The tutorial's quirks kept: its batch per process (so more processes mean a larger global batch and fewer "
           "steps), its loader, and its timing (wall time around the epoch, loader start-up included)." + ran;
  }
  if (mode == "controlled") {
    const bool one_batch = batches.find('(') == std::string::npos;
    return std::string("Every row does the same work: one global batch split over its processes, timed as "
                       "steady-state throughput after warm-up.") + ran +
           (one_batch || heads.empty() ? "" : " These rows did not all train one global batch: their times are not the same work.");
  }
  return "Rows as given." + ran;
}

// Columns from their headers: the first `left` of them left-aligned (names), the rest right
// (numbers), and those named in `words` left as well.
std::vector<Column> columns(const std::vector<std::string>& headers, std::size_t left,
                            const std::vector<std::string>& words = {}) {
  std::vector<Column> out;
  for (const auto& header : headers) {
    const bool is_word = out.size() < left || std::find(words.begin(), words.end(), header) != words.end();
    out.push_back({header, is_word ? Align::left : Align::right});
  }
  return out;
}

template <typename Predicate>
bool any_row(const std::vector<RowSummary>& rows, Predicate predicate) {
  return std::any_of(rows.begin(), rows.end(), predicate);
}

std::vector<Cell> main_table_row(const RowSummary& r, TableNotes& reasons) {
  // Figures over fewer repetitions than planned say how many; the repetitions' range stands beside
  // their median in both formats (the page once left it out).
  Cell this_run = value_cell(CellFormat::seconds, r.train_time_s,
                             r.has_figures() && r.repetitions < r.planned_repetitions
                                 ? " (" + std::to_string(r.repetitions) + " of " + std::to_string(r.planned_repetitions) + ")"
                                 : "");
  if (r.repetitions > 1) {
    this_run.suffix += " (" + format_fixed(r.train_time_min_s, 2) + "–" + format_fixed(r.train_time_max_s, 2) + ")";
  }
  return {text_cell(r.name),
          value_cell(CellFormat::integer, static_cast<double>(r.devices), r.placement.empty() ? "" : " (" + r.placement + ")"),
          value_cell(CellFormat::seconds, r.tutorial_seconds),
          this_run,
          value_cell(CellFormat::ratio, r.speedup),
          value_cell(CellFormat::percent, r.scaling_efficiency),
          value_cell(CellFormat::rate, r.images_per_s),
          value_cell(CellFormat::rate, r.steady_images_per_s),
          value_cell(CellFormat::percent, r.test_accuracy),
          value_cell(CellFormat::bytes, static_cast<double>(r.peak_memory_bytes)),
          text_cell(repetitions_status_cell(r.status, r.reason, r.outcomes, reasons), r.unstable ? " (unstable)" : "")};
}

Section main_table_section(const ResultDocument& doc, const std::vector<RowSummary>& rows, const std::string& mode) {
  Section s;
  s.title = mode.empty() ? "rows" : mode + " mode";
  s.intro = mode_description(doc, rows, mode);
  s.html_place = 0;
  s.columns = columns({"row", "devices", "tutorial", "this run", "speed-up", "scaling efficiency", "images/s",
                       "steady images/s", "test accuracy", "peak memory", "status"},
                      1, {"status"});
  for (const auto& r : rows) {
    if (r.mode == mode) s.rows.push_back(main_table_row(r, s.notes));
  }
  return s;
}

std::vector<Cell> pytorch_row(const RowSummary& r, TableNotes& notes) {
  const auto& t = *r.pytorch;
  return {text_cell(r.name, compared_without_shown(t) ? " " + notes.mark(compared_without_note(r)) : ""),
          text_cell(r.mode),
          value_cell(CellFormat::seconds, t.ddpbench_train_time_s),
          value_cell(CellFormat::seconds, t.train_time_s),
          value_cell(CellFormat::ratio, r.vs_pytorch_train_time),
          value_cell(CellFormat::rate, t.ddpbench_steady_images_per_s),
          value_cell(CellFormat::rate, t.steady_images_per_s),
          value_cell(CellFormat::ratio, r.vs_pytorch_steady),
          text_cell(twin_status(t, notes))};
}

std::vector<Cell> phase_row(const RowSummary& r, bool replicating) {
  const PhaseSeconds& p = r.phase_s;
  std::vector<Cell> cells{text_cell(r.name), text_cell(r.mode), value_cell(CellFormat::seconds, p.data_s),
                          value_cell(CellFormat::seconds, p.forward_s)};
  if (replicating) cells.push_back(value_cell(CellFormat::seconds, p.replicate_s));
  for (const double v : {p.backward_s, p.hidden_comm_s(), p.comm_s, p.optimizer_s, p.total_s(), r.step_time_p50_s,
                         r.step_time_p90_s, r.step_time_max_s}) {
    cells.push_back(value_cell(CellFormat::seconds, v));
  }
  return cells;
}

std::vector<Cell> rank_row(const RowSummary& r, const RankTiming& rank) {
  return {text_cell(r.name), text_cell(r.mode),
          value_cell(CellFormat::integer, static_cast<double>(rank.rank),
                     rank.rank == r.slowest_rank
                         ? " (slowest, " + format_fixed(r.rank_spread, 2) + "x, " + r.straggler_cause + ")"
                         : ""),
          value_cell(CellFormat::seconds, rank.compute_s), value_cell(CellFormat::seconds, rank.data_s),
          value_cell(CellFormat::seconds, rank.wait_s), value_cell(CellFormat::seconds, rank.step_time_s.p50)};
}

std::vector<Cell> compute_row(const RowSummary& r, TableNotes& sources) {
  return {text_cell(r.name),
          text_cell(r.mode),
          text_cell(r.precision),
          value_cell(CellFormat::flop, r.train_flops_per_image),
          value_cell(CellFormat::flop_per_s, r.achieved_flops_per_s),
          value_cell(CellFormat::flop_per_s, r.row_peak_flops_per_s),
          text_cell(utilisation_cell(r)),
          text_cell(peak_of_cell(r, sources))};
}

// Rows traced with --trace-steps: their files, linked where a sweep put them (rows/MODE/ under
// its --out-dir, which the sweep says relative to this page), and what tracing cost.
std::vector<Cell> trace_row(const RunResult& r, const std::string& rows_href) {
  Cell files;
  for (const auto& file : r.trace.files) files.links.push_back({file, r.mode.empty() ? file : rows_href + "/" + r.mode + "/" + file});
  return {text_cell(r.name),
          text_cell(r.mode),
          text_cell(std::to_string(r.trace.first_step) + "-" + std::to_string(r.trace.last_step)),
          value_cell(CellFormat::seconds, r.trace.traced_step_time_s),
          value_cell(CellFormat::seconds, r.trace.untraced_step_time_s),
          value_cell(CellFormat::seconds, r.trace.profiler_switch_s),
          files};
}

// One note per text, naming every run it holds for: the CPU preset cuts every epoch alike.
std::vector<std::string> shared_run_notes(const ResultDocument& doc) {
  std::vector<std::pair<std::string, std::vector<std::string>>> shared;
  std::size_t first_runs = 0;
  const auto add = [&](const std::string& text, const RunResult& run) {
    auto it = std::find_if(shared.begin(), shared.end(), [&](const auto& n) { return n.first == text; });
    if (it == shared.end()) it = shared.insert(shared.end(), {text, {}});
    it->second.push_back(row_label(run.name, run.mode));
  };
  for (const auto& run : doc.runs) {
    if (run.repetition != 0 || run.status != RunStatus::ok) continue;
    ++first_runs;
    if (run.epoch_cut) add(epoch_cut_note(run, false), run);
    if (run.eval_cut) add(eval_cut_note(run), run);
    if (run.steps > 0 && run.steps <= run.warmup_steps) add(no_steady_steps(run), run);
    for (const auto& note : strategy_notes(run)) add(note, run);
  }
  std::vector<std::string> notes;
  for (const auto& [text, runs] : shared) {
    std::string who;
    if (runs.size() == first_runs && runs.size() > 1) {
      who = "every row and twin that ran";
    } else {
      for (const auto& label : runs) who += (who.empty() ? "" : ", ") + label;
    }
    notes.push_back(who + ": " + text);
  }
  return notes;
}

// A chart of the page's, drawn where the sweep has rows.
Section chart_section(const std::vector<RowSummary>& rows, std::string title, int place,
                      std::function<std::string()> chart) {
  Section s;
  s.title = std::move(title);
  s.in_markdown = false;
  s.in_html = !rows.empty();
  s.html_place = place;
  s.html_figure = std::move(chart);
  return s;
}

std::string projection_fabric(const ResultDocument& doc) {
  return doc.sweep ? doc.sweep->projection.value("fabric", std::string("measured")) : "measured";
}

// A section of sweep --project, about the fabric projected to; the page shows it where the
// sweep has rows.
Section fabric_section(const ResultDocument& doc, const std::vector<RowSummary>& rows, bool projected,
                       const std::string& title, std::string html_title, int place) {
  Section s;
  s.in_markdown = projected;
  s.in_html = projected && !rows.empty();
  if (!projected) return s;
  s.title = title + " (" + projection_fabric(doc) + ")";
  s.html_title = std::move(html_title);
  s.html_place = place;
  return s;
}

}  // namespace

std::string formatted(const Cell& c) {
  switch (c.format) {
    case CellFormat::text: return c.text;
    case CellFormat::integer: return std::to_string(static_cast<int64_t>(c.value));
    case CellFormat::seconds: return format_seconds(c.value);
    case CellFormat::rate: return format_rate(c.value);
    case CellFormat::percent: return format_percent(c.value);
    case CellFormat::bytes: return format_bytes(static_cast<int64_t>(c.value));
    case CellFormat::ratio: return std::isfinite(c.value) ? format_fixed(c.value, 2) + "x" : "-";
    case CellFormat::flop: return format_si(c.value, "FLOP");
    case CellFormat::flop_per_s: return format_si(c.value, "FLOP/s");
  }
  return c.text;
}

Cell text_cell(std::string text, std::string suffix) {
  Cell c;
  c.text = std::move(text);
  c.suffix = std::move(suffix);
  return c;
}

Cell value_cell(CellFormat format, double value, std::string suffix) {
  Cell c;
  c.format = format;
  c.value = value;
  c.suffix = std::move(suffix);
  return c;
}

std::string trace_note(const RunResult& r) {
  std::string files;
  for (const auto& file : r.trace.files) files += (files.empty() ? "" : ", ") + file;
  return "steps " + std::to_string(r.trace.first_step) + "-" + std::to_string(r.trace.last_step) +
         " traced with PyTorch's profiler and left out of the steady figures (traced step p50 " +
         format_seconds(r.trace.traced_step_time_s) + ", untraced " + format_seconds(r.trace.untraced_step_time_s) +
         "); traces beside the row's JSON: " + files + " (merge them with `ddpbench trace`)";
}

std::string epoch_cut_note(const RunResult& r, bool of_whole_epoch) {
  // steps counts every epoch's: 2 epochs of 4 read "cut to 8 steps".
  const int64_t per_epoch = r.epochs > 0 ? r.steps / r.epochs : r.steps;
  return std::string(r.epochs > 1 ? "each of " + std::to_string(r.epochs) + " epochs" : "epoch") + " cut to " +
         std::to_string(per_epoch) + (of_whole_epoch ? " of " + std::to_string(r.steps_per_epoch) : std::string()) +
         " steps (--max-steps)";
}

std::string eval_cut_note(const RunResult& r) {
  // The whole test set: CIFAR-10's 10,000, or the synthetic set's size as configured.
  int64_t test_images = 0;
  if (r.dataset == "cifar10") test_images = 10000;
  if (r.dataset == "synthetic" && r.config.is_object() && r.config.value("synthetic-test-images", json()).is_number_integer()) {
    test_images = r.config.at("synthetic-test-images").get<int64_t>();
  }
  const nlohmann::json batches = r.config.is_object() ? r.config.value("max-eval-batches", json()) : json();
  return "test accuracy over the first " + format_rate(static_cast<double>(r.eval_images)) +
         (test_images > 0 ? " of " + format_rate(static_cast<double>(test_images)) : std::string()) +
         " test images only (--max-eval-batches" + (batches.is_number_integer() ? " " + batches.dump() : std::string()) +
         ")";
}

std::string no_steady_steps(const RunResult& r) {
  return "no step after the warm-up (--warmup-steps " + std::to_string(r.warmup_steps) + " of its " +
         std::to_string(r.steps) + " steps): its steady figures and stragglers were not measured";
}

// What the row's implementation says about how it ran (strategy_details.notes), and what its
// phases say of it: a forward that re-made its replicas every step spent that on the host.
std::vector<std::string> strategy_notes(const RunResult& r) {
  std::vector<std::string> notes;
  const PhaseSeconds& p = r.mean_phase_s;
  if (p.replicate_s > 0 && p.total_s() > 0) {
    notes.push_back("forward re-made the replicas every step: " + format_seconds(p.replicate_s) + " of each " +
                    format_seconds(p.total_s()) + " step (" + format_percent(p.replicate_s / p.total_s()) +
                    ") cloned the module (LibTorch's data_parallel re-initialises every layer on the host, then "
                    "copies the weights in): the stock C++ API's cost, not the devices' speed");
  }
  if (!r.strategy_details.is_object() || !r.strategy_details.contains("notes")) return notes;
  for (const auto& note : r.strategy_details.at("notes")) {
    if (note.is_string()) notes.push_back(note.get<std::string>());
  }
  return notes;
}

std::vector<Section> main_table_sections(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  std::vector<Section> sections;
  for (const auto& mode : sweep_modes(rows)) sections.push_back(main_table_section(doc, rows, mode));
  return sections;
}

Section preset_changes_section(const ResultDocument& doc) {
  Section s;
  s.title = "the CPU preset's changes";
  s.html_title = "The CPU preset's changes";
  s.intro = "What the CPU preset changed in each row's configuration, as planned (each setting at most the preset's: "
            "it cuts, never raises what a row asked for); the command line's options are the row's own.";
  s.html_place = 0;
  // Rows with the same changes in one item, in the order first met.
  std::vector<std::pair<std::vector<std::string>, std::string>> groups;
  for (const SweepRowInfo& row : doc.sweep ? doc.sweep->rows : std::vector<SweepRowInfo>{}) {
    if (row.preset_changes.empty() || !row.reference_of.empty() || is_comparison_run(doc, row.name, row.mode)) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == row.preset_changes; });
    if (it == groups.end()) it = groups.insert(groups.end(), {row.preset_changes, ""});
    it->second += (it->second.empty() ? "" : ", ") + row_label(row.name, row.mode);
  }
  for (const auto& [changes, rows] : groups) {
    std::string item = rows + ": ";
    for (std::size_t i = 0; i < changes.size(); ++i) item += (i ? "; " : "") + changes[i];
    s.items.push_back(item);
  }
  s.in_markdown = s.in_html = !s.items.empty();
  return s;
}

Section side_by_side_section(const std::vector<RowSummary>& rows) {
  Section s;
  s.title = "side by side";
  const auto modes = sweep_modes(rows);
  s.in_markdown = std::find(modes.begin(), modes.end(), "faithful") != modes.end() &&
                  std::find(modes.begin(), modes.end(), "controlled") != modes.end();
  s.in_html = false;
  s.columns = columns({"row", "tutorial", "faithful", "controlled", "faithful images/s", "controlled steady images/s"}, 1);
  for (const auto& f : rows) {
    if (f.mode != "faithful") continue;
    const auto c = std::find_if(rows.begin(), rows.end(), [&](const RowSummary& x) {
      return x.name == f.name && x.mode == "controlled";
    });
    const bool has_c = c != rows.end();
    s.rows.push_back({text_cell(f.name), value_cell(CellFormat::seconds, f.tutorial_seconds),
                      value_cell(CellFormat::seconds, f.train_time_s),
                      has_c ? value_cell(CellFormat::seconds, c->train_time_s) : text_cell("-"),
                      value_cell(CellFormat::rate, f.images_per_s),
                      has_c ? value_cell(CellFormat::rate, c->steady_images_per_s) : text_cell("-")});
  }
  return s;
}

Section against_pytorch_section(const std::vector<RowSummary>& rows) {
  Section s;
  s.title = "ddpbench against PyTorch";
  s.intro =
      "Each row beside PyTorch's own implementation of it (torch-single, torch-dp, torch-ddp) on the same data, "
      "initial weights and clock. A ratio above 1.00x means ddpbench is faster.";
  s.html_intro =
      "Each row beside PyTorch's own implementation of it on the same data, initial weights and clock; a ratio above "
      "1.00x means ddpbench is faster.";
  s.in_markdown = s.in_html = any_row(rows, [](const RowSummary& r) { return r.pytorch.has_value(); });
  s.html_place = 5;
  s.columns = columns({"row", "mode", "ddpbench", "PyTorch", "time ratio", "ddpbench steady images/s",
                       "PyTorch steady images/s", "throughput ratio", "status"},
                      2, {"status"});
  for (const auto& r : rows) {
    if (r.pytorch) s.rows.push_back(pytorch_row(r, s.notes));
  }
  return s;
}

// The Markdown's table of each row's phases and step times; the page's chart of the phases.
Section phases_section(const std::vector<RowSummary>& rows) {
  Section s;
  // A row that re-makes its replicas in forward (LibTorch's data_parallel) shows that part.
  const bool replicating = any_row(rows, [](const RowSummary& r) { return r.phase_s.replicate_s > 0; });
  s.title = "where a step's time goes";
  s.html_title = "Where a step's time goes";
  s.intro = std::string(
                "Mean time per step after warm-up, by phase; \"hidden\" is the allreduce time that ran under backward "
                "(inside the backward column), \"exposed\" what backward left waiting. ") +
            (replicating ? "\"replicate\" is the part of forward spent cloning the module onto its replicas. " : "") +
            "Then the step-time distribution.";
  s.html_intro =
      "Mean time per step after warm-up, by phase. Communication hidden under backward ran while backward did "
      "(overlap); exposed communication is what backward left waiting.";
  s.in_markdown = any_row(rows, [](const RowSummary& r) { return r.phase_s.total_s() > 0; });
  s.in_html = !rows.empty();
  s.table_in_html = false;
  s.html_place = 7;
  s.html_figure = [&rows] { return phase_chart(rows); };
  std::vector<std::string> headers{"row", "mode", "data", "forward"};
  if (replicating) headers.emplace_back("replicate (in forward)");
  headers.insert(headers.end(), {"backward", "comm hidden in backward", "exposed comm", "optimizer", "step",
                                 "step p50", "step p90", "step max"});
  s.columns = columns(headers, 2);
  for (const auto& r : rows) {
    if (r.phase_s.total_s() > 0) s.rows.push_back(phase_row(r, replicating));
  }
  return s;
}

Section stragglers_section(const std::vector<RowSummary>& rows) {
  Section s;
  s.title = "stragglers";
  s.html_title = "Stragglers";
  s.intro = "A collective is a barrier: every rank's step takes as long as the slowest's, so the wall clock cannot "
            "say who held the others back. Each rank's own time per step (its compute and its loader's data: the "
            "step without waiting for the others) can: rows whose slowest rank takes more than " +
            format_percent(kStragglerSpread) + " longer than the fastest.";
  s.html_intro = "A collective is a barrier: every rank's step takes as long as the slowest's. Each rank's own time "
                 "per step (its compute and its loader's data: without waiting for the others) names the rank that "
                 "held the others back, in rows whose slowest rank takes more than " +
                 format_percent(kStragglerSpread) + " longer than the fastest.";
  s.in_markdown = s.in_html = any_row(rows, [](const RowSummary& r) { return r.has_straggler(); });
  s.html_place = 2;
  s.columns = columns({"row", "mode", "rank", "compute", "data", "wait", "step p50"}, 2);
  for (const auto& r : rows) {
    if (!r.has_straggler()) continue;
    for (const auto& rank : r.ranks) s.rows.push_back(rank_row(r, rank));
  }
  return s;
}

Section stragglers_not_judged_section(const ResultDocument& doc) {
  Section s;
  s.title = "stragglers not judged";
  s.html_title = "Stragglers not judged";
  s.html_place = 4;
  for (const auto& [label, why] : rows_without_straggler_verdict(doc.runs)) s.items.push_back(label + ": a straggler " + why);
  s.in_markdown = s.in_html = !s.items.empty();
  return s;
}

Section traces_section(const ResultDocument& doc) {
  Section s;
  s.title = "Traces";
  s.intro =
      "Steps traced with PyTorch's profiler (`--trace-steps`), left out of the steady figures: one Chrome trace per "
      "rank. `ddpbench trace ROW.json` merges a row's ranks on one clock for Perfetto or chrome://tracing; "
      "`scripts/trace-report ROW.json` breaks the steps down and runs Holistic Trace Analysis.";
  // The Markdown says the same in its notes, one line per traced run.
  s.in_markdown = false;
  s.in_html = std::any_of(doc.runs.begin(), doc.runs.end(), [](const RunResult& r) { return r.trace.traced(); });
  s.html_place = 3;
  s.columns = columns({"row", "mode", "steps", "traced step p50", "untraced step p50", "profiler start and stop", "files"},
                      2, {"files"});
  const std::string rows_href = doc.sweep ? doc.sweep->rows_href : "rows";
  for (const auto& r : doc.runs) {
    if (r.trace.traced()) s.rows.push_back(trace_row(r, rows_href));
  }
  return s;
}

Section compute_section(const std::vector<RowSummary>& rows) {
  Section s;
  s.title = "compute";
  s.html_title = "Compute";
  s.intro = kComputeTableIntro;
  s.in_markdown = s.in_html = any_row(rows, [](const RowSummary& r) { return std::isfinite(r.achieved_flops_per_s); });
  s.html_place = 1;
  s.columns = columns({"row", "mode", "precision", "FLOPs per image", "achieved", "peak", "utilisation", "peak of"}, 3,
                      {"peak of"});
  for (const auto& r : rows) {
    if (std::isfinite(r.achieved_flops_per_s)) s.rows.push_back(compute_row(r, s.notes));
  }
  return s;
}

Section differences_section(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  Section s;
  s.title = "how each row differs from the baseline row (" + (doc.sweep ? doc.sweep->baseline_row : "") + ")";
  for (const auto& r : rows) {
    if (r.differences.empty()) continue;
    std::string item = r.name + " (" + r.mode + "): ";
    for (std::size_t i = 0; i < r.differences.size(); ++i) item += (i ? "; " : "") + r.differences[i];
    s.items.push_back(item);
  }
  s.html_title = "How each row differs from the baseline row (" + (doc.sweep ? doc.sweep->baseline_row : "") + ")";
  s.in_markdown = s.in_html = !s.items.empty();
  return s;
}

Section notes_section(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  Section s;
  s.title = "notes";
  for (const auto& r : rows) {
    if (!r.has_figures() || !r.unstable) continue;
    s.items.push_back(r.name + " (" + r.mode + "): unstable: " + std::to_string(r.repetitions) + " repetitions from " +
                      format_seconds(r.train_time_min_s) + " to " + format_seconds(r.train_time_max_s) +
                      ", wider than " + format_percent(kUnstableRelativeSpread) + " of the median");
  }
  for (auto& note : shared_run_notes(doc)) s.items.push_back(std::move(note));
  for (const auto& run : doc.runs) {
    if (!run.trace.traced()) continue;
    s.items.push_back(row_label(run.name, run.mode) + " repetition " + std::to_string(run.repetition) + ": " +
                      trace_note(run));
  }
  s.in_markdown = s.in_html = !s.items.empty();
  s.html_title = "Notes";
  return s;
}

Section epoch_time_section(const std::vector<RowSummary>& rows) {
  return chart_section(rows, "Epoch time per row", 6, [&rows] { return time_chart(rows); });
}

Section scaling_section(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  Section s = chart_section(rows, "Scaling against the ideal", 8, [&doc, &rows] {
    return scaling_chart(rows, doc.sweep ? doc.sweep->baseline_row : rows.front().name);
  });
  s.intro = "Each series against its own one-device baseline, so the tutorial's GPUs and this machine share the axes.";
  return s;
}

Section step_time_section(const std::vector<RowSummary>& rows) {
  return chart_section(rows, "Step-time distribution", 9, [&rows] { return step_chart(rows); });
}

Section pytorch_ratio_section(const std::vector<RowSummary>& rows) {
  Section s = chart_section(rows, "ddpbench against PyTorch, per row", 10, [&rows] { return pytorch_chart(rows); });
  s.in_html = s.in_html && any_row(rows, [](const RowSummary& r) { return r.pytorch.has_value(); });
  return s;
}

Section projection_section(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  const auto projections = std::make_shared<const std::optional<std::vector<RowProjection>>>(sweep_projections(doc));
  Section s = fabric_section(doc, rows, projections->has_value(), "projected scaling", "Projected scaling", 11);
  if (!s.in_markdown) return s;
  const std::string fabric = projection_fabric(doc);
  s.intro = "Each DDP row projected past this machine: its buckets' allreduces costed by the ring model on the "
            "fabric, one after another from when backward made each ready, as measured here "
            "([docs/reports-and-gate.md](docs/reports-and-gate.md)). Left out: compute slowed by communication, "
            "stragglers, topologies beyond two levels.";
  s.html_intro = "Each DDP row projected past this machine to " + fabric +
                 ": its buckets' allreduces costed by the ring model, one after another from when backward made each "
                 "ready, as measured here. Left out: compute slowed by communication, stragglers, topologies beyond "
                 "two levels.";
  s.markdown_text = markdown_projection(**projections);
  s.html_figure = [projections, &rows] { return projection_figure(**projections, rows); };
  return s;
}

Section advice_section(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  const auto advice = std::make_shared<const std::optional<std::vector<RowAdvice>>>(sweep_advice(doc));
  Section s = fabric_section(doc, rows, advice->has_value(), "tuning advice", "Tuning advice", 12);
  if (!s.in_markdown) return s;
  s.intro = "The DDP settings to use at 8, 64 and 512 ranks on that fabric, from each DDP row's gradients as "
            "measured here: bucket caps 1-100 MB, compression hooks and overlap, each laid out as the Reducer lays "
            "it out and projected as above (`ddpbench advise results.json` gives every setting; "
            "[docs/reports-and-gate.md](docs/reports-and-gate.md)).";
  s.html_intro = std::string("The DDP settings to use at other rank counts on the projection's fabric, from each DDP "
                             "row's gradients as measured here (bucket caps 1-100 MB, fp16 and bf16 compression, "
                             "overlap); settings within the model's own error of the fastest are a tie. Not modelled: ") +
                 kAdviceLeavesOut + ".";
  s.markdown_text = markdown_advice(**advice, false);
  s.html_figure = [advice] { return advice_table(**advice); };
  return s;
}

std::vector<Section> report_sections(const ResultDocument& doc, const std::vector<RowSummary>& rows) {
  std::vector<Section> all = main_table_sections(doc, rows);
  std::vector<Section> more{preset_changes_section(doc), side_by_side_section(rows), against_pytorch_section(rows), phases_section(rows),
                     stragglers_section(rows), stragglers_not_judged_section(doc), traces_section(doc),
                     projection_section(doc, rows), advice_section(doc, rows), compute_section(rows),
                     differences_section(doc, rows), notes_section(doc, rows), epoch_time_section(rows),
                     scaling_section(doc, rows), step_time_section(rows), pytorch_ratio_section(rows)};
  for (Section& s : more) {
    if (s.in_markdown || s.in_html) all.push_back(std::move(s));
  }
  return all;
}

}  // namespace ddpbench
