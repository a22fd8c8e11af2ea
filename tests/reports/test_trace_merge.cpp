// Per-rank traces merged on one clock: the same host keeps each rank's time; different hosts
// meet at the clock-sync mark; a file that is not the row's own is bad input.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "harness/base/gzip.hpp"
#include "harness/base/input_error.hpp"
#include "reports/result_proof.hpp"
#include "reports/trace_merge.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// Rank `rank`'s trace: its host process (pid 4000 + rank), its clock-sync marks 10 us apart from
// `sync_us` (the third `late_us` later: a round where it waited for its core) and a step of 10 ms
// after them, on a clock whose base is `base_ns`; a GPU stream (pid 0) with a kernel.
json rank_trace(int64_t rank, const std::string& host, int64_t base_ns, double sync_us, double late_us = 0) {
  const int64_t pid = 4000 + rank;
  json doc = {{"schemaVersion", 1},
          {"baseTimeNanoseconds", base_ns},
          {"distributedInfo", {{"backend", "gloo"}, {"rank", rank}, {"world_size", 2}}},
          {"ddpbench", {{"row", "ddp"}, {"host", host}, {"first_step", 4}, {"last_step", 4}}},
          {"traceEvents",
           {{{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", pid}, {"tid", pid}, {"ts", sync_us + 1}, {"dur", 2}},
            {{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#4"}, {"pid", pid}, {"tid", pid},
             {"ts", sync_us + 50}, {"dur", 10000}},
            {{"ph", "X"}, {"cat", "kernel"}, {"name", "gemm"}, {"pid", 0}, {"tid", 7}, {"ts", sync_us + 5}, {"dur", 4}},
            {{"ph", "s"}, {"id", 12}, {"pid", pid}, {"tid", pid}, {"ts", sync_us + 1}},
            {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "GPU 0"}}}}}}};
  for (int k = 0; k < kClockSyncRounds; ++k) {
    doc["traceEvents"].push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", kClockSyncMark}, {"pid", pid},
                                  {"tid", pid}, {"ts", sync_us + 10 * k + (k == 2 ? late_us : 0)}, {"dur", 0.5}});
  }
  return doc;
}

struct Fixture {
  testing::TempDir dir;
  RunResult row;

  void write(int64_t rank, const json& trace, bool gzip = false) {
    const std::string file = "row.rank" + std::to_string(rank) + ".trace.json" + (gzip ? ".gz" : "");
    const std::string bytes = gzip ? gzip_bytes(trace.dump()) : trace.dump();
    testing::write_text(dir.path() / file, bytes);
    const auto ranks = static_cast<std::size_t>(row.world_size);
    row.trace.files.resize(ranks);
    row.trace.crc32.resize(ranks);
    row.trace.files[static_cast<std::size_t>(rank)] = file;
    row.trace.crc32[static_cast<std::size_t>(rank)] = crc32_of(bytes);
  }

  Fixture() {
    row.name = "ddp";
    row.world_size = 2;
    row.steps = 10;
    row.trace.first_step = 4;
    row.trace.last_step = 4;
  }
};

std::vector<json> named(const json& merged, const std::string& name) {
  std::vector<json> found;
  for (const auto& e : merged.at("traceEvents")) {
    if (e.value("name", "") == name) found.push_back(e);
  }
  return found;
}

TEST(TraceMerge, RanksOfOneHostKeepTheirClockAndBecomeProcessesOfTheirOwn) {
  Fixture f;
  f.write(0, rank_trace(0, "node-a", 1'000'000'000, 5000));
  // Rank 1's file counts from a base 2 ms later (its marks, at the same moments, read 2 ms less);
  // gzipped, as a large trace is.
  f.write(1, rank_trace(1, "node-a", 1'002'000'000, 3000), true);
  const MergedTrace merged = merge_row_traces(f.row, f.dir.path());
  const auto steps = named(merged.trace, "ProfilerStep#4");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].at("pid"), 0);
  EXPECT_EQ(steps[1].at("pid"), kPidsPerRank);
  EXPECT_DOUBLE_EQ(steps[0].at("ts").get<double>(), 5050);
  EXPECT_DOUBLE_EQ(steps[1].at("ts").get<double>(), 3050 + 2000);  // the base's 2 ms, nothing else
  EXPECT_DOUBLE_EQ(merged.ranks[1].shift_us, 0);
  EXPECT_EQ(merged.trace.at("baseTimeNanoseconds"), 1'000'000'000);
  // Each rank's GPU stream is a process of its own, named for its rank; flow ids stay apart.
  const auto kernels = named(merged.trace, "gemm");
  EXPECT_EQ(kernels[0].at("pid"), 1);
  EXPECT_EQ(kernels[1].at("pid"), kPidsPerRank + 1);
  bool gpu_named = false;
  for (const auto& e : named(merged.trace, "process_name")) {
    gpu_named = gpu_named || (e.at("pid") == kPidsPerRank + 1 && e.at("args").at("name") == "rank 1 GPU 0");
  }
  EXPECT_TRUE(gpu_named);
  std::vector<double> flow_ids;
  for (const auto& e : merged.trace.at("traceEvents")) {
    if (e.value("ph", "") == "s") flow_ids.push_back(e.at("id").get<double>());
  }
  ASSERT_EQ(flow_ids.size(), 2u);
  EXPECT_NE(flow_ids[0], flow_ids[1]);
  EXPECT_NE(merged.clock.find("one host"), std::string::npos);
}

TEST(TraceMerge, RanksOfDifferentHostsMeetAtTheClockSyncMark) {
  Fixture f;
  f.write(0, rank_trace(0, "node-a", 1'000'000'000, 500));
  // node-b's clock runs 7 s ahead: its marks read 7 s later than rank 0's, one round 3 ms later
  // still (it left that barrier late): the median of the rounds is the clocks' offset.
  f.write(1, rank_trace(1, "node-b", 1'000'000'000, 7'000'500, 3000));
  const MergedTrace merged = merge_row_traces(f.row, f.dir.path());
  const auto marks = named(merged.trace, kClockSyncMark);
  ASSERT_EQ(marks.size(), 2u * kClockSyncRounds);
  EXPECT_DOUBLE_EQ(marks[0].at("ts").get<double>(), marks[kClockSyncRounds].at("ts").get<double>());
  EXPECT_DOUBLE_EQ(merged.ranks[1].shift_us, -7'000'000);
  EXPECT_NE(merged.clock.find("2 hosts"), std::string::npos);
}

// Ranks of one host share its clock, shifted together; a rank that names rank 0's host but whose
// marks say another clock (hosts of one name, an edited file) is aligned as another host, saying so.
TEST(TraceMerge, RanksOfAHostShareOneShiftAndAHostNameIsNotTakenOnTrust) {
  Fixture f;
  f.row.world_size = 4;
  for (int64_t r = 0; r < 4; ++r) {
    // Rank 1 left one barrier 0.3 ms late: still rank 0's clock.
    json doc = rank_trace(r, r < 2 ? "node-a" : "node-b", 1'000'000'000, r < 2 ? 500 : 7'000'400 + 200 * (r - 2),
                          r == 1 ? 300 : 0);
    doc["distributedInfo"]["world_size"] = 4;
    f.write(r, doc);
  }
  MergedTrace merged = merge_row_traces(f.row, f.dir.path());
  EXPECT_DOUBLE_EQ(merged.ranks[1].shift_us, 0);  // rank 0's host: no shift at all
  EXPECT_DOUBLE_EQ(merged.ranks[2].shift_us, merged.ranks[3].shift_us);  // one host, one shift
  EXPECT_DOUBLE_EQ(merged.ranks[2].shift_us, -7'000'000);  // the median of 7,000,400 and 7,000,600 less 500
  // Rank 1 names node-a but its clock is 3 ms off at every barrier.
  json off = rank_trace(1, "node-a", 1'000'000'000, 3500);
  off["distributedInfo"]["world_size"] = 4;
  f.write(1, off);
  merged = merge_row_traces(f.row, f.dir.path());
  EXPECT_DOUBLE_EQ(merged.ranks[1].shift_us, -3000);
  EXPECT_NE(merged.clock.find("rank 1 named host node-a but its clock was 3.0 ms from rank 0's there"),
            std::string::npos)
      << merged.clock;
}

// Every host's ranks are held to each other's clock, not only rank 0's host's: two ranks that
// name node-b but whose marks are 50 ms apart were both shifted by the median, 25 ms wrong each,
// "within the barriers' exit skew". Now the second is aligned on its own clock, and said.
TEST(TraceMerge, RanksOfAnyHostWhoseClocksDisagreeAreNotShiftedTogether) {
  Fixture f;
  f.row.world_size = 4;
  for (int64_t r = 0; r < 4; ++r) {
    const double sync_us = r < 2 ? 500 : r == 2 ? 7'000'500 : 7'050'500;
    json doc = rank_trace(r, r < 2 ? "node-a" : "node-b", 1'000'000'000, sync_us);
    doc["distributedInfo"]["world_size"] = 4;
    f.write(r, doc);
  }
  const MergedTrace merged = merge_row_traces(f.row, f.dir.path());
  EXPECT_DOUBLE_EQ(merged.ranks[2].shift_us, -7'000'000);
  EXPECT_DOUBLE_EQ(merged.ranks[3].shift_us, -7'050'000);
  EXPECT_EQ(merged.ranks[3].host, "node-b (rank 3)");
  EXPECT_NE(merged.clock.find("rank 3 named host node-b but its clock was 50.0 ms from rank 2's there"),
            std::string::npos)
      << merged.clock;
  const auto marks = named(merged.trace, kClockSyncMark);
  ASSERT_EQ(marks.size(), 4u * kClockSyncRounds);
  for (int64_t r = 1; r < 4; ++r) {
    EXPECT_DOUBLE_EQ(marks[static_cast<std::size_t>(r * kClockSyncRounds)].at("ts").get<double>(),
                     marks[0].at("ts").get<double>())
        << "rank " << r << " meets rank 0 at the first barrier";
  }
}

TEST(TraceMerge, AFileThatIsNotTheRowsOwnIsBadInput) {
  Fixture f;
  f.write(0, rank_trace(0, "node-a", 1'000'000'000, 500));
  f.write(1, rank_trace(1, "node-a", 1'000'000'000, 500));
  RunResult edited = f.row;
  edited.trace.crc32[1] ^= 1;  // overwritten by another run since
  EXPECT_THROW(merge_row_traces(edited, f.dir.path()), InputError);
  f.write(1, rank_trace(0, "node-a", 1'000'000'000, 500));  // rank 0's trace under rank 1's name
  EXPECT_THROW(merge_row_traces(f.row, f.dir.path()), InputError);
  json other_steps = rank_trace(1, "node-a", 1'000'000'000, 500);
  other_steps["ddpbench"]["last_step"] = 6;
  f.write(1, other_steps);
  EXPECT_THROW(merge_row_traces(f.row, f.dir.path()), InputError);
  f.write(1, rank_trace(1, "node-a", 1'000'000'000, 500));
  std::filesystem::remove(f.dir.path() / "row.rank1.trace.json");
  EXPECT_THROW(merge_row_traces(f.row, f.dir.path()), InputError);
  testing::write_text(f.dir.path() / "row.rank1.trace.json", "not json");
  f.row.trace.crc32[1] = crc32_of("not json");
  EXPECT_THROW(merge_row_traces(f.row, f.dir.path()), InputError);
  RunResult untraced = f.row;
  untraced.trace = TraceRecord{};
  EXPECT_THROW(merge_row_traces(untraced, f.dir.path()), InputError);
}

// What a report reads of a trace is proven where the traces are merged: each CRC-valid file
// below was saved as it is and is still refused.
TEST(TraceMerge, ATraceHoldingWhatNoRunWritesIsBadInput) {
  Fixture f;
  f.write(0, rank_trace(0, "node-a", 1'000'000'000, 500));
  const auto with_rank_1 = [&](const std::function<void(json&)>& edit) {
    json doc = rank_trace(1, "node-a", 1'000'000'000, 500);
    edit(doc);
    f.write(1, doc);
  };
  auto find = [](json& doc, const std::string& name) -> json& {
    for (auto& e : doc["traceEvents"]) {
      if (e.value("name", "") == name) return e;
    }
    throw std::logic_error(name);
  };
  with_rank_1([](json&) {});
  EXPECT_NO_THROW(merge_row_traces(f.row, f.dir.path()));
  const std::vector<std::function<void(json&)>> edits = {
      [&](json& d) { find(d, "ProfilerStep#4")["dur"] = -5000; },
      [&](json& d) { find(d, "ProfilerStep#4")["dur"] = 1e15; },  // a step of 31 years
      [&](json& d) { find(d, "ProfilerStep#4")["ts"] = "soon"; },
      [&](json& d) { find(d, "aten::mm").erase("dur"); },
      [&](json& d) { find(d, "ProfilerStep#4")["name"] = "ProfilerStep#x"; },
      [&](json& d) { find(d, "ProfilerStep#4")["name"] = "ProfilerStep#9"; },
      [&](json& d) { d["traceEvents"].push_back(find(d, "ProfilerStep#4")); },  // the step twice
      [&](json& d) { find(d, "ProfilerStep#4")["name"] = "step"; },             // no step at all
      [&](json& d) { find(d, kClockSyncMark)["name"] = "other"; },              // a round missing
      [&](json& d) { d["traceEvents"].push_back(find(d, kClockSyncMark)); },    // a round too many
  };
  for (std::size_t i = 0; i < edits.size(); ++i) {
    with_rank_1(edits[i]);
    EXPECT_THROW(merge_row_traces(f.row, f.dir.path()), InputError) << "edit " << i;
  }
}

// The proof keeps a trace's files beside the row's JSON: a path that leaves the folder, a file
// per rank missing, or steps the row never ran are a damaged or edited file.
TEST(TraceMerge, TheProofRefusesATraceRecordThatPointsOutOfTheFolder) {
  ResultDocument document;
  RunResult row;
  row.name = "ddp";
  row.strategy = "ddp";
  row.world_size = 2;
  row.status = RunStatus::failed;
  row.trace.first_step = 1;
  row.trace.last_step = 2;
  row.trace.files = {"row.rank0.trace.json", "row.rank1.trace.json"};
  row.trace.crc32 = {1, 2};
  document.runs = {row};
  EXPECT_NO_THROW(prove_results(document, "t", json::object()));
  for (const std::string bad : {"../row.rank1.trace.json", "/etc/row.trace.json", ".row.rank1.trace.json",
                                "row.rank1.json", "a\\b.trace.json", "x|y.trace.json"}) {
    document.runs[0].trace.files[1] = bad;
    EXPECT_THROW(prove_results(document, "t", json::object()), InputError) << bad;
  }
  document.runs[0].trace.files = {"row.rank0.trace.json"};
  EXPECT_THROW(prove_results(document, "t", json::object()), InputError);
  document.runs[0].trace.files = {"row.rank0.trace.json", "row.rank1.trace.json"};
  document.runs[0].trace.crc32 = {1};
  EXPECT_THROW(prove_results(document, "t", json::object()), InputError);
  document.runs[0].trace.crc32 = {1, 2};
  document.runs[0].trace.first_step = 3;
  EXPECT_THROW(prove_results(document, "t", json::object()), InputError);  // last before first
}

}  // namespace
}  // namespace ddpbench
