// BlockSet's span resizing (block_set_resize.cc): growth forward and backward, tail
// trimming, and the tails dedicated chunks keep until idle, as a big object's realloc
// uses them.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>

#include "alloc/block/block_set.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class BlockSetResizeTest : public ChunkMgrTest {
 protected:
  DirectChunkSource source_{mgr_};
};

// Every block of `head`'s span leads back to it.
void expect_span(ABlock* head, int nblocks) {
  ASSERT_EQ(head->nblocks_, nblocks);
  EXPECT_TRUE(head->in_use());
  char* data = static_cast<char*>(block_data(head));
  for (int i = 0; i < nblocks; ++i) {
    EXPECT_EQ(BlockSet::ptr2block(data + i * ABLOCK_SIZE + 100), head) << "block " << i;
  }
}

// Frees every span; then the set holds nothing (each test's spans share one chunk).
void free_all(BlockSet& set, std::initializer_list<ABlock*> spans) {
  for (ABlock* s : spans) set.free_block(s);
  EXPECT_EQ(set.used(), 0);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(BlockSetResizeTest, ASpanGrowsInPlaceIntoTheFreeSpanAfterIt) {
  BlockSet set(source_);
  ABlock* a = set.alloc_block(2 * ABLOCK_SIZE);
  ABlock* b = set.alloc_block(3 * ABLOCK_SIZE);
  ABlock* c = set.alloc_block(ABLOCK_SIZE);
  std::memset(block_data(a), 7, 2 * ABLOCK_SIZE);
  // Its neighbour is in use: nothing changes.
  EXPECT_FALSE(set.grow_block(a, 3 * ABLOCK_SIZE));
  EXPECT_EQ(a->nblocks_, 2);
  set.free_block(b);                                 // a free span of 3 right after a
  EXPECT_FALSE(set.grow_block(a, 6 * ABLOCK_SIZE));  // needs 4 more: too short
  EXPECT_EQ(a->nblocks_, 2);
  const int64_t used = set.used();
  ASSERT_TRUE(set.grow_block(a, 4 * ABLOCK_SIZE - 100));
  EXPECT_EQ(a->nblocks_, 4);
  EXPECT_EQ(set.used(), used + 2 * ABLOCK_SIZE);
  EXPECT_EQ(static_cast<char*>(block_data(a))[ABLOCK_SIZE], 7);  // nothing moved
  // Every block of the grown span leads to its head; the one block left is a free span.
  char* data = static_cast<char*>(block_data(a));
  EXPECT_EQ(BlockSet::ptr2block(data + 3 * ABLOCK_SIZE + 5), a);
  ABlock* d = set.alloc_block(ABLOCK_SIZE);
  EXPECT_EQ(static_cast<char*>(block_data(d)), data + 4 * ABLOCK_SIZE);
  EXPECT_EQ(BlockSet::ptr2block(block_data(d)), d);
  EXPECT_TRUE(set.grow_block(a, ABLOCK_SIZE));  // already that big
  free_all(set, {a, d, c});                     // the grown span coalesces as a whole
}

TEST_F(BlockSetResizeTest, TheFreeTailAGrowLeavesKeepsTheFreeSpansState) {
  source_.set_span_idle_ms(-1);  // only the calls below wash
  BlockSet set(source_);
  ABlock* a = set.alloc_block(ABLOCK_SIZE);
  ABlock* b = set.alloc_block(4 * ABLOCK_SIZE);
  ABlock* c = set.alloc_block(ABLOCK_SIZE);
  std::memset(block_data(b), 1, 4 * ABLOCK_SIZE);
  set.free_block(b);
  EXPECT_EQ(set.wash_free_spans(), 4 * ABLOCK_SIZE);
  ASSERT_TRUE(set.grow_block(a, 2 * ABLOCK_SIZE));  // the washed tail: 3 blocks
  EXPECT_TRUE(set.dirty_list_consistent());
  EXPECT_EQ(set.wash_free_spans(), 0);  // still washed
  bool zeroed = false;
  ABlock* tail = set.alloc_block(3 * ABLOCK_SIZE, &zeroed);
  EXPECT_EQ(tail, a + 2);
  EXPECT_TRUE(zeroed);
  std::memset(block_data(tail), 1, 3 * ABLOCK_SIZE);
  set.free_block(tail);  // dirty since now
  clock_.advance_us(10'000'000);
  ASSERT_TRUE(set.grow_block(a, 3 * ABLOCK_SIZE));  // a dirty tail of 2, freed 10 s ago
  EXPECT_TRUE(set.dirty_list_consistent());
  EXPECT_EQ(set.wash_stale_spans(15'000'000), 0);
  clock_.advance_us(5'000'000);
  EXPECT_EQ(set.wash_stale_spans(15'000'000), 2 * ABLOCK_SIZE);
  free_all(set, {a, c});
}

TEST_F(BlockSetResizeTest, ASpanGrowsBackIntoTheWholeFreeSpanBeforeIt) {
  BlockSet set(source_);
  ABlock* before = set.alloc_block(3 * ABLOCK_SIZE);
  ABlock* a = set.alloc_block(2 * ABLOCK_SIZE);
  ABlock* after = set.alloc_block(ABLOCK_SIZE);
  std::memcpy(a->owner_area_, "owner state", 12);
  char* old_data = static_cast<char*>(block_data(a));
  old_data[5] = 42;
  // Nothing free before it: nothing changes.
  EXPECT_EQ(set.grow_block_back(a, 4 * ABLOCK_SIZE), nullptr);
  EXPECT_EQ(a->nblocks_, 2);
  set.free_block(before);                                       // a free span of 3 right before a
  EXPECT_EQ(set.grow_block_back(a, 6 * ABLOCK_SIZE), nullptr);  // 5 blocks in all: short
  expect_span(a, 2);
  const int64_t used = set.used();
  ABlock* head = set.grow_block_back(a, 4 * ABLOCK_SIZE - 100);
  ASSERT_EQ(head, before);  // the free span's head, whole: 3 + 2 blocks
  expect_span(head, 5);
  EXPECT_EQ(std::memcmp(head->owner_area_, "owner state", 12), 0);
  EXPECT_EQ(set.used(), used + 3 * ABLOCK_SIZE);
  EXPECT_EQ(old_data[5], 42);  // the caller moves its bytes: nothing moved them
  EXPECT_TRUE(set.dirty_list_consistent());
  free_all(set, {head, after});
}

TEST_F(BlockSetResizeTest, GrowingBackAlsoTakesTheFrontOfTheFreeSpanAfter) {
  BlockSet set(source_);
  ABlock* keep = set.alloc_block(ABLOCK_SIZE);
  ABlock* before = set.alloc_block(ABLOCK_SIZE);
  ABlock* a = set.alloc_block(ABLOCK_SIZE);
  ABlock* after = set.alloc_block(3 * ABLOCK_SIZE);
  ABlock* last = set.alloc_block(ABLOCK_SIZE);
  set.free_block(before);
  set.free_block(after);
  // 1 before + 1 + 3 after = 5 blocks: 6 do not fit, 4 do.
  EXPECT_EQ(set.grow_block_back(a, 6 * ABLOCK_SIZE), nullptr);
  expect_span(a, 1);
  ABlock* head = set.grow_block_back(a, 4 * ABLOCK_SIZE);
  ASSERT_EQ(head, before);
  expect_span(head, 4);
  // The free span after keeps its last block, as a span of its own.
  ABlock* one = set.alloc_block(ABLOCK_SIZE);
  EXPECT_EQ(block_index(one), block_index(head) + 4);
  EXPECT_EQ(block_index(last), block_index(one) + 1);
  free_all(set, {keep, head, one, last});
}

TEST_F(BlockSetResizeTest, AChunksFirstSpanAndADedicatedChunkDoNotGrowBack) {
  BlockSet set(source_);
  ABlock* first = set.alloc_block(ABLOCK_SIZE);
  EXPECT_EQ(block_index(first), 0);
  EXPECT_EQ(set.grow_block_back(first, 2 * ABLOCK_SIZE), nullptr);
  ABlock* dedicated = set.alloc_block(3 * MB);
  ASSERT_TRUE(dedicated->dedicated());
  EXPECT_EQ(set.grow_block_back(dedicated, 4 * MB), nullptr);
  set.shrink_block(dedicated, ABLOCK_SIZE);  // a dedicated chunk stays whole
  EXPECT_TRUE(dedicated->dedicated());
  free_all(set, {dedicated, first});
}

TEST_F(BlockSetResizeTest, ShrinkingFreesTheTailWhichJoinsTheFreeSpanAfter) {
  BlockSet set(source_);
  ABlock* a = set.alloc_block(5 * ABLOCK_SIZE);
  ABlock* b = set.alloc_block(2 * ABLOCK_SIZE);
  ABlock* c = set.alloc_block(ABLOCK_SIZE);
  set.free_block(b);
  const int64_t used = set.used();
  set.shrink_block(a, 2 * ABLOCK_SIZE + 1);  // keeps 3 blocks
  expect_span(a, 3);
  EXPECT_EQ(set.used(), used - 2 * ABLOCK_SIZE);
  EXPECT_TRUE(set.dirty_list_consistent());
  // The 2 trimmed blocks and b's 2 are one free span of 4, right after a.
  ABlock* four = set.alloc_block(4 * ABLOCK_SIZE);
  EXPECT_EQ(block_index(four), block_index(a) + 3);
  EXPECT_EQ(block_index(c), block_index(four) + 4);
  set.shrink_block(four, 4 * ABLOCK_SIZE);  // already that small: nothing changes
  expect_span(four, 4);
  free_all(set, {a, four, c});
}

TEST_F(BlockSetResizeTest, ADedicatedChunkIsResizedThroughTheSourceAndStaysOnTheList) {
  BlockSet set(source_);
  ABlock* small = set.alloc_block(ABLOCK_SIZE);  // a chunk of spans, then the dedicated one
  ABlock* big = set.alloc_block(3 * MB);
  ASSERT_TRUE(big->dedicated());
  std::memset(block_data(big), 9, 3 * MB);
  EXPECT_EQ(set.resize_dedicated(small, 2 * ABLOCK_SIZE), nullptr);  // not dedicated
  const int64_t hold = set.hold();
  const int64_t used = set.used();
  ABlock* grown = set.resize_dedicated(big, 12 * MB);
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(grown->dedicated());
  EXPECT_EQ(BlockSet::span_bytes(grown), 12 * MB);
  EXPECT_EQ(static_cast<char*>(block_data(grown))[3 * MB - 1], 9);
  EXPECT_EQ(BlockSet::ptr2block(block_data(grown)), grown);
  const int64_t delta = chunk_hold_size(12 * MB) - chunk_hold_size(3 * MB);
  EXPECT_EQ(set.hold(), hold + delta);
  EXPECT_EQ(set.used(), used + delta);
  // On the set's chunk list once, at its new place.
  int visits = 0;
  set.for_each_used_span([&](ABlock* b) { visits += b == grown ? 1 : 0; });
  EXPECT_EQ(visits, 1);
  // A failure changes nothing.
  os_.fail_next_resizes(1);
  EXPECT_EQ(set.resize_dedicated(grown, 40 * MB), nullptr);
  EXPECT_EQ(set.hold(), hold + delta);
  visits = 0;
  set.for_each_used_span([&](ABlock* b) { visits += b == grown ? 1 : 0; });
  EXPECT_EQ(visits, 1);
  ABlock* shrunk = set.resize_dedicated(grown, 5 * MB);
  ASSERT_NE(shrunk, nullptr);
  EXPECT_EQ(set.used(), used + chunk_hold_size(5 * MB) - chunk_hold_size(3 * MB));
  free_all(set, {small, shrunk});
  expect_consistent();
}

// A dedicated chunk shrunk keeps its mapping's tail on the slack list; the tails go back
// oldest first once no resize touched them for the span idle time, on the set's own frees
// as by a wash, and a freed chunk leaves the list. A tail is the whole 2 MiB units past
// the request, unmapped, and the pages of its last unit past it, released: a buffer
// shrunk to a few KiB keeps no more than its pages.
TEST_F(BlockSetResizeTest, ShrunkDedicatedChunksKeepTheirTailsUntilIdle) {
  BlockSet set(source_);
  ABlock* a = set.alloc_block(9 * MB);
  ABlock* b = set.alloc_block(9 * MB);
  ABlock* c = set.alloc_block(9 * MB);
  ASSERT_TRUE(a->dedicated() && b->dedicated() && c->dedicated());
  std::memset(block_data(a), 7, 3 * MB + 512 * 1024);
  a = set.resize_dedicated(a, 3 * MB);
  clock_.advance_ms(400);
  b = set.resize_dedicated(b, 3 * MB);
  c = set.resize_dedicated(c, 3 * MB);
  EXPECT_EQ(set.slack_chunks(), 3);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(AChunk::ptr2chunk(a)->aligned(), 10 * MB);
  // Grown back within its mapping: still listed, since the pages past its request may
  // have been written before it shrank.
  c = set.resize_dedicated(c, 9 * MB);
  EXPECT_EQ(set.slack_chunks(), 3);
  // A freed chunk leaves the list with its tail (the cache keeps its whole mapping).
  set.free_block(c);
  EXPECT_EQ(set.slack_chunks(), 2);
  clock_.advance_ms(700);  // a: 1.1 s idle, b: 0.7 s
  // The 4 MiB the request's units map, less its pages.
  auto last_unit_tail = [](ABlock* x) {
    return 4 * MB -
           align_up(AChunk::ptr2chunk(x)->alloc_bytes_ + ACHUNK_HEADER_SIZE, ACHUNK_PAGE_SIZE);
  };
  ASSERT_GT(last_unit_tail(a), 512 * 1024);
  const int64_t released = os_.released_bytes();
  ABlock* s = set.alloc_block(ABLOCK_SIZE);
  set.free_block(s);  // the free's look: a's tail only
  EXPECT_EQ(set.slack_chunks(), 1);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(os_.released_bytes(), released + last_unit_tail(a));
  EXPECT_EQ(AChunk::ptr2chunk(a)->aligned(), 4 * MB);
  EXPECT_EQ(static_cast<char*>(block_data(a))[3 * MB - 1], 7);
  EXPECT_EQ(static_cast<char*>(block_data(a))[3 * MB + 256 * 1024], 0);  // released
  EXPECT_EQ(BlockSet::ptr2block(block_data(a)), a);
  // b's, asked for by a wash.
  EXPECT_EQ(set.trim_idle_slack(clock_.now_us()), 6 * MB + last_unit_tail(b));
  EXPECT_EQ(set.slack_chunks(), 0);
  EXPECT_EQ(mgr_.get_stats(false).slack_trims, 2);
  free_all(set, {a, b});
  expect_consistent();
}

// Stale tails go back one a free, oldest first, so no free pays for every tail at once.
TEST_F(BlockSetResizeTest, AFreeUnmapsOneStaleTailAndTheNextFreesTheRest) {
  BlockSet set(source_);
  std::vector<ABlock*> big;
  for (int i = 0; i < 3; ++i) {
    ABlock* b = set.alloc_block(9 * MB);
    ASSERT_TRUE(b != nullptr && b->dedicated());
    big.push_back(set.resize_dedicated(b, 3 * MB));
  }
  EXPECT_EQ(set.slack_chunks(), 3);
  clock_.advance_ms(2'000);
  for (int64_t left : {2, 1, 0}) {
    set.free_block(set.alloc_block(ABLOCK_SIZE));
    EXPECT_EQ(set.slack_chunks(), left);
    EXPECT_EQ(mgr_.get_stats(false).slack_trims, 3 - left);
  }
  free_all(set, {big[0], big[1], big[2]});
  expect_consistent();
}

}  // namespace
}  // namespace achunk::testing
