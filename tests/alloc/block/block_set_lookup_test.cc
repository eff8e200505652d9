// BlockSet::Lookup: spans whose inner blocks hold no distance to their head are still
// found from every block by ptr2block, and taking one writes nothing into them.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "alloc/block/block_set.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

using Lookup = BlockSet::Lookup;

class BlockSetLookupTest : public ChunkMgrTest {
 protected:
  DirectChunkSource source_{mgr_};
};

char* block_at(ABlock* span, int i) {
  return static_cast<char*>(block_data(span)) + i * ABLOCK_SIZE;
}

// Taking a HEAD_BLOCK span is O(1) in its length: its inner blocks keep what they held.
TEST_F(BlockSetLookupTest, AHeadBlockSpanWritesNothingIntoItsInnerBlocks) {
  BlockSet set(source_);
  ABlock* keep = set.alloc_block(ABLOCK_SIZE);  // holds the chunk while the spans come and go
  ABlock* a = set.alloc_block(100 * ABLOCK_SIZE);
  ASSERT_NE(a, nullptr);
  set.free_block(a);
  for (int i = 1; i < 100; ++i) a[i].nblocks_ = 12345;  // a marker no span writes
  ABlock* b = set.alloc_block(100 * ABLOCK_SIZE, nullptr, Lookup::HEAD_BLOCK);
  ASSERT_EQ(b, a);  // the same free span, best fit
  for (int i = 1; i < 100; ++i) ASSERT_EQ(b[i].nblocks_, 12345) << i;
  // The markers name no head that covers them: the span bits find the span.
  EXPECT_EQ(BlockSet::ptr2block(block_at(b, 50)), b);
  set.free_block(b);
  ABlock* c = set.alloc_block(100 * ABLOCK_SIZE);  // EVERY_BLOCK writes them all
  ASSERT_EQ(c, a);
  for (int i = 1; i < 100; ++i) ASSERT_EQ(c[i].nblocks_, -i) << i;
  set.free_block(c);
  set.free_block(keep);
}

// Stale distances in a HEAD_BLOCK span's inner blocks name a head in use before it, a
// former head inside it, or a former head's own length: each lookup still finds it.
TEST_F(BlockSetLookupTest, StaleDistancesNeverNameAnotherSpan) {
  BlockSet set(source_);
  ABlock* whole = set.alloc_block(8 * ABLOCK_SIZE);
  ABlock* rest = set.alloc_block(ABLOCK_SIZE);   // keeps the chunk
  set.free_block(whole);                         // inner blocks 1-7 name block 0
  ABlock* w = set.alloc_block(2 * ABLOCK_SIZE);  // blocks 0-1, in use
  // Blocks 2-4, keeping the distances to block 0; block 5 is a head next.
  ABlock* x = set.alloc_block(3 * ABLOCK_SIZE, nullptr, Lookup::HEAD_BLOCK);
  ABlock* y = set.alloc_block(3 * ABLOCK_SIZE);  // blocks 5-7
  ASSERT_EQ(x, w + 2);
  ASSERT_EQ(y, w + 5);
  set.free_block(x);
  set.free_block(y);  // merged: block 5 is no head now, its length stays
  ABlock* s = set.alloc_block(6 * ABLOCK_SIZE, nullptr, Lookup::HEAD_BLOCK);
  ASSERT_EQ(s, w + 2);
  EXPECT_EQ(s[1].nblocks_, -3);  // names w, which ends before it
  EXPECT_EQ(s[3].nblocks_, 3);   // y's old length
  EXPECT_EQ(s[4].nblocks_, -1);  // names y's old head
  for (int i = 0; i < 6; ++i) EXPECT_EQ(BlockSet::ptr2block(block_at(s, i) + 100), s) << i;
  EXPECT_EQ(BlockSet::ptr2block(block_data(w)), w);
  // mark_inner makes one block's lookup a single load again.
  BlockSet::mark_inner(s, block_at(s, 4) + 8);
  EXPECT_EQ(s[4].nblocks_, -4);
  EXPECT_EQ(BlockSet::span_head(AChunk::ptr2chunk(s), block_index(s) + 4), block_index(s));
  set.free_block(s);
  set.free_block(w);
  set.free_block(rest);
}

// A dedicated chunk taken HEAD_BLOCK: a pointer anywhere in its first 2 MiB, and past
// them in the clamped last block, finds it.
TEST_F(BlockSetLookupTest, ADedicatedHeadBlockSpanIsFoundFromItsLastBlock) {
  BlockSet set(source_);
  ABlock* d = set.alloc_block(5 * MB, nullptr, Lookup::HEAD_BLOCK);
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->dedicated());
  char* data = static_cast<char*>(block_data(d));
  for (int64_t off : {int64_t{0}, ABLOCK_SIZE * 7 + 5, MB, ACHUNK_SIZE - ACHUNK_HEADER_SIZE - 1}) {
    EXPECT_EQ(BlockSet::ptr2block(data + off), d) << off;
  }
  set.free_block(d);
}

// Spans of both kinds taken and freed at random, with washes splitting and merging the
// free ones: from every block of every live span, ptr2block finds that span.
TEST_F(BlockSetLookupTest, RandomSpansOfBothKindsAreFoundFromEveryBlock) {
  BlockSet set(source_);
  std::mt19937 rng(7);
  std::map<ABlock*, int> live;  // span -> blocks in its chunk's first 2 MiB
  for (int step = 0; step < 6000; ++step) {
    if (live.size() < 60 && rng() % 2 == 0) {
      const int64_t bytes = rng() % 16 == 0 ? 1 + rng() % (4 * MB) : 1 + rng() % (60 * ABLOCK_SIZE);
      const Lookup lookup = rng() % 2 == 0 ? Lookup::HEAD_BLOCK : Lookup::EVERY_BLOCK;
      ABlock* b = set.alloc_block(bytes, nullptr, lookup);
      ASSERT_NE(b, nullptr);
      live[b] = b->dedicated() ? BLOCKS_PER_CHUNK : b->nblocks_;
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      set.free_block(it->first);
      live.erase(it);
    }
    if (step % 100 == 0) {
      clock_.advance_us(2'000'000);
      set.wash_stale_spans(1'000'000);
    }
    if (step % 10 != 0) continue;
    for (const auto& [b, n] : live) {
      for (int i = 0; i < n; ++i) {
        char* p = block_at(b, i) + ABLOCK_SIZE / 2;
        if (AChunk::ptr2chunk(p) != AChunk::ptr2chunk(b))
          break;  // past a dedicated one's first 2 MiB
        ASSERT_EQ(BlockSet::ptr2block(p), b) << step << " " << i;
      }
    }
  }
  for (const auto& [b, n] : live) set.free_block(b);
  EXPECT_EQ(set.hold(), 0);
}

}  // namespace
}  // namespace achunk::testing
