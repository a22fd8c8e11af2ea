// Why a PyTorch twin's rank failed (pytorch_failure_reason in harness/runner/pytorch_rank.hpp),
// from the progress records its Python ranks keep in the launcher's store: the hung rank is
// named, never the rank that timed out waiting; with no records, no rank is blamed. The whole
// twin through the binary: PyTorchReference.ATwinWhoseRankHangsNamesTheHungRankByItsProgress.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "harness/distributed/run_store.hpp"
#include "harness/launch/rank_progress.hpp"
#include "harness/runner/pytorch_rank.hpp"

namespace ddpbench {
namespace {

c10::intrusive_ptr<c10d::Store> run_store(const RankEnvironment& env) {
  return c10::make_intrusive<c10d::PrefixStore>(run_store_prefix(0), open_run_store(env, std::chrono::seconds(5)));
}

void publish(c10d::Store& store, int64_t rank, RankProgress record) {
  const std::string text = format_progress(record);
  store.set(progress_key(rank), std::vector<uint8_t>(text.begin(), text.end()));
}

// A rank alive as long as it lives: its record published every 100 ms, its beats moving.
class BeatingRank {
 public:
  BeatingRank(const RankEnvironment& env, int64_t rank, RankProgress record)
      : thread_([this, store = run_store(env), rank, record]() mutable {
          while (beating_) {
            ++record.beats;
            publish(*store, rank, record);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  ~BeatingRank() {
    beating_ = false;
    thread_.join();
  }

 private:
  std::atomic<bool> beating_{true};
  std::thread thread_;
};

struct ServedWorld {
  LauncherStore served{"127.0.0.1", 0, 2};
  RankEnvironment env;
  ServedWorld() {
    env.world_size = 2;
    env.master_port = served.port();
    env.store_served_by_launcher = true;
  }
};

// Rank 0's Python has ended inside step 3 (its last record: inside collective #4 for 10 s); rank
// 1's, alive and beating, never entered it: rank 1 is named, rank 0 only waited.
TEST(PyTorchFailureReason, TheRankTheRecordsFindBehindIsNamedNotTheOneThatTimedOut) {
  ServedWorld world;
  publish(*run_store(world.env), 0, RankProgress{20, 4, 4, true, 10.0, "training step 3"});
  const BeatingRank rank1(world.env, 1, RankProgress{0, 3, 3, false, 9.0, "training step 2"});
  const std::string reason = pytorch_failure_reason(world.env, "exited with status 1: RuntimeError: timed out");
  EXPECT_EQ(reason.rfind("failed on rank 0: rank 1 is behind, alive: ", 0), 0u) << reason;
  EXPECT_NE(reason.find("never reached collective #4, where rank 0 is in collective #4 (training step 3)"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("; rank 0's own error: exited with status 1: RuntimeError: timed out"), std::string::npos)
      << reason;
}

// Records that blame no other rank, or none at all (no launcher serves a store), leave the error
// plainly the rank's own, blaming no rank.
TEST(PyTorchFailureReason, WithoutRecordsThatBlameAnotherTheErrorIsTheRanksOwn) {
  RankEnvironment alone;
  alone.world_size = 2;
  EXPECT_EQ(pytorch_failure_reason(alone, "exited with status 1: RuntimeError: timed out"),
            "rank 0's own error, no other rank blamed (no progress records to read: PyTorch's ranks keep them only "
            "where a launcher serves the run's store): exited with status 1: RuntimeError: timed out");
  alone.world_size = 1;
  EXPECT_EQ(pytorch_failure_reason(alone, "exited with status 1: ValueError"), "exited with status 1: ValueError");
  // Both ranks inside the same step, the other alive: neither is behind.
  ServedWorld world;
  publish(*run_store(world.env), 0, RankProgress{20, 4, 4, true, 10.0, "training step 3"});
  const BeatingRank rank1(world.env, 1, RankProgress{0, 4, 4, true, 10.0, "training step 3"});
  const std::string reason = pytorch_failure_reason(world.env, "exited with status 1: boom");
  EXPECT_EQ(reason.rfind("rank 0's own error, no other rank blamed (the ranks' progress records blame none): ", 0), 0u)
      << reason;
}

}  // namespace
}  // namespace ddpbench
