#include "alloc/block/block_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "achunk/chunk/chunk_registry.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class BlockSetTest : public ChunkMgrTest {
 protected:
  DirectChunkSource source_{mgr_};
};

TEST_F(BlockSetTest, SmallSpansShareOneChunk) {
  BlockSet set(source_);
  ABlock* a = set.alloc_block(1);
  ABlock* b = set.alloc_block(ABLOCK_SIZE + 1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(AChunk::ptr2chunk(a), AChunk::ptr2chunk(b));
  EXPECT_EQ(a->nblocks_, 1);
  EXPECT_EQ(b->nblocks_, 2);
  EXPECT_EQ(set.chunk_count(), 1);
  EXPECT_EQ(set.hold(), 2 * MB);
  EXPECT_EQ(set.used(), 3 * ABLOCK_SIZE);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block_data(a)) % ABLOCK_SIZE, 0u);
  std::memset(block_data(b), 7, 2 * ABLOCK_SIZE);
  set.free_block(a);
  set.free_block(b);
  EXPECT_EQ(set.hold(), 0);
  EXPECT_EQ(mgr_.get_used(), 0);  // the chunk went back to AChunkMgr at once
  EXPECT_EQ(mgr_.get_freelist_hold(), 2 * MB);
}

// An object set's chunks carry its mark in the registry, which is all the free fast path
// reads to tell them from a page manager's; a chunk handed back loses it.
TEST_F(BlockSetTest, OnlyAnObjectSetsChunksAreMarkedInTheRegistry) {
  int owner = 0;
  BlockSet objects(source_, &owner, BlockSet::OWNER_OBJECT_SET);
  BlockSet pages(source_, &owner, BlockSet::OWNER_PAGE_MANAGER);
  ABlock* a = objects.alloc_block(1);
  ABlock* b = pages.alloc_block(1);
  ABlock* big = objects.alloc_block(3 * MB);  // a dedicated chunk
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(chunk_registry::is_marked(AChunk::ptr2chunk(a)));
  EXPECT_TRUE(chunk_registry::is_marked(AChunk::ptr2chunk(big)));
  EXPECT_FALSE(chunk_registry::is_marked(AChunk::ptr2chunk(b)));
  EXPECT_TRUE(chunk_registry::is_chunk(AChunk::ptr2chunk(b)));
  AChunk* chunk = AChunk::ptr2chunk(a);
  objects.free_block(a);
  EXPECT_FALSE(chunk_registry::is_marked(chunk));
  objects.free_block(big);
  pages.free_block(b);
}

TEST_F(BlockSetTest, Ptr2BlockFindsTheSpanHeadFromInteriorPointers) {
  BlockSet set(source_);
  ABlock* a = set.alloc_block(3 * ABLOCK_SIZE);
  ABlock* b = set.alloc_block(ABLOCK_SIZE);
  char* data = static_cast<char*>(block_data(a));
  EXPECT_EQ(BlockSet::ptr2block(data), a);
  EXPECT_EQ(BlockSet::ptr2block(data + 2 * ABLOCK_SIZE + 100), a);
  EXPECT_EQ(BlockSet::ptr2block(block_data(b)), b);
  EXPECT_EQ(BlockSet::span_bytes(a), 3 * ABLOCK_SIZE);
  set.free_block(a);
  set.free_block(b);
}

TEST_F(BlockSetTest, BestFitByLength) {
  BlockSet set(source_);
  std::vector<ABlock*> spans;
  for (int n : {3, 1, 5, 1}) spans.push_back(set.alloc_block(n * ABLOCK_SIZE));
  set.free_block(spans[0]);  // free span of 3 (its neighbour is in use)
  set.free_block(spans[2]);  // free span of 5
  ABlock* again = set.alloc_block(3 * ABLOCK_SIZE);
  EXPECT_EQ(again, spans[0]);  // the exact fit, not the 5 or the chunk's tail
  ABlock* four = set.alloc_block(4 * ABLOCK_SIZE);
  EXPECT_EQ(four, spans[2]);  // the smallest that fits, split
  ABlock* one = set.alloc_block(ABLOCK_SIZE);
  EXPECT_EQ(block_index(one), block_index(spans[2]) + 4);  // the split's remainder
  for (ABlock* s : {again, four, one, spans[1], spans[3]}) set.free_block(s);
  EXPECT_EQ(set.chunk_count(), 0);
}

TEST_F(BlockSetTest, CoalescingRebuildsTheWholeChunk) {
  BlockSet set(source_);
  ABlock* keep = set.alloc_block(ABLOCK_SIZE);
  ABlock* a = set.alloc_block(ABLOCK_SIZE);
  ABlock* b = set.alloc_block(ABLOCK_SIZE);
  ABlock* c = set.alloc_block(ABLOCK_SIZE);
  set.free_block(b);
  set.free_block(a);  // merges with b (next)
  set.free_block(c);  // merges with a+b (prev) and the chunk's tail (next)
  // Everything but `keep` is one span again: the largest possible request fits.
  ABlock* big = set.alloc_block((BLOCKS_PER_CHUNK - 1) * ABLOCK_SIZE);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(AChunk::ptr2chunk(big), AChunk::ptr2chunk(keep));
  EXPECT_EQ(set.chunk_count(), 1);
  set.free_block(big);
  set.free_block(keep);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(BlockSetTest, SpansLargerThanAChunkGetADedicatedChunk) {
  BlockSet set(source_);
  ABlock* big = set.alloc_block(5 * MB);
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(big->dedicated());
  EXPECT_GE(BlockSet::span_bytes(big), 5 * MB);
  std::memset(block_data(big), 1, 5 * MB);
  EXPECT_EQ(BlockSet::ptr2block(static_cast<char*>(block_data(big)) + 100), big);
  EXPECT_EQ(mgr_.get_stats(false).large_maps, 1);
  set.free_block(big);
  EXPECT_EQ(set.hold(), 0);
  EXPECT_EQ(mgr_.get_used(), 0);
}

// A span for an aligned big object: block_data() + skew meets the alignment, and the
// blocks before and after it stay free, as clean as they were, so the set holds nothing
// for the slide.
TEST_F(BlockSetTest, AnAlignedSpanLeavesItsSlideFreeAndAsCleanAsItWas) {
  BlockSet set(source_);
  for (int64_t align : {ABLOCK_SIZE, int64_t{64} << 10, int64_t{256} << 10, MB}) {
    for (int64_t bytes : {int64_t{1}, 3 * ABLOCK_SIZE, int64_t{100} << 10}) {
      // A span at block 0 first: the free span then starts off any alignment above a block.
      ABlock* filler = set.alloc_block(ABLOCK_SIZE);
      bool zeroed = false;
      ABlock* a = set.alloc_block_aligned(bytes, align, ABLOCK_SIZE, &zeroed);
      ASSERT_NE(a, nullptr) << align << " " << bytes;
      EXPECT_EQ((reinterpret_cast<uintptr_t>(block_data(a)) + ABLOCK_SIZE) % align, 0u);
      const int n = static_cast<int>((bytes + ABLOCK_SIZE - 1) / ABLOCK_SIZE);
      EXPECT_EQ(a->nblocks_, n);
      EXPECT_EQ(BlockSet::blocks_for_aligned(bytes, align), n);
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(BlockSet::ptr2block(static_cast<char*>(block_data(a)) + i * ABLOCK_SIZE), a);
      }
      EXPECT_EQ(set.used(), (n + 1) * ABLOCK_SIZE);
      EXPECT_EQ(set.chunk_count(), 1);
      int64_t washed = 0;
      const int64_t free_bytes = set.free_span_bytes(&washed);
      EXPECT_EQ(free_bytes, ACHUNK_SIZE - (n + 1) * ABLOCK_SIZE);
      EXPECT_EQ(washed, zeroed ? free_bytes : 0);
      EXPECT_TRUE(set.dirty_list_consistent());
      set.free_block(a);
      set.free_block(filler);
      EXPECT_EQ(set.hold(), 0);  // everything merged back: the chunk left at once
    }
  }
  // Alignments it does not place, and spans that do not fit a chunk with their slide.
  EXPECT_EQ(BlockSet::blocks_for_aligned(ABLOCK_SIZE, 4096), 0);
  EXPECT_EQ(BlockSet::blocks_for_aligned(ABLOCK_SIZE, 3 * ABLOCK_SIZE), 0);
  EXPECT_EQ(BlockSet::blocks_for_aligned(ABLOCK_SIZE, 2 * MB), 0);
  EXPECT_EQ(BlockSet::blocks_for_aligned(MB - 2 * ABLOCK_SIZE, MB), 126);
  EXPECT_EQ(BlockSet::blocks_for_aligned(MB - ABLOCK_SIZE, MB), 0);
  EXPECT_EQ(BlockSet::blocks_for_aligned(MB, MB), 0);
  EXPECT_EQ(set.alloc_block_aligned(MB, MB, ABLOCK_SIZE), nullptr);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(BlockSetTest, ChunkFailureReturnsNullAndChargesNothing) {
  BlockSet set(source_);
  mgr_.set_memory_limit(2 * MB);
  ABlock* a = set.alloc_block(ABLOCK_SIZE);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(set.alloc_block(3 * MB), nullptr);
  EXPECT_EQ(set.hold(), 2 * MB);
  EXPECT_EQ(set.used(), ABLOCK_SIZE);
  set.free_block(a);
}

TEST_F(BlockSetTest, RandomSequenceAgainstAModel) {
  BlockSet set(source_);
  std::mt19937 rng(42);
  std::map<ABlock*, std::pair<int64_t, unsigned char>> live;  // span -> (bytes, fill)
  int64_t model_used = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.size() < 200 && rng() % 2 == 0) {
      const int64_t bytes = rng() % 8 == 0 ? 1 + rng() % (5 * MB) : 1 + rng() % (40 * ABLOCK_SIZE);
      ABlock* b = set.alloc_block(bytes);
      ASSERT_NE(b, nullptr);
      ASSERT_EQ(live.count(b), 0u);
      const unsigned char fill = static_cast<unsigned char>(rng());
      std::memset(block_data(b), fill, static_cast<size_t>(bytes));
      live[b] = {bytes, fill};
      model_used += b->dedicated() ? AChunk::ptr2chunk(b)->hold() : BlockSet::span_bytes(b);
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      ABlock* b = it->first;
      const auto [bytes, fill] = it->second;
      const unsigned char* p = static_cast<unsigned char*>(block_data(b));
      ASSERT_EQ(p[0], fill);
      ASSERT_EQ(p[bytes - 1], fill);
      // Any pointer into the span's first 2 MiB finds the span head.
      ASSERT_EQ(BlockSet::ptr2block(p + std::min<int64_t>(bytes / 2, ACHUNK_SIZE / 2)), b);
      model_used -= b->dedicated() ? AChunk::ptr2chunk(b)->hold() : BlockSet::span_bytes(b);
      set.free_block(b);
      live.erase(it);
    }
    ASSERT_EQ(set.used(), model_used);
    ASSERT_LE(set.used(), set.hold());
    // Time passes and washing runs both ways, so spans of every age and state split and
    // merge; the list of spans to wash must stay exact through all of it.
    if (step % 50 == 0) clock_.advance_us(static_cast<int64_t>(rng() % 2'000'000));
    if (step % 200 == 0) set.wash_stale_spans(1'000'000);
    if (step % 200 == 100) {
      ABlock* taken[4];
      const int n = set.take_stale_spans(clock_.now_us() - 1'000'000, taken, 4);
      ASSERT_TRUE(set.dirty_list_consistent());
      for (int k = 0; k < n; ++k) set.put_back_span(taken[k], k % 2 == 0);
    }
    ASSERT_TRUE(set.dirty_list_consistent()) << "step " << step;
  }
  for (auto& [b, info] : live) set.free_block(b);
  EXPECT_EQ(set.hold(), 0);
  EXPECT_EQ(set.chunk_count(), 0);
  EXPECT_EQ(mgr_.get_used(), 0);
  expect_consistent();
}

TEST_F(BlockSetTest, WashingLooksOnlyAtTheSpansItWashes) {
  // Spans freed long ago, then ever more spans freed a moment ago: each wash looks at the
  // spans it washes and one more, however many recent (or washed) spans there are.
  source_.set_span_idle_ms(-1);  // no washing on frees: only the calls below wash
  BlockSet set(source_);
  std::vector<ABlock*> blocks;
  for (int i = 0; i < 2 * (40 + 100 + 200); ++i) blocks.push_back(set.alloc_block(ABLOCK_SIZE));
  size_t next = 0;
  auto free_spans = [&](int n) {  // every other block, so no two free spans merge
    for (int i = 0; i < n; ++i, next += 2) set.free_block(blocks[next + 1]);
  };
  free_spans(40);
  clock_.advance_us(10 * 1000 * 1000);
  for (int recent : {100, 200}) {
    free_spans(recent);
    const uint64_t before = set.wash_visits();
    const int64_t washed = set.wash_stale_spans(5 * 1000 * 1000);
    const uint64_t visits = set.wash_visits() - before;
    if (recent == 100) {
      EXPECT_EQ(washed, 40 * ABLOCK_SIZE);
      EXPECT_EQ(visits, 41u);
    } else {
      EXPECT_EQ(washed, 0);
      EXPECT_EQ(visits, 1u);
    }
  }
  // The unlocked path takes the same spans in the same order.
  clock_.advance_us(10 * 1000 * 1000);
  ABlock* taken[16];
  uint64_t before = set.wash_visits();
  ASSERT_EQ(set.take_stale_spans(clock_.now_us() - 5 * 1000 * 1000, taken, 16), 16);
  EXPECT_EQ(set.wash_visits() - before, 16u);
  for (ABlock* b : taken) set.put_back_span(b, true);
  before = set.wash_visits();
  int total = 16;
  while (int n = set.take_stale_spans(clock_.now_us() - 5 * 1000 * 1000, taken, 16)) {
    for (int k = 0; k < n; ++k) set.put_back_span(taken[k], true);
    total += n;
  }
  EXPECT_EQ(total, 300);
  EXPECT_LE(set.wash_visits() - before, 300u - 16u + 1u);
  EXPECT_EQ(set.wash_stale_spans(0), 0);  // all clean now
  for (size_t i = 0; i < blocks.size(); i += 2) set.free_block(blocks[i]);
  for (size_t i = next + 1; i < blocks.size(); i += 2) set.free_block(blocks[i]);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(BlockSetTest, AFreeWashesOneStaleSpanAndTheNextFreesTakeTheRest) {
  // A backlog of stale spans is washed one span a free, never all by one free: with 50
  // stale spans, each of the next 50 frees makes one madvise and looks at one span.
  source_.set_span_idle_ms(1'000);
  BlockSet set(source_);
  constexpr int STALE = 50, RECENT = 60;
  std::vector<ABlock*> blocks;
  for (int i = 0; i < 2 * (STALE + RECENT); ++i) blocks.push_back(set.alloc_block(ABLOCK_SIZE));
  for (ABlock* b : blocks) std::memset(block_data(b), 1, ABLOCK_SIZE);
  size_t next = 0;
  auto free_one = [&] {  // every other block, so no two free spans merge
    set.free_block(blocks[next + 1]);
    next += 2;
  };
  for (int i = 0; i < STALE; ++i) free_one();
  clock_.advance_ms(2'000);
  for (int i = 1; i <= STALE; ++i) {
    const int64_t calls = os_.release_calls();
    const uint64_t visits = set.wash_visits();
    free_one();
    EXPECT_EQ(os_.release_calls() - calls, 1) << i;
    EXPECT_EQ(set.wash_visits() - visits, 1u) << i;
  }
  EXPECT_EQ(os_.released_bytes(), STALE * ABLOCK_SIZE);
  // The backlog is gone: the next look waits a quarter of the idle time.
  uint64_t visits = set.wash_visits();
  free_one();
  EXPECT_EQ(set.wash_visits(), visits);
  // A refusal waits too rather than asking the OS again at every free.
  clock_.advance_ms(2'000);
  os_.fail_next_releases(1);
  free_one();
  EXPECT_EQ(os_.released_bytes(), STALE * ABLOCK_SIZE);
  visits = set.wash_visits();
  free_one();
  EXPECT_EQ(set.wash_visits(), visits);
  clock_.advance_ms(250);
  free_one();
  EXPECT_EQ(os_.released_bytes(), (STALE + 1) * ABLOCK_SIZE);
  for (size_t i = 0; i < blocks.size(); i += 2) set.free_block(blocks[i]);
  for (size_t i = next + 1; i < blocks.size(); i += 2) set.free_block(blocks[i]);
  EXPECT_EQ(set.hold(), 0);
}

}  // namespace
}  // namespace achunk::testing

namespace achunk::testing {
namespace {

TEST_F(BlockSetTest, AMergedSpanIsCleanOnlyIfBothWereAndDirtySinceTheLaterFree) {
  source_.set_span_idle_ms(-1);  // only the calls below wash
  BlockSet set(source_);
  ABlock* a = set.alloc_block(ABLOCK_SIZE);
  ABlock* b = set.alloc_block(ABLOCK_SIZE);
  ABlock* c = set.alloc_block(ABLOCK_SIZE);
  ABlock* keep = set.alloc_block(ABLOCK_SIZE);
  set.free_block(a);
  EXPECT_EQ(set.wash_free_spans(), ABLOCK_SIZE);  // a washed
  clock_.advance_us(10'000'000);
  set.free_block(c);  // dirty since t=10 s
  clock_.advance_us(10'000'000);
  set.free_block(b);  // dirty since t=20 s: a, b and c are one span now
  EXPECT_TRUE(set.dirty_list_consistent());
  // Dirty (a's cleanliness is lost) since the later of the dirty frees: not stale after 15 s.
  clock_.advance_us(5'000'000);
  EXPECT_EQ(set.wash_stale_spans(15'000'000), 0);
  clock_.advance_us(10'000'000);
  EXPECT_EQ(set.wash_stale_spans(15'000'000), 3 * ABLOCK_SIZE);
  bool zeroed = false;
  ABlock* again = set.alloc_block(3 * ABLOCK_SIZE, &zeroed);
  EXPECT_EQ(again, a);
  EXPECT_TRUE(zeroed);
  set.free_block(again);
  set.free_block(keep);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(BlockSetTest, WashReleasesFreeSpansAndKeepsThemUsable) {
  BlockSet set(source_);
  ABlock* a = set.alloc_block(ABLOCK_SIZE);
  ABlock* b = set.alloc_block(3 * ABLOCK_SIZE);
  ABlock* c = set.alloc_block(ABLOCK_SIZE);
  set.free_block(b);  // a free span of 3 between two used ones, and the chunk's tail
  // Only b's pages: the tail was never touched since the chunk was mapped.
  EXPECT_EQ(set.wash_free_spans(), 3 * ABLOCK_SIZE);
  EXPECT_EQ(os_.released_bytes(), 3 * ABLOCK_SIZE);
  EXPECT_EQ(set.hold(), 2 * MB);  // washing changes RSS, not what is charged
  ABlock* again = set.alloc_block(3 * ABLOCK_SIZE);
  EXPECT_EQ(again, b);
  std::memset(block_data(again), 1, 3 * ABLOCK_SIZE);
  for (ABlock* s : {a, again, c}) set.free_block(s);
  EXPECT_EQ(set.hold(), 0);
}

}  // namespace
}  // namespace achunk::testing

namespace achunk::testing {
namespace {

// calloc skips its memset on spans whose pages nobody touched since they were mapped or
// washed, so the flag must never claim a span that held data.
TEST_F(BlockSetTest, ASpanIsZeroedOnlyWhenFreshOrWashedSinceItsLastUse) {
  source_.set_span_idle_ms(30'000);
  BlockSet set(source_);
  bool zeroed = false;
  ABlock* a = set.alloc_block(3 * ABLOCK_SIZE, &zeroed);
  EXPECT_TRUE(zeroed);  // carved from a fresh chunk
  ABlock* keep = set.alloc_block(ABLOCK_SIZE, &zeroed);
  EXPECT_TRUE(zeroed);
  std::memset(block_data(a), 0x5a, 3 * ABLOCK_SIZE);
  set.free_block(a);  // 3 blocks between the chunk's start and `keep`: kept dirty
  ABlock* again = set.alloc_block(3 * ABLOCK_SIZE, &zeroed);
  EXPECT_EQ(again, a);
  EXPECT_FALSE(zeroed);
  EXPECT_EQ(static_cast<unsigned char*>(block_data(again))[0], 0x5a);
  set.free_block(again);
  EXPECT_EQ(set.wash_free_spans(), 3 * ABLOCK_SIZE);
  again = set.alloc_block(2 * ABLOCK_SIZE, &zeroed);  // the front of the washed span
  EXPECT_TRUE(zeroed);
  ABlock* rest = set.alloc_block(ABLOCK_SIZE, &zeroed);  // its washed tail, split off
  EXPECT_EQ(rest, a + 2);
  EXPECT_TRUE(zeroed);
  for (ABlock* b : {again, rest, keep}) set.free_block(b);

  // A span bigger than a chunk gets a chunk of its own: fresh once, not from the cache.
  ABlock* big = set.alloc_block(3 * MB, &zeroed);
  EXPECT_TRUE(zeroed);
  std::memset(block_data(big), 1, 3 * MB);
  set.free_block(big);
  ABlock* cached = set.alloc_block(3 * MB, &zeroed);
  EXPECT_EQ(cached, big);
  EXPECT_FALSE(zeroed);
  set.free_block(cached);
}

}  // namespace
}  // namespace achunk::testing
