#include "reports/markdown_report.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness/base/units.hpp"
#include "reports/projection.hpp"
#include "reports/reporter.hpp"
#include "reports/straggler_judgement.hpp"
#include "reports/table_notes.hpp"
#include "reports/tuning_advice.hpp"

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

// The notes a table's cells marked, as a list under it.
std::string notes_under(const TableNotes& notes) {
  std::string out;
  for (std::size_t i = 0; i < notes.texts().size(); ++i) {
    out += (i == 0 ? "\n" : "") + std::string("- [") + std::to_string(i + 1) + "] " + cell(notes.texts()[i]) + "\n";
  }
  return out;
}

// A row whose every step was warm-up measured no steady figure, and so judged no straggler.
// A traced row: which steps, where their traces are, and what the profiler cost them.
std::string trace_note(const RunResult& r) {
  std::string files;
  for (const auto& file : r.trace.files) files += (files.empty() ? "" : ", ") + file;
  return "steps " + std::to_string(r.trace.first_step) + "-" + std::to_string(r.trace.last_step) +
         " traced with PyTorch's profiler and left out of the steady figures (traced step p50 " +
         format_seconds(r.trace.traced_step_time_s) + ", untraced " + format_seconds(r.trace.untraced_step_time_s) +
         "); traces beside the row's JSON: " + files + " (merge them with `ddpbench trace`)";
}

std::string no_steady_steps(const RunResult& r) {
  return "no step after the warm-up (--warmup-steps " + std::to_string(r.warmup_steps) + " of its " +
         std::to_string(r.steps) + " steps): its steady figures and stragglers were not measured";
}

// The straggler in words: which rank, how much longer than the fastest, and what held it.
std::string straggler_words(const RunResult& r) {
  std::string words = "rank " + std::to_string(r.slowest_rank) + " takes " + format_fixed(r.rank_spread, 2) +
                      "x the fastest rank's own time per step (compute and data), held by its " +
                      (r.straggler_cause == "data" ? std::string("loader") : std::string("own compute"));
  if (r.straggler_of_steps > 0) {
    words += ", the slowest in " + std::to_string(r.straggler_steps) + " of " + std::to_string(r.straggler_of_steps) +
             " steady steps";
  }
  return words + "; the others wait for it";
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

}  // namespace

std::string markdown_runs_table(const std::vector<RunResult>& runs) {
  std::ostringstream md;
  md << "| row | strategy | processes | device | data | status | train time | images/s"
        " | steady images/s | step p50 | step p90 | test accuracy | final loss | peak memory |\n"
     << "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  TableNotes reasons;
  for (const auto& r : runs) {
    const std::string placement = placement_text(r);
    md << "| " << cell(r.name) << " | " << cell(r.strategy) << " | " << r.world_size
       << (placement.empty() ? "" : " (" + placement + ")") << " | "
       << cell(r.device) << " | " << cell(r.dataset) << " | " << status_cell(r.status, r.reason, reasons) << " | "
       << format_seconds(r.train_time_s) << " | " << format_rate(r.images_per_s) << " | "
       << format_rate(r.steady_images_per_s) << " | " << format_seconds(r.step_time_s.p50) << " | "
       << format_seconds(r.step_time_s.p90) << " | " << format_percent(r.test_accuracy) << " | "
       << format_fixed(r.final_loss, 3) << " | " << format_bytes(r.peak_memory_bytes) << " |\n";
  }
  md << notes_under(reasons);
  std::ostringstream notes;
  for (const auto& r : runs) {
    if (r.status != RunStatus::ok) continue;
    if (r.epoch_cut) {
      notes << "- " << cell(r.name) << ": epoch cut to " << r.steps << " of " << r.steps_per_epoch * r.epochs
            << " steps (--max-steps)\n";
    }
    if (r.eval_cut) {
      notes << "- " << cell(r.name) << ": accuracy over the first " << r.eval_images
            << " test images only (--max-eval-batches)\n";
    }
    if (r.steps > 0 && r.steps <= r.warmup_steps) notes << "- " << cell(r.name) << ": " << no_steady_steps(r) << "\n";
    if (r.straggler) {
      notes << "- " << cell(r.name) << ": straggler: " << straggler_words(r) << "\n";
    } else if (const std::string why = straggler_not_judged(r); !why.empty()) {
      notes << "- " << cell(r.name) << ": straggler: " << why << "\n";
    }
    for (const auto& note : strategy_notes(r)) notes << "- " << cell(r.name) << ": " << cell(note) << "\n";
    if (r.trace.traced()) notes << "- " << cell(r.name) << ": " << cell(trace_note(r)) << "\n";
  }
  if (!notes.str().empty()) md << "\n" << notes.str();
  return md.str();
}

namespace {

const char* mode_description(const std::string& mode) {
  if (mode == "faithful") {
    return "the tutorial's quirks kept: its 1000-class head, its batch per process (so more processes mean a "
           "larger global batch and fewer steps), the host loader, and its timing (wall time around the epoch, "
           "loader start-up included)";
  }
  if (mode == "controlled") {
    return "every row does the same work: one global batch split over its processes, a 10-class head, the "
           "device-resident loader, and steady-state throughput after warm-up";
  }
  return "rows as given";
}

std::string seconds_with_spread(const RowSummary& r) {
  std::string text = format_seconds(r.train_time_s);
  if (r.repetitions > 1) {
    text += " (" + format_fixed(r.train_time_min_s, 2) + "–" + format_fixed(r.train_time_max_s, 2) + ")";
  }
  return text;
}

std::string ratio(double value) { return std::isfinite(value) ? format_fixed(value, 2) + "x" : "-"; }

std::string environment_line(const Environment& e) {
  std::string hw;
  if (e.gpus.empty()) {
    hw = "no GPU; CPU " + e.cpu_model + " (" + std::to_string(e.cpu_cores) + " cores)";
  } else {
    hw = std::to_string(e.gpus.size()) + " x " + e.gpus.front().name;
    if (!e.driver_version.empty()) hw += ", driver " + e.driver_version;
  }
  std::string line = hw + "; CUDA " + (e.cuda_runtime_version.empty() ? "-" : e.cuda_runtime_version) + ", cuDNN " +
                     (e.cudnn_version.empty() ? "-" : e.cudnn_version) + ", NCCL " +
                     (e.nccl_version.empty() ? "-" : e.nccl_version) + ", LibTorch " + e.libtorch_version +
                     "; host " + e.host + "; ddpbench " + e.git_revision;
  return line;
}

class MarkdownReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& doc, const std::vector<RowSummary>& rows) const override {
    if (!doc.sweep) return markdown_runs_table(doc.runs);
    std::ostringstream md;
    md << "# ddpbench: " << doc.sweep->preset << "\n\n";
    if (!doc.sweep->note.empty()) md << "**" << cell(doc.sweep->note) << "**\n\n";
    md << environment_line(doc.environment) << "\n";
    if (!rows.empty() && !rows.front().dataset.empty()) md << "\nData: " << rows.front().dataset << ".\n";

    const auto modes = sweep_modes(rows);
    for (const auto& mode : modes) {
      md << "\n## " << (mode.empty() ? "rows" : mode + " mode") << "\n\n" << mode_description(mode) << ".\n\n"
         << "| row | GPUs | tutorial | this run | speed-up | scaling efficiency | images/s | steady images/s"
            " | test accuracy | peak memory | status |\n"
         << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
      TableNotes reasons;
      for (const auto& r : rows) {
        if (r.mode != mode) continue;
        md << "| " << cell(r.name) << " | " << r.devices << (r.placement.empty() ? "" : " (" + r.placement + ")")
           << " | " << format_seconds(r.tutorial_seconds) << " | "
           << seconds_with_spread(r) << " | " << ratio(r.speedup) << " | " << format_percent(r.scaling_efficiency)
           << " | " << format_rate(r.images_per_s) << " | " << format_rate(r.steady_images_per_s) << " | "
           << format_percent(r.test_accuracy) << " | " << format_bytes(r.peak_memory_bytes) << " | "
           << status_cell(r.status, r.reason, reasons) << (r.unstable ? " (unstable)" : "") << " |\n";
      }
      md << notes_under(reasons);
    }

    const bool both = std::find(modes.begin(), modes.end(), "faithful") != modes.end() &&
                      std::find(modes.begin(), modes.end(), "controlled") != modes.end();
    if (both) {
      md << "\n## side by side\n\n"
         << "| row | tutorial | faithful | controlled | faithful images/s | controlled steady images/s |\n"
         << "| --- | ---: | ---: | ---: | ---: | ---: |\n";
      for (const auto& f : rows) {
        if (f.mode != "faithful") continue;
        const auto c = std::find_if(rows.begin(), rows.end(), [&](const RowSummary& x) {
          return x.name == f.name && x.mode == "controlled";
        });
        const bool has_c = c != rows.end();
        md << "| " << cell(f.name) << " | " << format_seconds(f.tutorial_seconds) << " | " << format_seconds(f.train_time_s)
           << " | " << (has_c ? format_seconds(c->train_time_s) : "-") << " | " << format_rate(f.images_per_s) << " | "
           << (has_c ? format_rate(c->steady_images_per_s) : "-") << " |\n";
      }
    }

    if (std::any_of(rows.begin(), rows.end(), [](const RowSummary& r) { return r.pytorch.has_value(); })) {
      md << "\n## ddpbench against PyTorch\n\n"
         << "Each row beside PyTorch's own implementation of it (torch-single, torch-dp, torch-ddp) on the same "
            "data, initial weights and clock. A ratio above 1.00x means ddpbench is faster.\n\n"
         << "| row | mode | ddpbench | PyTorch | time ratio | ddpbench steady images/s | PyTorch steady images/s"
            " | throughput ratio | status |\n"
         << "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
      TableNotes notes;
      for (const auto& r : rows) {
        if (!r.pytorch) continue;
        const auto& t = *r.pytorch;
        md << "| " << cell(r.name) << (compared_without_shown(t) ? " " + notes.mark(compared_without_note(r)) : "")
           << " | " << cell(r.mode) << " | " << format_seconds(t.ddpbench_train_time_s) << " | "
           << format_seconds(t.train_time_s) << " | " << ratio(r.vs_pytorch_train_time) << " | "
           << format_rate(t.ddpbench_steady_images_per_s) << " | " << format_rate(t.steady_images_per_s) << " | "
           << ratio(r.vs_pytorch_steady) << " | " << twin_status(t, notes) << " |\n";
      }
      md << notes_under(notes);
    }

    if (std::any_of(rows.begin(), rows.end(), [](const RowSummary& r) { return r.phase_s.total_s() > 0; })) {
      // A row that re-makes its replicas in forward (LibTorch's data_parallel) shows that part.
      const bool replicating =
          std::any_of(rows.begin(), rows.end(), [](const RowSummary& r) { return r.phase_s.replicate_s > 0; });
      md << "\n## where a step's time goes\n\n"
         << "Mean time per step after warm-up, by phase; \"hidden\" is the allreduce time that ran under backward "
            "(inside the backward column), \"exposed\" what backward left waiting. "
         << (replicating ? "\"replicate\" is the part of forward spent cloning the module onto its replicas. " : "")
         << "Then the step-time distribution.\n\n"
         << "| row | mode | data | forward | " << (replicating ? "replicate (in forward) | " : "")
         << "backward | comm hidden in backward | exposed comm | optimizer | step | step p50 | step p90 | step max |\n"
         << "| --- | --- | ---: | ---: | " << (replicating ? "---: | " : "")
         << "---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
      for (const auto& r : rows) {
        if (r.phase_s.total_s() <= 0) continue;
        const PhaseSeconds& p = r.phase_s;
        md << "| " << cell(r.name) << " | " << cell(r.mode) << " | " << format_seconds(p.data_s) << " | "
           << format_seconds(p.forward_s) << " | " << (replicating ? format_seconds(p.replicate_s) + " | " : "")
           << format_seconds(p.backward_s) << " | "
           << format_seconds(p.hidden_comm_s()) << " | " << format_seconds(p.comm_s) << " | "
           << format_seconds(p.optimizer_s) << " | " << format_seconds(p.total_s()) << " | "
           << format_seconds(r.step_time_p50_s) << " | " << format_seconds(r.step_time_p90_s) << " | "
           << format_seconds(r.step_time_max_s) << " |\n";
      }
    }

    if (std::any_of(rows.begin(), rows.end(), [](const RowSummary& r) { return r.has_straggler(); })) {
      md << "\n## stragglers\n\n"
         << "A collective is a barrier: every rank's step takes as long as the slowest's, so the wall clock cannot "
            "say who held the others back. Each rank's own time per step (its compute and its loader's data: the "
            "step without waiting for the others) can: rows whose slowest rank takes more than "
         << format_percent(kStragglerSpread) << " longer than the fastest.\n\n"
         << "| row | mode | rank | compute | data | wait | step p50 |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
      for (const auto& r : rows) {
        if (!r.has_straggler()) continue;
        for (const auto& rank : r.ranks) {
          md << "| " << cell(r.name) << " | " << cell(r.mode) << " | " << rank.rank
             << (rank.rank == r.slowest_rank ? " (slowest, " + format_fixed(r.rank_spread, 2) + "x, " + r.straggler_cause + ")"
                                             : "")
             << " | " << format_seconds(rank.compute_s) << " | " << format_seconds(rank.data_s) << " | "
             << format_seconds(rank.wait_s) << " | " << format_seconds(rank.step_time_s.p50) << " |\n";
        }
      }
    }
    if (const auto unjudged = rows_without_straggler_verdict(doc.runs); !unjudged.empty()) {
      md << "\n## stragglers not judged\n\n";
      for (const auto& [label, why] : unjudged) md << "- " << cell(label) << ": a straggler " << cell(why) << "\n";
    }

    if (const auto projections = sweep_projections(doc)) {
      md << "\n## projected scaling (" << cell(doc.sweep->projection.value("fabric", std::string("measured"))) << ")\n\n"
         << "Each DDP row projected past this machine: its buckets' allreduces costed by the ring model on the "
            "fabric, one after another from when backward made each ready, as measured here "
            "([docs/reports-and-gate.md](docs/reports-and-gate.md)). Left out: compute slowed by communication, "
            "stragglers, topologies beyond two levels.\n"
         << markdown_projection(*projections);
    }
    if (const auto advice = sweep_advice(doc)) {
      md << "\n## tuning advice (" << cell(doc.sweep->projection.value("fabric", std::string("measured"))) << ")\n\n"
         << "The DDP settings to use at 8, 64 and 512 ranks on that fabric, from each DDP row's gradients as "
            "measured here: bucket caps 1-100 MB, compression hooks and overlap, each laid out as the Reducer lays "
            "it out and projected as above (`ddpbench advise results.json` gives every setting; "
            "[docs/reports-and-gate.md](docs/reports-and-gate.md)).\n"
         << markdown_advice(*advice, false);
    }

    if (std::any_of(rows.begin(), rows.end(), [](const RowSummary& r) { return std::isfinite(r.achieved_flops_per_s); })) {
      md << "\n## compute\n\n" << kComputeTableIntro << "\n\n"
         << "| row | mode | precision | FLOPs per image | achieved | peak | utilisation | peak of |\n"
         << "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n";
      TableNotes sources;
      for (const auto& r : rows) {
        if (!std::isfinite(r.achieved_flops_per_s)) continue;
        md << "| " << cell(r.name) << " | " << cell(r.mode) << " | " << r.precision << " | "
           << format_si(r.train_flops_per_image, "FLOP") << " | " << format_si(r.achieved_flops_per_s, "FLOP/s")
           << " | " << format_si(r.row_peak_flops_per_s, "FLOP/s") << " | " << utilisation_cell(r) << " | "
           << cell(peak_of_cell(r, sources)) << " |\n";
      }
      md << notes_under(sources);
    }

    std::ostringstream differences;
    for (const auto& r : rows) {
      if (r.differences.empty()) continue;
      differences << "- " << cell(r.name) << " (" << r.mode << "): ";
      for (std::size_t i = 0; i < r.differences.size(); ++i) differences << (i ? "; " : "") << cell(r.differences[i]);
      differences << "\n";
    }
    if (!differences.str().empty()) {
      md << "\n## how each row differs from the baseline row (" << cell(doc.sweep->baseline_row) << ")\n\n"
         << differences.str();
    }

    std::ostringstream notes;
    for (const auto& r : rows) {
      if (r.status == RunStatus::ok && r.unstable) {
        notes << "- " << cell(r.name) << " (" << r.mode << "): unstable: " << r.repetitions << " repetitions from "
              << format_seconds(r.train_time_min_s) << " to " << format_seconds(r.train_time_max_s)
              << ", wider than " << format_percent(kUnstableRelativeSpread) << " of the median\n";
      }
    }
    // One line per note, naming every run it holds for: the CPU preset cuts every epoch alike.
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
      if (run.epoch_cut) add("epoch cut to " + std::to_string(run.steps) + " steps (--max-steps)", run);
      if (run.steps > 0 && run.steps <= run.warmup_steps) add(no_steady_steps(run), run);
      for (const auto& note : strategy_notes(run)) add(note, run);
    }
    for (const auto& [text, runs] : shared) {
      std::string who;
      if (runs.size() == first_runs && runs.size() > 1) {
        who = "every row and twin that ran";
      } else {
        for (const auto& label : runs) who += (who.empty() ? "" : ", ") + label;
      }
      notes << "- " << cell(who) << ": " << cell(text) << "\n";
    }
    for (const auto& run : doc.runs) {
      if (!run.trace.traced()) continue;
      notes << "- " << cell(row_label(run.name, run.mode)) << " repetition " << run.repetition << ": "
            << cell(trace_note(run)) << "\n";
    }
    if (!notes.str().empty()) md << "\n## notes\n\n" << notes.str();
    return md.str();
  }
  [[nodiscard]] std::string do_file_name() const override { return "results.md"; }
};

}  // namespace

std::unique_ptr<Reporter> make_markdown_reporter() { return std::make_unique<MarkdownReporter>(); }

}  // namespace ddpbench
