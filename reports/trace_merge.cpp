#include "reports/trace_merge.hpp"

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "harness/base/gzip.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/statistics.hpp"
#include "harness/base/units.hpp"
#include "harness/base/whole_integer.hpp"
#include "harness/base/text_file.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

constexpr const char* kStepPrefix = "ProfilerStep#";
// No traced range lasts a day: a longer one is an edited file's.
constexpr double kLongestRangeUs = 24.0 * 3600 * 1e6;
// Ranks named as one host whose barrier marks differ by more than this (median over the rounds)
// do not share a clock: hosts that share a name, aligned as different hosts.
constexpr double kOneClockUs = 1000;
// Flow ids (CPU op to kernel) are unique within one rank's trace only.
constexpr double kFlowIdsPerRank = 1e12;

struct RankTrace {
  std::string file;
  json doc;
  std::string host;
  int64_t base_ns = 0;
  std::vector<double> sync_us;  // the clock-sync marks' times, in order, on the file's own clock
};

// The events a report reads, proven: ranges of a time and a length, the row's traced steps each
// once, and the clock-sync marks.
void prove_events(RankTrace& t, const RunResult& row, const std::string& where) {
  std::set<int64_t> steps;
  std::size_t index = 0;
  for (const json& e : t.doc.at("traceEvents")) {
    const std::string at = where + ": event " + std::to_string(index++);
    if (!e.is_object()) throw InputError(at + " is not a JSON object");
    if (e.value("ph", json()) != json("X")) continue;
    const json ts = e.value("ts", json()), dur = e.value("dur", json());
    if (!ts.is_number() || !dur.is_number() || !std::isfinite(ts.get<double>()) || !std::isfinite(dur.get<double>()) ||
        dur.get<double>() < 0 || dur.get<double>() > kLongestRangeUs) {
      throw InputError(at + " is a range without a time and a length from zero to a day (ts " + ts.dump() + ", dur " +
                       dur.dump() + ")");
    }
    const json name = e.value("name", json());
    if (!name.is_string()) throw InputError(at + " is a range without a name");
    const std::string text = name.get<std::string>();
    if (text == kClockSyncMark) t.sync_us.push_back(ts.get<double>());
    if (!text.starts_with(kStepPrefix)) continue;
    const auto step = whole_integer<int64_t>(std::string_view(text).substr(std::string_view(kStepPrefix).size()));
    if (!step || *step < row.trace.first_step || *step > row.trace.last_step || !steps.insert(*step).second) {
      throw InputError(at + ": '" + text + "' is not one of the traced steps " + std::to_string(row.trace.first_step) +
                       "-" + std::to_string(row.trace.last_step) + ", each once");
    }
  }
  if (static_cast<int64_t>(steps.size()) != row.trace.last_step - row.trace.first_step + 1) {
    throw InputError(where + ": it holds " + std::to_string(steps.size()) + " of the traced steps " +
                     std::to_string(row.trace.first_step) + "-" + std::to_string(row.trace.last_step));
  }
  if (t.sync_us.size() != static_cast<std::size_t>(kClockSyncRounds)) {
    throw InputError(where + ": it holds " + std::to_string(t.sync_us.size()) + " '" + kClockSyncMark + "' marks, not " +
                     std::to_string(kClockSyncRounds));
  }
}

// One rank's file, proven to be the trace of `rank` of `row` over the row's traced steps.
RankTrace read_rank_trace(const RunResult& row, const std::filesystem::path& folder, int64_t rank) {
  RankTrace t;
  t.file = row.trace.files[static_cast<std::size_t>(rank)];
  const std::filesystem::path path = folder / t.file;
  const std::string where = "trace '" + path.string() + "'";
  if (!std::filesystem::is_regular_file(path)) {
    throw InputError(where + ": no such file (row '" + row.name + "' lists it for rank " + std::to_string(rank) + ")");
  }
  std::string bytes = read_text_file(path, "trace: cannot read");
  if (crc32_of(bytes) != row.trace.crc32[static_cast<std::size_t>(rank)]) {
    throw InputError(where + ": not the trace rank " + std::to_string(rank) + " of row '" + row.name +
                     "' saved (its CRC-32 differs: overwritten by another run, or edited)");
  }
  t.doc = json::parse(gunzip_if_gzip(std::move(bytes), where), nullptr, false);
  if (t.doc.is_discarded() || !t.doc.is_object() || !t.doc.contains("traceEvents") ||
      !t.doc.at("traceEvents").is_array()) {
    throw InputError(where + ": not a Chrome trace (a JSON object with a traceEvents list)");
  }
  const json info = t.doc.value("distributedInfo", json::object());
  const json ours = t.doc.value("ddpbench", json::object());
  if (!info.is_object() || !ours.is_object() || info.value("rank", json()) != json(rank) ||
      info.value("world_size", json()) != json(row.world_size)) {
    throw InputError(where + ": its distributedInfo is not rank " + std::to_string(rank) + " of " +
                     std::to_string(row.world_size) + " (a file of another row or run)");
  }
  if (ours.value("row", json()) != json(row.name) || ours.value("first_step", json()) != json(row.trace.first_step) ||
      ours.value("last_step", json()) != json(row.trace.last_step)) {
    throw InputError(where + ": it traced another row or other steps than row '" + row.name + "' (steps " +
                     std::to_string(row.trace.first_step) + "-" + std::to_string(row.trace.last_step) + ")");
  }
  t.host = ours.value("host", std::string());
  const json base = t.doc.value("baseTimeNanoseconds", json(0));
  if (!base.is_number_integer()) throw InputError(where + ": baseTimeNanoseconds is not a whole number");
  t.base_ns = base.get<int64_t>();
  prove_events(t, row, where);
  return t;
}

// The merged process id of each process id in rank `rank`'s file: its own process first.
std::map<int64_t, int64_t> process_ids(const json& events, int64_t rank) {
  std::set<int64_t> pids;
  std::optional<int64_t> host_pid;
  for (const json& e : events) {
    if (!e.contains("pid") || !e.at("pid").is_number_integer()) continue;
    const auto pid = e.at("pid").get<int64_t>();
    pids.insert(pid);
    if (!host_pid && e.value("cat", json()) == json("cpu_op")) host_pid = pid;
  }
  std::map<int64_t, int64_t> ids;
  int64_t next = rank * kPidsPerRank;
  if (host_pid) ids[*host_pid] = next++;
  for (const int64_t pid : pids) {
    if (!ids.contains(pid)) ids[pid] = next++;
  }
  if (static_cast<int64_t>(ids.size()) > kPidsPerRank) {
    throw InputError("rank " + std::to_string(rank) + "'s trace has more than " + std::to_string(kPidsPerRank) +
                     " processes");
  }
  return ids;
}

// How far a rank's times move: from its file's base onto the common one (`base_offset_us`), then,
// for a host other than rank 0's, onto rank 0's clock (`shift_us`, the same for every rank of
// that host: they share its clock).
struct ClockOffsets {
  double base_offset_us = 0;
  double shift_us = 0;
};

// The median, over the clock-sync rounds and over the ranks `counted`, of how far `reference`'s
// marks are ahead of theirs: their clock's offset, plus how much later one rank left each barrier
// than the other, which the median keeps small where one rank waited for its core.
double offset_us(const RankTrace& reference, const std::vector<RankTrace>& ranks, int64_t base_ns,
                 const std::function<bool(const RankTrace&)>& counted) {
  const auto on_common_base = [&](const RankTrace& t, std::size_t k) {
    return t.sync_us[k] + static_cast<double>(t.base_ns - base_ns) / 1e3;
  };
  std::vector<double> differences;
  for (const RankTrace& t : ranks) {
    if (!counted(t)) continue;
    for (std::size_t k = 0; k < t.sync_us.size(); ++k) {
      differences.push_back(on_common_base(reference, k) - on_common_base(t, k));
    }
  }
  return median(differences);
}

// Ranks that name one host share its clock only where their marks agree within the barriers'
// exit skew (kOneClockUs): every host's ranks are held to the first rank of that host, rank 0's
// host and every other. A rank that disagrees is not shifted with the host's others: it is
// aligned as a host of its own, renamed "HOST (rank R)", and said (the returned lines).
std::vector<std::string> split_ranks_off_their_hosts_clock(std::vector<RankTrace>& ranks, int64_t base_ns) {
  std::map<std::string, std::size_t> first_of_host;
  for (std::size_t r = 0; r < ranks.size(); ++r) first_of_host.emplace(ranks[r].host, r);
  std::vector<std::string> said;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    RankTrace& t = ranks[r];
    const std::size_t first = first_of_host.at(t.host);
    const auto just_this = [&](const RankTrace& other) { return &other == &t; };
    const double apart_us = first == r ? 0.0 : offset_us(ranks[first], ranks, base_ns, just_this);
    if (std::abs(apart_us) <= kOneClockUs) continue;
    said.push_back("rank " + std::to_string(r) + " named host " + t.host + " but its clock was " +
                   format_fixed(std::abs(apart_us) / 1e3, 1) + " ms from rank " + std::to_string(first) +
                   "'s there at the barriers");
    t.host += " (rank " + std::to_string(r) + ")";
  }
  return said;
}

// Rank `r`'s events onto `events`: merged process ids, times and flow ids, its processes named.
void append_rank_events(json& events, const RankTrace& t, int64_t r, double add_us) {
  const json& own = t.doc.at("traceEvents");
  const auto pids = process_ids(own, r);
  for (json e : own) {
    if (e.contains("pid") && e.at("pid").is_number_integer()) e["pid"] = pids.at(e.at("pid").get<int64_t>());
    if (e.contains("ts") && e.at("ts").is_number()) e["ts"] = e.at("ts").get<double>() + add_us;
    if (e.contains("id") && e.at("id").is_number()) {
      e["id"] = e.at("id").get<double>() + static_cast<double>(r) * kFlowIdsPerRank;
    }
    // Kineto names its processes by pid and device: say whose they are.
    if (e.value("ph", json()) == json("M") && e.value("name", json()) == json("process_name") && e.contains("args") &&
        e.at("args").is_object()) {
      e["args"]["name"] = "rank " + std::to_string(r) + " " + e.at("args").value("name", std::string());
    }
    events.push_back(std::move(e));
  }
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r * kPidsPerRank},
                    {"args", {{"name", "rank " + std::to_string(r) + " (" + t.host + ")"}}}});
  for (const auto& [pid, merged_pid] : pids) {
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", merged_pid}, {"args", {{"sort_index", merged_pid}}}});
  }
}

}  // namespace

bool is_merged_trace(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc.contains("ddpbench")) return false;
  const json& ours = doc.at("ddpbench");
  return ours.is_object() && ours.contains("row") && ours.contains("clock") && ours.contains("ranks");
}

bool is_rank_trace(std::string_view bytes) {
  json doc;
  try {
    doc = json::parse(gunzip_if_gzip(std::string(bytes), "a rank's trace"), nullptr, false);
  } catch (const std::exception&) {
    return false;
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc.contains("ddpbench")) return false;
  const json& ours = doc.at("ddpbench");
  return ours.is_object() && ours.contains("row") && ours.contains("first_step") && !ours.contains("clock");
}

MergedTrace merge_row_traces(const RunResult& row, const std::filesystem::path& folder) {
  if (!row.trace.traced()) throw InputError("row '" + row.name + "' has no trace (it ran without --trace-steps)");
  std::vector<RankTrace> ranks;
  for (int64_t r = 0; r < row.world_size; ++r) ranks.push_back(read_rank_trace(row, folder, r));

  MergedTrace merged;
  int64_t base_ns = ranks.front().base_ns;
  for (const auto& t : ranks) base_ns = std::min(base_ns, t.base_ns);
  // Each host's clock onto rank 0's: none for rank 0's own host. A rank whose marks say it does
  // not share its host's clock (hosts of one name) is a host of its own, which is then said.
  const std::vector<std::string> split_off = split_ranks_off_their_hosts_clock(ranks, base_ns);
  std::map<std::string, double> shift_of_host;
  for (const auto& t : ranks) {
    if (!shift_of_host.contains(t.host)) {
      const auto of_host = [&](const RankTrace& other) { return other.host == t.host; };
      shift_of_host[t.host] = t.host == ranks.front().host ? 0.0 : offset_us(ranks.front(), ranks, base_ns, of_host);
    }
  }
  merged.clock = shift_of_host.size() == 1
                     ? "one host (" + ranks.front().host + "): every rank's own clock, which they share"
                     : std::to_string(shift_of_host.size()) +
                           " hosts: each host's ranks shifted onto rank 0's clock by the median, over " +
                           std::to_string(kClockSyncRounds) +
                           " barriers and the host's ranks, of their clock-sync marks' distance from rank 0's "
                           "(within the barriers' exit skew, a fraction of a millisecond)";
  for (const auto& line : split_off) {
    merged.clock += "; " + line + " (more than " + format_fixed(kOneClockUs / 1e3, 1) +
                    " ms, beyond the barriers' exit skew): it keeps another clock, aligned as a host of its own";
  }
  json events = json::array();
  json ranks_json = json::array();
  for (int64_t r = 0; r < row.world_size; ++r) {
    const RankTrace& t = ranks[static_cast<std::size_t>(r)];
    const ClockOffsets o{static_cast<double>(t.base_ns - base_ns) / 1e3, shift_of_host.at(t.host)};
    append_rank_events(events, t, r, o.base_offset_us + o.shift_us);
    merged.ranks.push_back({r, t.host, t.file, static_cast<int64_t>(t.doc.at("traceEvents").size()), o.shift_us});
    ranks_json.push_back({{"rank", r}, {"host", t.host}, {"file", t.file}, {"shift_us", o.shift_us}});
  }
  merged.trace = {{"schemaVersion", 1},
                  {"displayTimeUnit", "ms"},
                  {"baseTimeNanoseconds", base_ns},
                  {"ddpbench", {{"row", row.name},
                                {"mode", row.mode},
                                {"repetition", row.repetition},
                                {"first_step", row.trace.first_step},
                                {"last_step", row.trace.last_step},
                                {"clock", merged.clock},
                                {"folder", std::filesystem::absolute(folder).string()},
                                {"ranks", std::move(ranks_json)}}},
                  {"traceEvents", std::move(events)}};
  return merged;
}

}  // namespace ddpbench
