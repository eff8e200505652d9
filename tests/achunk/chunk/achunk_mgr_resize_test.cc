// AChunkMgr::resize_chunk: a chunk handed out grown or shrunk with its mapping, its bytes
// kept, its charge and registry entry moved along, and a failure that changes nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "achunk/base/alloc_failure.h"
#include "achunk/chunk/achunk_mgr.h"
#include "achunk/chunk/chunk_registry.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

using AChunkMgrResizeTest = ChunkMgrTest;

void fill(AChunk* chunk, int64_t bytes) {
  std::memset(chunk->data(), 0x6b, static_cast<size_t>(bytes));
}
bool intact(AChunk* chunk, int64_t bytes) {
  const auto* p = static_cast<const unsigned char*>(chunk->data());
  for (int64_t i = 0; i < bytes; i += 4096) {
    if (p[i] != 0x6b) return false;
  }
  return p[bytes - 1] == 0x6b;
}

TEST_F(AChunkMgrResizeTest, GrowingMovesTheMappingWithItsBytesAndItsCharge) {
  AChunk* chunk = alloc_mb(4);
  ASSERT_NE(chunk, nullptr);
  const int64_t payload = payload_for_mb(4);
  fill(chunk, payload);
  const int64_t maps = os_.map_calls();
  AChunk* grown = mgr_.resize_chunk(chunk, payload_for_mb(30));
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(intact(grown, payload));
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(os_.map_calls(), maps);  // no new mapping, no copy by the caller
  EXPECT_EQ(grown->aligned(), 30 * MB);
  EXPECT_EQ(grown->alloc_bytes_, payload_for_mb(30));
  EXPECT_FALSE(grown->fresh_);
  EXPECT_EQ(mgr_.get_hold(), 30 * MB);
  EXPECT_EQ(mgr_.get_total_hold(), 30 * MB);
  EXPECT_EQ(mgr_.live_huge_chunks(), 1);
  EXPECT_EQ(mgr_.get_stats(false).live_resizes, 1);
  // The fake OS always moves: the old place reads as freed, the new one as live.
  ASSERT_NE(grown, chunk);
  EXPECT_FALSE(chunk_registry::is_chunk(chunk));
  EXPECT_TRUE(chunk_registry::was_released(chunk));
  EXPECT_TRUE(chunk_registry::is_chunk(grown));
  std::memset(static_cast<char*>(grown->data()) + payload, 1,
              static_cast<size_t>(payload_for_mb(30) - payload));  // all of it usable
  mgr_.free_chunk(grown);
  EXPECT_EQ(mgr_.get_used(), 0);
  expect_consistent();
}

// The mark an owner put on the chunk's registry byte (an object set's, which the free
// fast path tests) moves with the mapping, and stays when the move fails.
TEST_F(AChunkMgrResizeTest, AMovedChunkKeepsItsOwnersMark) {
  AChunk* chunk = alloc_mb(4);
  ASSERT_NE(chunk, nullptr);
  chunk_registry::mark(chunk);
  AChunk* grown = mgr_.resize_chunk(chunk, payload_for_mb(30));
  ASSERT_NE(grown, nullptr);
  ASSERT_NE(grown, chunk);
  EXPECT_TRUE(chunk_registry::is_marked(grown));
  EXPECT_FALSE(chunk_registry::is_marked(chunk));
  os_.fail_next_resizes(1);
  EXPECT_EQ(mgr_.resize_chunk(grown, payload_for_mb(50)), nullptr);
  EXPECT_TRUE(chunk_registry::is_marked(grown));
  AChunk* unmarked = alloc_mb(4);
  ASSERT_NE(unmarked, nullptr);
  AChunk* moved = mgr_.resize_chunk(unmarked, payload_for_mb(30));
  ASSERT_NE(moved, nullptr);
  EXPECT_TRUE(chunk_registry::is_chunk(moved));
  EXPECT_FALSE(chunk_registry::is_marked(moved));
  mgr_.free_chunk(grown);
  mgr_.free_chunk(moved);
  EXPECT_EQ(mgr_.get_used(), 0);
  expect_consistent();
}

// A shrink keeps the mapping and its charge, so a buffer shrunk and grown again pays no
// syscall; trim_chunk gives the tail back, in place, when its owner finds it idle.
TEST_F(AChunkMgrResizeTest, ShrinkingKeepsTheTailUntilTrimmed) {
  AChunk* chunk = alloc_mb(30);
  ASSERT_NE(chunk, nullptr);
  fill(chunk, payload_for_mb(6));
  AChunk* shrunk = mgr_.resize_chunk(chunk, payload_for_mb(6));
  ASSERT_EQ(shrunk, chunk);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(shrunk->aligned(), 30 * MB);
  EXPECT_EQ(shrunk->alloc_bytes_, payload_for_mb(6));
  EXPECT_EQ(mgr_.get_hold(), 30 * MB);
  EXPECT_EQ(mgr_.live_huge_chunks(), 1);
  EXPECT_EQ(mgr_.resize_chunk(shrunk, payload_for_mb(20)), chunk);  // back into the tail
  EXPECT_EQ(mgr_.resize_chunk(shrunk, payload_for_mb(6)), chunk);
  EXPECT_EQ(os_.resize_calls(), 0);
  // Live in the registry throughout: its owner may free it while another thread trims.
  bool live_during = false;
  os_.set_resize_hook([&] { live_during = chunk_registry::is_chunk(shrunk); });
  EXPECT_EQ(mgr_.trim_chunk(shrunk), 24 * MB);
  os_.set_resize_hook(nullptr);
  EXPECT_TRUE(live_during);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_TRUE(intact(shrunk, payload_for_mb(6)));
  EXPECT_EQ(shrunk->aligned(), 6 * MB);
  EXPECT_EQ(mgr_.get_hold(), 6 * MB);
  EXPECT_EQ(mgr_.get_total_hold(), 6 * MB);
  EXPECT_EQ(mgr_.live_huge_chunks(), 0);
  EXPECT_EQ(mgr_.get_stats(false).slack_trims, 1);
  EXPECT_TRUE(chunk_registry::is_chunk(shrunk));
  EXPECT_EQ(mgr_.trim_chunk(shrunk), 0);  // nothing past the request's units
  mgr_.free_chunk(shrunk);
  expect_consistent();
}

// A buffer shrunk to a few KiB: the trim unmaps the units past its first, then releases
// that unit's pages past the request, which it stops charging; one mapped to exactly its
// units releases nothing. A refused release keeps those pages charged.
TEST_F(AChunkMgrResizeTest, ATrimReleasesTheLastUnitsPagesPastTheRequest) {
  constexpr int64_t SMALL = 100 * 1024;
  AChunk* chunk = alloc_mb(30);
  ASSERT_NE(chunk, nullptr);
  fill(chunk, payload_for_mb(30));
  ASSERT_EQ(mgr_.resize_chunk(chunk, SMALL), chunk);
  EXPECT_EQ(chunk->aligned(), 30 * MB);
  const int64_t request_end = align_up(SMALL + ACHUNK_HEADER_SIZE, ACHUNK_PAGE_SIZE);
  const int64_t released = os_.released_bytes();
  EXPECT_EQ(mgr_.trim_chunk(chunk), 28 * MB + (2 * MB - request_end));
  EXPECT_EQ(os_.released_bytes(), released + 2 * MB - request_end);
  EXPECT_TRUE(intact(chunk, SMALL));
  EXPECT_EQ(reinterpret_cast<char*>(chunk)[request_end], 0);  // released: reads as zero
  EXPECT_EQ(chunk->aligned(), 2 * MB);
  EXPECT_EQ(mgr_.get_hold(), 2 * MB);  // a one-unit chunk charges its unit
  EXPECT_EQ(mgr_.trim_chunk(chunk), 0);
  mgr_.free_chunk(chunk);
  // 6 MiB shrunk to 5: no unit to unmap, but its sixth MiB was written. A refused release
  // changes nothing, so the owner tries again after another idle time.
  chunk = alloc_mb(6);
  ASSERT_NE(chunk, nullptr);
  fill(chunk, payload_for_mb(6));
  ASSERT_EQ(mgr_.resize_chunk(chunk, payload_for_mb(5)), chunk);
  const int64_t hold = mgr_.get_hold();  // the first chunk's cached 2 MiB, and 6 MiB
  os_.fail_next_releases(1);
  EXPECT_EQ(mgr_.trim_chunk(chunk), -1);
  EXPECT_EQ(mgr_.get_hold(), hold);
  EXPECT_EQ(mgr_.trim_chunk(chunk), 1 * MB);
  EXPECT_EQ(mgr_.get_hold(), hold - 1 * MB);
  EXPECT_EQ(chunk->aligned(), 6 * MB);
  EXPECT_EQ(mgr_.get_stats(false).slack_trims, 2);
  mgr_.free_chunk(chunk);
  expect_consistent();
}

TEST_F(AChunkMgrResizeTest, ARefusedTrimKeepsTheTailAndItsCharge) {
  AChunk* chunk = alloc_mb(10);
  ASSERT_NE(chunk, nullptr);
  ASSERT_EQ(mgr_.resize_chunk(chunk, payload_for_mb(4)), chunk);
  os_.fail_next_resizes(1);
  EXPECT_EQ(mgr_.trim_chunk(chunk), -1);
  EXPECT_EQ(chunk->aligned(), 10 * MB);
  EXPECT_EQ(mgr_.get_hold(), 10 * MB);
  EXPECT_TRUE(chunk_registry::is_chunk(chunk));
  EXPECT_EQ(mgr_.get_stats(false).slack_trims, 0);
  EXPECT_EQ(mgr_.trim_chunk(chunk), 6 * MB);
  mgr_.free_chunk(chunk);
  expect_consistent();
}

TEST_F(AChunkMgrResizeTest, WithinTheSameMappingOnlyTheChargeMoves) {
  // 2.5 MiB maps 4 MiB but charges only its pages; growing to 3.5 MiB needs no syscall.
  AChunk* chunk = mgr_.alloc_chunk(5 * MB / 2);
  ASSERT_NE(chunk, nullptr);
  const int64_t hold = mgr_.get_hold();
  AChunk* grown = mgr_.resize_chunk(chunk, 7 * MB / 2);
  EXPECT_EQ(grown, chunk);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(mgr_.get_hold(), hold + MB);
  EXPECT_EQ(grown->charged(), chunk_hold_size(7 * MB / 2));
  // Shrinking back keeps the pages the chunk may have touched charged, as a reuse does.
  EXPECT_EQ(mgr_.resize_chunk(grown, 5 * MB / 2), chunk);
  EXPECT_EQ(mgr_.get_hold(), hold + MB);
  EXPECT_EQ(chunk->hold(), chunk_hold_size(5 * MB / 2));
  mgr_.free_chunk(chunk);
  expect_consistent();
}

TEST_F(AChunkMgrResizeTest, OverTheLimitFailsWithTheReasonAndLeavesTheChunkAsItWas) {
  mgr_.set_memory_limit(16 * MB);
  AChunk* chunk = alloc_mb(8);
  ASSERT_NE(chunk, nullptr);
  fill(chunk, payload_for_mb(8));
  EXPECT_EQ(mgr_.resize_chunk(chunk, payload_for_mb(20)), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::SERVER_LIMIT);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_TRUE(chunk_registry::is_chunk(chunk));
  EXPECT_TRUE(intact(chunk, payload_for_mb(8)));
  EXPECT_EQ(mgr_.get_hold(), 8 * MB);
  EXPECT_EQ(mgr_.get_stats(false).live_resizes, 0);
  // A cached chunk is sacrificed before a resize fails, as before a new mapping.
  mgr_.free_chunk(alloc_normal());
  EXPECT_EQ(mgr_.get_hold(), 10 * MB);
  AChunk* grown = mgr_.resize_chunk(chunk, payload_for_mb(16));
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(intact(grown, payload_for_mb(8)));
  EXPECT_EQ(mgr_.get_freelist_hold(), 0);
  EXPECT_EQ(mgr_.get_hold(), 16 * MB);
  mgr_.free_chunk(grown);
  expect_consistent();
}

TEST_F(AChunkMgrResizeTest, AFailedRemapKeepsTheChunkRegisteredAndUncharged) {
  AChunk* chunk = alloc_mb(4);
  ASSERT_NE(chunk, nullptr);
  fill(chunk, payload_for_mb(4));
  os_.fail_next_resizes(1);
  EXPECT_EQ(mgr_.resize_chunk(chunk, payload_for_mb(10)), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::PHYSICAL_MEMORY_EXHAUST);
  EXPECT_EQ(last_alloc_failure().sys_errno, ENOMEM);
  EXPECT_TRUE(chunk_registry::is_chunk(chunk));
  EXPECT_TRUE(intact(chunk, payload_for_mb(4)));
  EXPECT_EQ(mgr_.get_hold(), 4 * MB);
  EXPECT_EQ(chunk->aligned(), 4 * MB);
  mgr_.free_chunk(chunk);
  expect_consistent();
}

TEST_F(AChunkMgrResizeTest, RefusesAChunkPlacedForAnAlignment) {
  AChunk* chunk = mgr_.alloc_chunk(payload_for_mb(4), 8 * MB);
  ASSERT_NE(chunk, nullptr);
  EXPECT_EQ(mgr_.resize_chunk(chunk, payload_for_mb(10)), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_ARGUMENT);
  EXPECT_TRUE(chunk_registry::is_chunk(chunk));
  mgr_.free_chunk(chunk);
  expect_consistent();
}

}  // namespace
}  // namespace achunk::testing
