#include <gtest/gtest.h>

#include <cmath>

#include "reports/run_result.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

RunResult sample_run() {
  RunResult r;
  r.name = "single";
  r.strategy = "single";
  r.device = "cuda:0";
  r.dataset = "synthetic";
  r.train_time_s = 13.08;
  r.total_time_s = 69.03;
  r.images_per_s = 3823.0;
  r.steady_images_per_s = 4000.5;
  r.step_time_s = {0.064, 0.07, 0.2};
  r.mean_phase_s = {0.001, 0.02, 0.04, 0.0, 0.003};
  r.test_accuracy = 0.27;
  r.eval_images = 10000;
  r.final_loss = 1.5;
  r.steps = 196;
  r.steps_per_epoch = 196;
  r.global_batch = 256;
  r.images_trained = 50000;
  r.peak_memory_bytes = 1LL << 33;
  r.config = json{{"batch-size", 256}};
  r.step_records.push_back({0, 0, 256, 0.5, 2.3, {0.1, 0.2, 0.15, 0, 0.05}});
  return r;
}

// A row's reason that was a c10 error carried its 20-frame backtrace (and one began with a frame).
TEST(RunResult, AReasonIsTheMessageWithoutTheBacktrace) {
  const std::string c10 =
      "Connection closed by peer [127.0.0.1]:29500\n"
      "Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:669 (most recent call "
      "first):\nframe #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in libc10.so)\n"
      "frame #1: <unknown function> + 0x5f (0x7f in libtorch_cpu.so)\n";
  EXPECT_EQ(reason_text(c10), "Connection closed by peer [127.0.0.1]:29500");
  EXPECT_EQ(reason_text("frame #3: c10d::TCPStore::check + 0x1\nrank 1: the store went away"),
            "rank 1: the store went away");
  EXPECT_EQ(reason_text("rank 1 was killed by signal 9; its stderr ended:\nline one\nline two"),
            "rank 1 was killed by signal 9; its stderr ended:\nline one\nline two")
      << "a reason of several lines keeps them";
}

TEST(RunResult, JsonCarriesTheDocumentedFields) {
  const json j = sample_run();
  for (const char* key : {"name", "strategy", "world_size", "device", "dataset", "status", "reason", "train_time_s",
                          "total_time_s", "images_per_s", "steady_images_per_s", "step_time_s", "test_accuracy",
                          "final_loss", "steps", "peak_memory_bytes", "config", "step_records"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["step_time_s"]["p50"], 0.064);
  EXPECT_EQ(j["step_time_s"]["p90"], 0.07);
  EXPECT_EQ(j["step_time_s"]["max"], 0.2);
}

TEST(RunResult, RoundTripsAndKeepsNotMeasuredAsNull) {
  RunResult r = sample_run();
  r.test_accuracy = kNotMeasured;
  r.status = RunStatus::failed;
  r.reason = "rank 1 exited with status 3";
  const json j = r;
  EXPECT_TRUE(j["test_accuracy"].is_null());
  const auto back = json::parse(j.dump()).get<RunResult>();
  EXPECT_TRUE(std::isnan(back.test_accuracy));
  EXPECT_EQ(back.status, RunStatus::failed);
  EXPECT_EQ(back.reason, r.reason);
  EXPECT_DOUBLE_EQ(back.train_time_s, 13.08);
  EXPECT_EQ(back.peak_memory_bytes, 1LL << 33);
  ASSERT_EQ(back.step_records.size(), 1u);
  EXPECT_DOUBLE_EQ(back.step_records[0].phases.backward_s, 0.15);
  EXPECT_EQ(json(back), j);
}

// Where the ranks ran: kept through a file, and said in a line for the reports.
TEST(RunResult, NodesAndRanksPerNodeRoundTripAndReadAsAPlacement) {
  RunResult r = sample_run();
  EXPECT_EQ(placement_text(r), "");
  r.nodes = {"node1"};
  r.ranks_per_node = {4};
  EXPECT_EQ(placement_text(r), "");  // one node: nothing to say
  r.world_size = 4;
  r.nodes = {"node1", "node2"};
  r.ranks_per_node = {2, 2};
  EXPECT_EQ(placement_text(r), "2 nodes x 2 ranks");
  r.ranks_per_node = {1, 1};
  EXPECT_EQ(placement_text(r), "2 nodes x 1 rank");
  r.nodes = {"a", "b", "c"};
  r.ranks_per_node = {2, 2, 1};
  EXPECT_EQ(placement_text(r), "3 nodes: 2+2+1 ranks");
  r.ranks_per_node.clear();
  EXPECT_EQ(placement_text(r), "3 nodes");
  r.ranks_per_node = {2, 2, 1};
  const json j = r;
  EXPECT_EQ(j["nodes"], json({"a", "b", "c"}));
  EXPECT_EQ(j["ranks_per_node"], json({2, 2, 1}));
  const auto back = json::parse(j.dump()).get<RunResult>();
  EXPECT_EQ(back.nodes, r.nodes);
  EXPECT_EQ(back.ranks_per_node, r.ranks_per_node);
  // Files from before the placement was recorded read as "not said".
  json old = j;
  old.erase("nodes");
  old.erase("ranks_per_node");
  EXPECT_TRUE(old.get<RunResult>().nodes.empty());
}

TEST(ResultDocument, SchemaIsCheckedOnRead) {
  ResultDocument doc;
  doc.argv = {"ddpbench", "run"};
  doc.environment.gpus.push_back({"NVIDIA H200", 141LL << 30, "9.0"});
  doc.runs.push_back(sample_run());
  json j = doc;
  EXPECT_EQ(j["schema"], "ddpbench/result/v1");
  const auto back = j.get<ResultDocument>();
  EXPECT_EQ(back.environment.gpus.at(0).name, "NVIDIA H200");
  EXPECT_EQ(back.runs.size(), 1u);
  j["schema"] = "ddpbench/result/v0";
  EXPECT_THROW(j.get<ResultDocument>(), std::invalid_argument);
  j = doc;
  j["runs"][0].erase("train_time_s");
  EXPECT_THROW(j.get<ResultDocument>(), json::exception);
  j = doc;
  j["runs"][0]["status"] = "great";
  EXPECT_THROW(j.get<ResultDocument>(), std::invalid_argument);
  // A repetition is a round's number: 2.9 was read as round 2, -0.5 as round 0 and 2^63 as a
  // negative one.
  for (const json& repetition : {json(2.9), json(-0.5), json(9223372036854775808ULL), json("3")}) {
    j = doc;
    j["runs"][0]["repetition"] = repetition;
    EXPECT_THROW(j.get<ResultDocument>(), std::exception) << repetition.dump();
  }
  j = doc;
  j["runs"][0]["repetition"] = 7;
  EXPECT_EQ(j.get<ResultDocument>().runs.at(0).repetition, 7);
  // The loader's count of training images, which proves a row's work: -1 and 2.5 were read as a
  // count, and 2^63 as a negative one.
  for (const json& count : {json(-1), json(2.5), json(9223372036854775808ULL), json("50000")}) {
    j = doc;
    j["runs"][0]["train_images"] = count;
    EXPECT_THROW(j.get<ResultDocument>(), std::exception) << count.dump();
  }
  j = doc;
  j["runs"][0]["train_images"] = 300;
  EXPECT_EQ(j.get<ResultDocument>().runs.at(0).train_images, 300);
  j["runs"][0].erase("train_images");
  EXPECT_EQ(j.get<ResultDocument>().runs.at(0).train_images, 0);
  // Every count a row records is whole: 8.5 steps, 2.5 ranks or 512.7 images were read as their
  // floor and passed every check.
  for (const char* key : {"steps", "world_size", "images_trained", "steps_per_epoch", "global_batch", "eval_images",
                          "epochs", "warmup_steps", "peak_memory_bytes"}) {
    j = doc;
    j["runs"][0][key] = 8.5;
    EXPECT_THROW(j.get<ResultDocument>(), std::invalid_argument) << key;
    j["runs"][0][key] = "8";
    EXPECT_THROW(j.get<ResultDocument>(), std::invalid_argument) << key;
    j["runs"][0][key] = 8.0;
    EXPECT_NO_THROW(j.get<ResultDocument>()) << key << ": a whole float is its number";
  }
  // What a writer did not record is left out, never blank: a blank OMP_NUM_THREADS, CPU list or
  // thread count of a finished row is an edited file's, which passed every environment check.
  doc.environment.omp_num_threads = "unset";
  doc.environment.cpu_affinity = "0-1";
  doc.runs[0].threads_per_rank = 2;
  j = doc;
  EXPECT_EQ(j.get<ResultDocument>().environment.omp_num_threads, "unset");
  EXPECT_EQ(j.get<ResultDocument>().runs.at(0).threads_per_rank, 2);
  for (const char* key : {"omp_num_threads", "cpu_affinity"}) {
    json blank = j;
    blank["environment"][key] = "";
    EXPECT_THROW(blank.get<ResultDocument>(), std::invalid_argument) << key;
    blank["environment"].erase(key);
    EXPECT_NO_THROW(blank.get<ResultDocument>()) << key << ": a file from before it was recorded";
  }
  json no_threads = j;
  no_threads["runs"][0]["threads_per_rank"] = 0;
  EXPECT_THROW(no_threads.get<ResultDocument>(), std::invalid_argument);
  no_threads["runs"][0]["status"] = "failed";
  EXPECT_NO_THROW(no_threads.get<ResultDocument>()) << "a row that failed before it counted its threads";
  doc.runs[0].threads_per_rank = 0;
  doc.environment.omp_num_threads.clear();
  EXPECT_FALSE(json(doc)["runs"][0].contains("threads_per_rank"));
  EXPECT_FALSE(json(doc)["environment"].contains("omp_num_threads"));
}

// A traced row's record round-trips; a hand-made one that no run writes is refused on read.
TEST(RunResult, TraceRecordRoundTripsAndRefusesWhatNoRunWrites) {
  RunResult run = sample_run();
  run.trace.first_step = 3;
  run.trace.last_step = 5;
  run.trace.files = {"row.rank0.trace.json"};
  run.trace.crc32 = {4294967295u};
  run.trace.traced_step_time_s = 0.25;
  json j = run;
  const RunResult back = j.get<RunResult>();
  EXPECT_EQ(back.trace.files, run.trace.files);
  EXPECT_EQ(back.trace.crc32, run.trace.crc32);
  EXPECT_DOUBLE_EQ(back.trace.traced_step_time_s, 0.25);
  EXPECT_FALSE(json(sample_run()).contains("trace"));  // untraced rows write none
  for (const auto& [key, bad] : std::vector<std::pair<std::string, json>>{
           {"first_step", -3}, {"first_step", 2.5}, {"files", "row.rank0.trace.json"}, {"crc32", json::array({-1})},
           {"crc32", json::array({4294967296LL})}}) {
    json edited = j;
    edited["trace"][key] = bad;
    EXPECT_THROW(edited.get<RunResult>(), std::invalid_argument) << key << " " << bad.dump();
  }
}

// The sweep's rows/ folder as the HTML report links it: a relative path, never a URL or a root.
TEST(ResultDocument, RowsHrefIsARelativePath) {
  ResultDocument doc;
  doc.sweep = SweepInfo{};
  doc.sweep->rows_href = "../out/rows";
  json j = doc;
  EXPECT_EQ(j.get<ResultDocument>().sweep->rows_href, "../out/rows");
  j["sweep"].erase("rows_href");
  EXPECT_EQ(j.get<ResultDocument>().sweep->rows_href, "rows");  // files from before it
  for (const char* bad : {"javascript:alert(1)", "/etc", "", "a\"b", "a\nb"}) {
    j["sweep"]["rows_href"] = bad;
    EXPECT_THROW(j.get<ResultDocument>(), std::invalid_argument) << bad;
  }
}

TEST(RunResult, TimestampIsIsoUtc) {
  const std::string t = utc_timestamp();
  ASSERT_EQ(t.size(), 20u);
  EXPECT_EQ(t[4], '-');
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t.back(), 'Z');
}

}  // namespace
}  // namespace ddpbench
