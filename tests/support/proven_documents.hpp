#pragma once
// The verdicts take proven files (reports/result_proof.hpp); tests build documents in code and
// hand them over proven here, the way the commands prove the files they read. A document
// built without a sweep section but with repetitions gets the one its sweep would have
// written (repeat: its highest repetition + 1).
#include <algorithm>

#include "reports/compare.hpp"
#include "reports/paired_compare.hpp"
#include "reports/result_proof.hpp"

namespace ddpbench {

inline ProvenResults proven(ResultDocument doc, const std::string& side = "the file") {
  if (!doc.sweep && !doc.runs.empty()) {
    const auto highest = std::max_element(doc.runs.begin(), doc.runs.end(), [](const RunResult& a, const RunResult& b) {
      return a.repetition < b.repetition;
    });
    if (highest->repetition > 0) {
      doc.sweep = SweepInfo{};
      doc.sweep->repeat = highest->repetition + 1;
    }
  }
  return prove_results(std::move(doc), side);
}

inline Comparison compare_results(const ResultDocument& baseline, const ResultDocument& current,
                                  const CompareOptions& options) {
  return compare_results(proven(baseline, "the baseline"), proven(current, "the current file"), options);
}

inline PairedResult compare_paired(const ResultDocument& baseline, const ResultDocument& candidate,
                                   const PairedOptions& options) {
  return compare_paired(proven(baseline, "the baseline build's file"), proven(candidate, "the candidate's file"),
                        options);
}

}  // namespace ddpbench
