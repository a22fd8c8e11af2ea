#pragma once
// Progress, not liveness. Every rank publishes, with each heartbeat, how far it has come
// through the collectives: how many it has entered, the one it is in (or left last) and for
// how long. When a collective stalls, the ranks whose count is behind the others' never
// reached it: they are the cause, alive or not, as c10d's desync debugging and NCCL's flight
// recorder report it; a rank whose heartbeat stopped is named as stopped. Both the ranks
// (diagnosing their own failed collective) and the launcher (which outlives them) read the
// same records. No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddpbench {

struct RankProgress {
  int64_t beats = 0;    // heartbeats so far: a count that stops moving is a rank that stopped
  int64_t entered = 0;  // collectives entered so far: the last one's sequence number
  int64_t at = 0;       // the collective `phase` names: the oldest still in flight, else the last left
  bool inside = false;  // #at has not completed on this rank
  double for_s = 0;     // since it entered #at (inside) or left it, as of the beat
  std::string phase;    // "SyncBN forward", "allreduce of bucket 3", ...; empty before the first
};

/// The store's value for a record, and back (nullopt when malformed).
std::string format_progress(const RankProgress& progress);
std::optional<RankProgress> parse_progress(std::string_view text);

/// Who is to blame, from every rank's record read twice, `silence_s` apart (nullopt: that
/// rank published none, so it never joined). Ranks whose heartbeat did not move stopped
/// answering; of the others, those that entered fewer collectives than the furthest are
/// behind, alive. `text` names each with its phase and how long it has been there, or, when
/// no rank is to blame, says so; `observer` (-1: none) is the rank reading, left out of blame
/// for silence but counted for progress.
struct ProgressVerdict {
  std::string text;
  std::vector<int64_t> blamed;
  std::vector<std::optional<RankProgress>> records;  // each rank's, as read last
};

/// Whether `rank`, which died by a signal, is the victim of another's stall rather than the
/// cause: the records blame another rank, and `rank` had been waiting inside its collective for
/// at least half of `timeout_s` (a backend's watchdog aborts the ranks it left waiting only
/// after the timeout). A rank that dies as it enters a collective the others have not reached
/// yet is ahead, not waiting: it is the cause.
bool died_waiting_for_another(const ProgressVerdict& verdict, int64_t rank, double timeout_s);
/// The records' sentence where `rank`, killed by a signal, is named as the cause: their text when
/// they blame `rank` alone, else empty. A rank killed as it entered a collective leaves the others
/// short of it, which the records read as theirs being behind; said after the killed rank's name
/// that blames the wrong one.
std::string sentence_for_killed(const ProgressVerdict& verdict, int64_t rank);
ProgressVerdict blame(const std::vector<std::optional<RankProgress>>& before,
                      const std::vector<std::optional<RankProgress>>& after, double silence_s, int64_t observer);

}  // namespace ddpbench
