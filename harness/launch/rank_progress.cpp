#include "harness/launch/rank_progress.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace ddpbench {
namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string collective(int64_t at, const std::string& phase) {
  return "collective #" + std::to_string(at) + (phase.empty() ? "" : " (" + phase + ")");
}

// Where a rank is, in words.
std::string where(const RankProgress& p) {
  if (p.entered == 0) return "before its first collective";
  if (p.inside) return "in " + collective(p.at, p.phase) + " for " + seconds_text(p.for_s);
  return seconds_text(p.for_s) + " past " + collective(p.at, p.phase);
}

template <class Number>
bool read_field(std::string_view& rest, std::string_view name, Number& value) {
  if (rest.substr(0, name.size()) != name || rest.substr(name.size(), 1) != "=") return false;
  rest.remove_prefix(name.size() + 1);
  const auto end = rest.find(';');
  if (end == std::string_view::npos) return false;
  const auto text = rest.substr(0, end);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return false;
  rest.remove_prefix(end + 1);
  return true;
}

}  // namespace

std::string format_progress(const RankProgress& p) {
  char head[160];
  std::snprintf(head, sizeof head, "beats=%lld;entered=%lld;at=%lld;inside=%d;for_s=%.3f;phase=",
                static_cast<long long>(p.beats), static_cast<long long>(p.entered), static_cast<long long>(p.at),
                p.inside ? 1 : 0, p.for_s);
  return head + p.phase;
}

std::optional<RankProgress> parse_progress(std::string_view text) {
  RankProgress p;
  int inside = 0;
  if (!read_field(text, "beats", p.beats) || !read_field(text, "entered", p.entered) || !read_field(text, "at", p.at) ||
      !read_field(text, "inside", inside) || !read_field(text, "for_s", p.for_s) || text.substr(0, 6) != "phase=") {
    return std::nullopt;
  }
  p.inside = inside != 0;
  p.phase = std::string(text.substr(6));
  return p;
}

namespace {

using Records = std::vector<std::optional<RankProgress>>;

const std::optional<RankProgress>& record_of(const Records& records, int64_t rank) {
  return records[static_cast<std::size_t>(rank)];
}

// The ranks whose heartbeat did not move between the two reads; the observer reads, so its own
// record's count says nothing of it.
std::vector<bool> silent_ranks(const Records& before, const Records& after, int64_t observer) {
  std::vector<bool> silent(after.size(), false);
  for (std::size_t i = 0; i < after.size(); ++i) {
    silent[i] = after[i] && static_cast<int64_t>(i) != observer && i < before.size() && before[i] &&
                before[i]->beats == after[i]->beats;
  }
  return silent;
}

// Who waits for whom: a rank inside collective #k waits for every rank that has not entered
// #k. Counting collectives alone once blamed the root of a broadcast that the others had left
// while it still waited for a third rank: it waits, so it is not the one behind.
bool waits_for(const Records& records, int64_t a, int64_t b) {
  const auto& waiting = record_of(records, a);
  const auto& other = record_of(records, b);
  return a != b && waiting && other && waiting->inside && other->entered < waiting->at;
}

// The rank the others are measured against: the furthest, preferring one that waits inside;
// -1 when no rank published a record.
int64_t leader_of(const Records& records) {
  int64_t leader = -1;
  for (int64_t r = 0; r < static_cast<int64_t>(records.size()); ++r) {
    const auto& record = record_of(records, r);
    if (!record) continue;
    const auto& best = record_of(records, leader < 0 ? r : leader);
    const bool better = leader < 0 || record->entered > best->entered ||
                        (record->entered == best->entered && record->inside && !best->inside);
    if (better) leader = r;
  }
  return leader;
}

// Why rank `r` (alive, answering) is behind, or nullopt when it is not. Behind: another rank
// waits for it, and it waits for none, unless it is inside a collective another rank is inside
// too (then that collective, or a silent rank in it, holds them both).
std::optional<std::string> behind(const Records& records, int64_t r) {
  const RankProgress& now = *record_of(records, r);
  int64_t waiter = -1;
  bool waits = false, shares_its_collective = false;
  for (int64_t o = 0; o < static_cast<int64_t>(records.size()); ++o) {
    const auto& other = record_of(records, o);
    if (waits_for(records, o, r) && (waiter < 0 || other->at > record_of(records, waiter)->at)) waiter = o;
    waits = waits || waits_for(records, r, o);
    shares_its_collective = shares_its_collective || (o != r && now.inside && other && other->inside && other->at == now.at);
  }
  if (waiter < 0 || waits || shares_its_collective) return std::nullopt;
  const RankProgress& ahead = *record_of(records, waiter);
  if (now.inside) {
    return "is behind, alive: still " + where(now) + ", which the others have left; rank " + std::to_string(waiter) +
           " is " + where(ahead);
  }
  return "is behind, alive: " + where(now) + ", and never reached " + collective(ahead.at, "") + ", where rank " +
         std::to_string(waiter) + " is " + where(ahead);
}

}  // namespace

ProgressVerdict blame(const std::vector<std::optional<RankProgress>>& before,
                      const std::vector<std::optional<RankProgress>>& after, double silence_s, int64_t observer) {
  ProgressVerdict verdict;
  verdict.records = after;
  const auto name = [&](int64_t rank, const std::string& what) {
    verdict.text += (verdict.text.empty() ? "" : ", ") + ("rank " + std::to_string(rank) + " " + what);
    verdict.blamed.push_back(rank);
  };
  const std::vector<bool> silent = silent_ranks(before, after, observer);
  for (int64_t r = 0; r < static_cast<int64_t>(after.size()); ++r) {
    const auto& now = record_of(after, r);
    if (!now) {
      name(r, "never joined");
    } else if (silent[static_cast<std::size_t>(r)]) {
      name(r, "stopped answering (no heartbeat for " + seconds_text(silence_s) + "; at its last it was " + where(*now) +
                  ")");
    } else if (const auto why = behind(after, r)) {
      name(r, *why);
    }
  }
  if (verdict.blamed.empty()) {
    const int64_t leader = leader_of(after);
    verdict.text = "every rank is alive and none is behind" +
                   (leader >= 0 ? " (rank " + std::to_string(leader) + " is " + where(*record_of(after, leader)) + ")"
                                : std::string()) +
                   ": the collective itself did not complete (the network, or the backend)";
  }
  return verdict;
}

bool died_waiting_for_another(const ProgressVerdict& verdict, int64_t rank, double timeout_s) {
  const bool others_blamed =
      std::any_of(verdict.blamed.begin(), verdict.blamed.end(), [&](int64_t blamed) { return blamed != rank; });
  const bool self_blamed = std::find(verdict.blamed.begin(), verdict.blamed.end(), rank) != verdict.blamed.end();
  if (!others_blamed || self_blamed || rank < 0 || static_cast<std::size_t>(rank) >= verdict.records.size()) return false;
  const auto& own = verdict.records[static_cast<std::size_t>(rank)];
  return own && own->inside && own->for_s >= 0.5 * timeout_s;
}

std::string sentence_for_killed(const ProgressVerdict& verdict, int64_t rank) {
  const bool only_it = !verdict.blamed.empty() && std::all_of(verdict.blamed.begin(), verdict.blamed.end(),
                                                              [&](int64_t blamed) { return blamed == rank; });
  if (!only_it) return "";
  // The records were read as the rank died: it is no longer "alive", only behind when it died.
  std::string text = verdict.text;
  const std::string alive = "rank " + std::to_string(rank) + " is behind, alive: ";
  if (text.starts_with(alive)) text.replace(0, alive.size(), "rank " + std::to_string(rank) + " was behind: ");
  return text;
}

}  // namespace ddpbench
