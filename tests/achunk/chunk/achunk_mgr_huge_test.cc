// The huge slot: chunks above 20 MiB cached whole, best fit, and what happens to one the
// slot cannot take.
#include <gtest/gtest.h>

#include <vector>

#include "achunk/chunk/achunk_mgr.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

using AChunkMgrHugeTest = ChunkMgrTest;

TEST_F(AChunkMgrHugeTest, AFreedHugeChunkIsCachedWholeAndServesTheNextHugeRequest) {
  AChunk* h = alloc_mb(30);
  ASSERT_NE(h, nullptr);
  static_cast<char*>(h->data())[100] = 7;
  EXPECT_EQ(mgr_.live_huge_chunks(), 1);
  mgr_.free_chunk(h);
  // Cached as it is: nothing unmapped or resized, its pages kept.
  EXPECT_EQ(mgr_.live_huge_chunks(), 0);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::HUGE_SLOT), 1);
  EXPECT_EQ(mgr_.get_total_hold(), 30 * MB);
  EXPECT_EQ(mgr_.get_freelist_hold(), mgr_.get_hold());
  EXPECT_EQ(mgr_.get_large_freelist_hold(), mgr_.get_hold());
  // A request up to a quarter smaller takes it as it is: no map, no resize, same bytes.
  AChunk* again = alloc_mb(26);
  EXPECT_EQ(again, h);
  EXPECT_EQ(static_cast<char*>(again->data())[100], 7);
  EXPECT_EQ(os_.map_calls(), 1);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(mgr_.live_huge_chunks(), 1);
  mgr_.free_chunk(again);
  // A loop of huge buffers: one mapping, whatever the rounds.
  for (int round = 0; round < 100; ++round) mgr_.free_chunk(alloc_mb(round % 2 == 0 ? 28 : 30));
  EXPECT_EQ(os_.map_calls(), 1);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(os_.release_calls(), 0);
  const ChunkMgrStats s = mgr_.get_stats(false);
  EXPECT_EQ(s.huge_maps, 1);
  EXPECT_EQ(s.huge_unmaps, 0);
  EXPECT_EQ(s.cache_hits, 101);
  EXPECT_EQ(mgr_.live_huge_chunks(), 0);
  expect_consistent();
}

TEST_F(AChunkMgrHugeTest, AHugeRequestTakesTheBestFitOfTheHugeCache) {
  std::vector<AChunk*> chunks;
  for (int64_t mb : {40, 24, 100, 30}) chunks.push_back(alloc_mb(mb));
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::HUGE_SLOT), 4);
  // 22 MiB: the smallest that is at most twice as big, the 24 (not the 30 or the 40).
  AChunk* a = alloc_mb(22);
  EXPECT_EQ(a, chunks[1]);
  // 28 MiB: the 30, as it is.
  AChunk* b = alloc_mb(28);
  EXPECT_EQ(b, chunks[3]);
  EXPECT_EQ(os_.resize_calls(), 0);
  // 45 MiB: nothing up to twice as big (the 40 is too small, the 100 too big); the
  // smallest bigger is shrunk, its tail unmapped.
  AChunk* c = alloc_mb(45);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(c->aligned(), 46 * MB);
  EXPECT_EQ(mgr_.get_freelist_hold(), chunk_hold_size(payload_for_mb(40)));  // the 40 left
  // 200 MiB: nothing bigger; the biggest smaller (the 40) is grown.
  AChunk* d = alloc_mb(200);
  EXPECT_EQ(os_.resize_calls(), 2);
  EXPECT_EQ(os_.map_calls(), 4);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::HUGE_SLOT), 0);
  EXPECT_EQ(mgr_.live_huge_chunks(), 4);
  for (AChunk* x : {a, b, c, d}) mgr_.free_chunk(x);
  EXPECT_EQ(mgr_.live_huge_chunks(), 0);
  expect_consistent();
}

TEST_F(AChunkMgrHugeTest, AHugeChunkBeyondTheHugeCacheIsShrunkIntoThe20MiBSlot) {
  std::vector<AChunk*> chunks;
  for (int i = 0; i <= AChunkMgr::HUGE_CACHE_MAX; ++i) chunks.push_back(alloc_mb(30));
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::HUGE_SLOT), AChunkMgr::HUGE_CACHE_MAX);
  // The last one: shrunk in place, its first 20 MiB cached with their pages.
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::HUGE_SLOT - 1), 1);
  EXPECT_EQ(mgr_.live_huge_chunks(), 0);
  // Idle chunks go by the TTL like any other: every free evicts at most one.
  clock_.advance_us(AChunkMgr::CACHE_EXPIRE_US);
  EXPECT_EQ(mgr_.release_expired(), AChunkMgr::HUGE_CACHE_MAX + 1);
  EXPECT_EQ(mgr_.get_hold(), 0);
  EXPECT_EQ(mgr_.get_large_freelist_hold(), 0);
  EXPECT_EQ(os_.live_mappings(), 0);
  EXPECT_EQ(mgr_.live_huge_chunks(), 0);
  expect_consistent();
}

TEST_F(AChunkMgrHugeTest, HugeChunksAreUnmappedWhenTheLargeCacheIsOff) {
  mgr_.set_max_chunk_cache_size(0, false);
  AChunk* h = alloc_mb(22);
  ASSERT_NE(h, nullptr);
  mgr_.free_chunk(h);
  EXPECT_EQ(total_cached(), 0);
  EXPECT_EQ(os_.resize_calls(), 0);
  const ChunkMgrStats s = mgr_.get_stats(false);
  EXPECT_EQ(s.huge_maps, 1);
  EXPECT_EQ(s.huge_unmaps, 1);
  EXPECT_EQ(s.hold, 0);
  EXPECT_EQ(mgr_.live_huge_chunks(), 0);
  expect_consistent();
}

TEST_F(AChunkMgrHugeTest, AHugeChunkTheCapRefusesIsUnmappedWhole) {
  mgr_.set_max_chunk_cache_size(8 * MB, true);
  AChunk* h = alloc_mb(22);
  ASSERT_NE(h, nullptr);
  mgr_.free_chunk(h);
  EXPECT_EQ(total_cached(), 0);
  EXPECT_EQ(os_.live_mappings(), 0);
  EXPECT_EQ(os_.resize_calls(), 0);  // not shrunk first for nothing
  EXPECT_EQ(mgr_.get_hold(), 0);
  EXPECT_EQ(mgr_.get_stats(false).huge_unmaps, 1);
  expect_consistent();
}

}  // namespace
}  // namespace achunk::testing
