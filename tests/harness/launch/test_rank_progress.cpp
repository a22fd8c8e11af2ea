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

// A rank that died by a signal is the victim of another's stall only if it had been waiting
// inside its collective for half the timeout (a watchdog aborts after the timeout); one that
// died just after entering a collective the others had not reached yet is ahead: the cause.
TEST(AdversarialCulprit, ARankThatDiedIsAVictimOnlyAfterWaitingHalfTheTimeout) {
  auto verdict_with = [](double dead_inside_s, bool dead_inside) {
    // Rank 1 died; rank 0 is behind it, alive, between collectives.
    const std::vector<std::optional<RankProgress>> before = {at(10, 57, false, "broadcast", 0.2),
                                                             at(10, 58, dead_inside, "broadcast", dead_inside_s - 1.5)};
    const std::vector<std::optional<RankProgress>> after = {at(13, 57, false, "broadcast", 1.7),
                                                            at(13, 58, dead_inside, "broadcast", dead_inside_s)};
    return blame(before, after, 1.5, -1);
  };
  const ProgressVerdict just_entered = verdict_with(1.6, true);
  ASSERT_EQ(just_entered.blamed, std::vector<int64_t>{0}) << just_entered.text;
  EXPECT_FALSE(died_waiting_for_another(just_entered, 1, 60)) << "it died ahead of rank 0, not waiting for it";
  EXPECT_TRUE(died_waiting_for_another(verdict_with(31, true), 1, 60)) << "waited half the timeout: a victim";
  EXPECT_FALSE(died_waiting_for_another(verdict_with(29, true), 1, 60));
  EXPECT_FALSE(died_waiting_for_another(verdict_with(40, false), 1, 60)) << "not inside a collective";
  EXPECT_FALSE(died_waiting_for_another(verdict_with(40, true), 0, 60)) << "the blamed rank itself";
  EXPECT_FALSE(died_waiting_for_another(verdict_with(40, true), 7, 60)) << "no such rank";
  ProgressVerdict nobody_blamed = verdict_with(40, true);
  nobody_blamed.blamed.clear();
  EXPECT_FALSE(died_waiting_for_another(nobody_blamed, 1, 60));
}

// Rank 1 killed by a signal as it entered collective #68: rank 0, alive, has not reached it,
// which the records read as rank 0 behind. Said after "rank 1 killed by signal 9" that blamed
// the wrong rank (1 of 10 random kills); the sentence follows the killed rank's name only where
// it blames that rank alone.
TEST(AdversarialCulprit, AKilledRanksReasonCarriesNoSentenceBlamingAnother) {
  const std::vector<std::optional<RankProgress>> before = {at(10, 67, false, "allreduce of bucket 0", 0.0),
                                                           at(10, 68, true, "allreduce of bucket 1", 0.0)};
  const std::vector<std::optional<RankProgress>> after = {at(11, 67, false, "allreduce of bucket 0", 0.0),
                                                          at(11, 68, true, "allreduce of bucket 1", 0.0)};
  const ProgressVerdict v = blame(before, after, 1.5, -1);
  ASSERT_EQ(v.blamed, std::vector<int64_t>{0}) << v.text;
  ASSERT_NE(v.text.find("rank 0 is behind, alive: 0.0 s past collective #67"), std::string::npos) << v.text;
  EXPECT_EQ(sentence_for_killed(v, 1), "") << "rank 1 was killed: rank 0 is not the culprit";
  // Where the records blame the killed rank alone (it stopped answering), they say so.
  const std::vector<std::optional<RankProgress>> silent = {at(14, 67, true, "allreduce of bucket 0", 3.0),
                                                           at(11, 67, false, "allreduce of bucket 0", 0.5)};
  const ProgressVerdict stopped = blame(after, silent, 1.5, 0);
  ASSERT_EQ(stopped.blamed, std::vector<int64_t>{1}) << stopped.text;
  EXPECT_EQ(sentence_for_killed(stopped, 1), stopped.text);
  EXPECT_EQ(sentence_for_killed(stopped, 0), "");
  ProgressVerdict nobody = v;
  nobody.blamed.clear();
  EXPECT_EQ(sentence_for_killed(nobody, 1), "") << "every rank alive and none behind blames no killed rank";
}

// A killed rank the records found behind was called "alive" in its own reason ("rank 1 was killed
// by signal 9; the progress records as it died: rank 1 is behind, alive: ...").
TEST(AdversarialCulprit, AKilledRankIsNeverCalledAlive) {
  const std::vector<std::optional<RankProgress>> before = {at(10, 25, true, "broadcast", 0.5),
                                                           at(10, 24, true, "DDP bucket rebuild", 0.4)};
  const std::vector<std::optional<RankProgress>> after = {at(11, 25, true, "broadcast", 0.9),
                                                          at(11, 24, true, "DDP bucket rebuild", 0.8)};
  const ProgressVerdict v = blame(before, after, 1.5, -1);
  ASSERT_EQ(v.blamed, std::vector<int64_t>{1}) << v.text;
  ASSERT_NE(v.text.find("rank 1 is behind, alive: still in collective #24"), std::string::npos) << v.text;
  const std::string killed = sentence_for_killed(v, 1);
  EXPECT_EQ(killed.find("alive"), std::string::npos) << killed;
  EXPECT_EQ(killed.rfind("rank 1 was behind: still in collective #24", 0), 0u) << killed;
}

// Three ranks, rank 2 stuck before a broadcast: rank 1 received it and waits in the next
// collective, the root (rank 0) still waits in the broadcast for rank 2. Counting collectives
// alone blamed rank 0 too; it waits, so only rank 2 is behind. And a rank still inside a
// collective that every other rank has left is behind though it entered it.
TEST(AdversarialCulprit, TheRootOfABroadcastThatStillWaitsIsNotBlamed) {
  const std::vector<std::optional<RankProgress>> before = {RankProgress{10, 25, 25, true, 10.0, "broadcast"},
                                                           RankProgress{10, 26, 26, true, 9.9, "SyncBN forward"},
                                                           RankProgress{10, 24, 24, false, 10.1, "allreduce of bucket 1"}};
  const std::vector<std::optional<RankProgress>> after = {RankProgress{13, 25, 25, true, 11.5, "broadcast"},
                                                          RankProgress{13, 26, 26, true, 11.4, "SyncBN forward"},
                                                          RankProgress{13, 24, 24, false, 11.6, "allreduce of bucket 1"}};
  const ProgressVerdict v = blame(before, after, 1.5, -1);
  EXPECT_EQ(v.blamed, std::vector<int64_t>{2}) << v.text;
  EXPECT_EQ(v.text, "rank 2 is behind, alive: 11.6 s past collective #24 (allreduce of bucket 1), and never reached "
                    "collective #26, where rank 1 is in collective #26 (SyncBN forward) for 11.4 s");
  const std::vector<std::optional<RankProgress>> left_behind = {RankProgress{13, 25, 25, true, 3.0, "broadcast"},
                                                                RankProgress{13, 25, 25, true, 3.0, "broadcast"},
                                                                RankProgress{13, 24, 24, true, 9.0, "allreduce of bucket 0"}};
  std::vector<std::optional<RankProgress>> moved = left_behind;
  for (auto& r : moved) r->beats += 3;
  const ProgressVerdict x = blame(left_behind, moved, 1.5, -1);
  EXPECT_EQ(x.blamed, std::vector<int64_t>{2}) << x.text;
  EXPECT_NE(x.text.find("rank 2 is behind, alive: still in collective #24 (allreduce of bucket 0) for 9.0 s, which the "
                        "others have left"),
            std::string::npos)
      << x.text;
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
