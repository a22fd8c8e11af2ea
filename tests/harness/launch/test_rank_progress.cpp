#include <gtest/gtest.h>

#include "harness/launch/rank_progress.hpp"

namespace ddpbench {
namespace {

RankProgress at(int64_t beats, int64_t entered, bool inside, const std::string& phase, double for_s) {
  return RankProgress{beats, entered, entered, inside, for_s, phase};
}

TEST(RankProgress, RecordsRoundTripThroughTheStoresText) {
  const RankProgress p{12, 58, 57, true, 3.25, "allreduce of bucket 3; with a ; in it"};
  const auto text = format_progress(p);
  EXPECT_EQ(text, "beats=12;entered=58;at=57;inside=1;for_s=3.250;phase=allreduce of bucket 3; with a ; in it");
  const auto back = parse_progress(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->beats, 12);
  EXPECT_EQ(back->entered, 58);
  EXPECT_EQ(back->at, 57);
  EXPECT_TRUE(back->inside);
  EXPECT_DOUBLE_EQ(back->for_s, 3.25);
  EXPECT_EQ(back->phase, p.phase);
  for (const char* junk : {"", "beats=1", "beats=x;entered=1;at=1;inside=0;for_s=1;phase=",
                           "entered=1;beats=1;at=1;inside=0;for_s=1;phase="}) {
    EXPECT_FALSE(parse_progress(junk).has_value()) << junk;
  }
}

// Progress, not liveness: the rank whose count is behind is to blame, alive or not.
TEST(RankProgress, TheRankBehindIsBlamedNotTheOneWaiting) {
  const std::vector<std::optional<RankProgress>> before = {at(10, 58, true, "SyncBN forward", 8.0),
                                                           at(20, 57, false, "broadcast", 8.1)};
  const std::vector<std::optional<RankProgress>> after = {at(13, 58, true, "SyncBN forward", 9.5),
                                                          at(23, 57, false, "broadcast", 9.6)};
  const ProgressVerdict v = blame(before, after, 1.5, 0);
  EXPECT_EQ(v.blamed, std::vector<int64_t>{1});
  EXPECT_EQ(v.text, "rank 1 is behind, alive: 9.6 s past collective #57 (broadcast), and never reached collective "
                    "#58, where rank 0 is in collective #58 (SyncBN forward) for 9.5 s");
}

TEST(RankProgress, ASilentRankIsStoppedAndAMissingOneNeverJoined) {
  const std::vector<std::optional<RankProgress>> before = {at(10, 40, true, "SyncBN backward", 5.0),
                                                           at(7, 40, true, "SyncBN backward", 4.0), std::nullopt};
  const std::vector<std::optional<RankProgress>> after = {at(13, 40, true, "SyncBN backward", 6.5),
                                                          at(7, 40, true, "SyncBN backward", 4.0), std::nullopt};
  const ProgressVerdict v = blame(before, after, 1.5, 0);
  EXPECT_EQ(v.blamed, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(v.text, "rank 1 stopped answering (no heartbeat for 1.5 s; at its last it was in collective #40 (SyncBN "
                    "backward) for 4.0 s), rank 2 never joined");
  // The reader itself is never silent to itself.
  EXPECT_EQ(blame(before, after, 1.5, 1).blamed, std::vector<int64_t>{2});
  // Without an earlier reading, silence cannot be told: only progress counts.
  EXPECT_EQ(blame({}, after, 0, -1).blamed, std::vector<int64_t>{2});
}

TEST(RankProgress, WhenEveryRankIsThereTheCollectiveItselfIsTheSuspect) {
  const std::vector<std::optional<RankProgress>> before = {at(1, 9, true, "allreduce of bucket 2", 3.0),
                                                           at(1, 9, true, "allreduce of bucket 2", 3.0)};
  const std::vector<std::optional<RankProgress>> after = {at(4, 9, true, "allreduce of bucket 2", 4.5),
                                                          at(4, 9, true, "allreduce of bucket 2", 4.5)};
  const ProgressVerdict v = blame(before, after, 1.5, 0);
  EXPECT_TRUE(v.blamed.empty());
  EXPECT_EQ(v.text, "every rank is alive and none is behind (rank 0 is in collective #9 (allreduce of bucket 2) for "
                    "4.5 s): the collective itself did not complete (the network, or the backend)");
}

}  // namespace
}  // namespace ddpbench
