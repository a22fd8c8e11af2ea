#pragma once
// A traced row's per-rank Kineto traces (Chrome-trace JSON, plain or gzipped) merged into one
// trace whose processes are the ranks, on one clock. Ranks of one host share its clock and keep
// their times exactly; ranks of several hosts are shifted so that their "ddpbench clock sync"
// marks, set just after barriers when tracing began, fall at rank 0's (the median over the
// rounds). No LibTorch.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/run_result.hpp"

namespace ddpbench {

struct MergedRank {
  int64_t rank = 0;
  std::string host;
  std::string file;
  int64_t events = 0;
  double shift_us = 0;  // how far the rank's clock was moved onto rank 0's: 0 on one host
};

struct MergedTrace {
  nlohmann::json trace;  // the merged Chrome trace
  std::vector<MergedRank> ranks;
  std::string clock;     // how the clocks were put on one
};

/// Merges `row`'s traces, read from `folder` (its JSON's). Throws InputError naming the file when
/// one is missing, unreadable, not the one its rank saved (CRC-32), not a Chrome trace, says it
/// is another rank, row or range, or holds what a trace cannot: a range of no time or negative
/// length, steps other than the row's traced ones (each once), or other than kClockSyncRounds
/// clock-sync marks.
MergedTrace merge_row_traces(const RunResult& row, const std::filesystem::path& folder);

/// Whether `text` is a merged trace `ddpbench trace` wrote (its "ddpbench" section names the row,
/// the clock and the ranks): an earlier one is replaced, any other file is not (the output rule,
/// harness/base/output_rule.hpp).
bool is_merged_trace(std::string_view text);
/// Whether `bytes` (plain or gzipped) is a rank's trace of a traced row (a Chrome trace whose
/// "ddpbench" section names its row and steps): a traced run replaces its own.
bool is_rank_trace(std::string_view bytes);

/// The clock-sync marks each rank's trace holds, each set just after a barrier when tracing
/// began (harness/runner/step_trace.cpp); hosts are aligned on the median of the rounds.
inline constexpr int kClockSyncRounds = 5;
inline constexpr const char* kClockSyncMark = "ddpbench clock sync";

/// Process ids in the merged trace: rank r's host process is r * kPidsPerRank, its devices and
/// streams the following ids.
inline constexpr int64_t kPidsPerRank = 100;

}  // namespace ddpbench
