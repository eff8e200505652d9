#include "achunk/chunk/achunk_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace achunk {
namespace {

constexpr int64_t CHUNK = ACHUNK_ALIGN;

// The list never touches a chunk beyond its header, so plain headers stand in for chunks.
std::vector<AChunk> make_chunks(int n) {
  std::vector<AChunk> chunks(n);
  for (AChunk& c : chunks) c.charged_ = CHUNK;
  return chunks;
}

TEST(AChunkListTest, PopTakesMostRecentlyCached) {
  auto chunks = make_chunks(3);
  AChunkList list;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(list.push(&chunks[i], 100 + i));
  EXPECT_EQ(list.pop(), &chunks[2]);
  EXPECT_EQ(list.pop(), &chunks[1]);
  EXPECT_EQ(list.pop(), &chunks[0]);
  EXPECT_EQ(list.pop(), nullptr);
  EXPECT_EQ(list.pushes(), 3);
  EXPECT_EQ(list.pops(), 3);
  EXPECT_EQ(list.hold(), 0);
}

TEST(AChunkListTest, PushStampsCacheTs) {
  auto chunks = make_chunks(1);
  AChunkList list;
  ASSERT_TRUE(list.push(&chunks[0], 4242));
  EXPECT_EQ(chunks[0].cache_ts_, 4242);
  EXPECT_EQ(list.oldest_ts(), 4242);
}

TEST(AChunkListTest, PopExpiredTakesOldestOnlyOnceTtlHasPassed) {
  auto chunks = make_chunks(2);
  AChunkList list;
  ASSERT_TRUE(list.push(&chunks[0], 1000));
  ASSERT_TRUE(list.push(&chunks[1], 2000));
  EXPECT_EQ(list.pop_expired(1000 + 499, 500), nullptr);
  EXPECT_EQ(list.pop_expired(1000 + 500, 500), &chunks[0]);
  EXPECT_EQ(list.oldest_ts(), 2000);
  EXPECT_EQ(list.pop_expired(2000 + 499, 500), nullptr);
  EXPECT_EQ(list.pop_expired(2000 + 500, 500), &chunks[1]);
  EXPECT_EQ(list.oldest_ts(), AChunkList::EMPTY_TS);
  EXPECT_TRUE(list.empty());
}

TEST(AChunkListTest, StampsStayOrderedWhenClockReadsRaceTheLock) {
  auto chunks = make_chunks(2);
  AChunkList list;
  ASSERT_TRUE(list.push(&chunks[0], 2000));
  ASSERT_TRUE(list.push(&chunks[1], 1500));  // read the clock earlier, locked later
  EXPECT_EQ(chunks[1].cache_ts_, 2000);
  EXPECT_EQ(list.pop_expired(2000, 0), &chunks[0]);
}

TEST(AChunkListTest, CapZeroRefusesEverything) {
  auto chunks = make_chunks(1);
  AChunkList list(0);
  EXPECT_FALSE(list.push(&chunks[0], 1));
  EXPECT_EQ(list.count(), 0);
  EXPECT_EQ(list.hold(), 0);
}

TEST(AChunkListTest, CapOfOneChunkHoldsExactlyOne) {
  auto chunks = make_chunks(2);
  AChunkList list(CHUNK);
  EXPECT_TRUE(list.push(&chunks[0], 1));
  EXPECT_FALSE(list.push(&chunks[1], 2));
  EXPECT_EQ(list.count(), 1);
  EXPECT_EQ(list.hold(), CHUNK);
}

TEST(AChunkListTest, MiddleCapAndRuntimeChange) {
  auto chunks = make_chunks(5);
  AChunkList list(3 * CHUNK + CHUNK / 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(list.push(&chunks[i], i));
  EXPECT_FALSE(list.push(&chunks[3], 3));
  list.set_max_hold(INT64_MAX);
  EXPECT_TRUE(list.push(&chunks[3], 3));
  EXPECT_EQ(list.count(), 4);
}

TEST(AChunkListTest, PopallDetachesEverythingOldestFirst) {
  auto chunks = make_chunks(3);
  AChunkList list;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(list.push(&chunks[i], i));
  AChunk* chain = list.popall();
  int n = 0;
  for (AChunk* c = chain; c != nullptr; c = c->next_) EXPECT_EQ(c, &chunks[n++]);
  EXPECT_EQ(n, 3);
  EXPECT_EQ(list.count(), 0);
  EXPECT_EQ(list.hold(), 0);
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.pop(), nullptr);
  // The list is usable again after popall.
  ASSERT_TRUE(list.push(&chunks[0], 9));
  EXPECT_EQ(list.pop(), &chunks[0]);
}

TEST(AChunkListTest, PopFromMiddleStateKeepsLinksConsistent) {
  auto chunks = make_chunks(4);
  AChunkList list;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(list.push(&chunks[i], 10 * i));
  EXPECT_EQ(list.pop_oldest(), &chunks[0]);
  EXPECT_EQ(list.pop(), &chunks[3]);
  EXPECT_EQ(list.oldest_ts(), 10);
  EXPECT_EQ(list.pop_oldest(), &chunks[1]);
  EXPECT_EQ(list.pop(), &chunks[2]);
  EXPECT_TRUE(list.empty());
}

}  // namespace
}  // namespace achunk
