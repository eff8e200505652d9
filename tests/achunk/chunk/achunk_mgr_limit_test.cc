// The soft memory limit and failure handling: every path that fails leaves every
// counter exact and leaks nothing, and says why.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "achunk/base/alloc_failure.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class AChunkMgrLimitTest : public ChunkMgrTest {
 protected:
  void SetUp() override { clear_alloc_failure(); }
  std::string reason() {
    char buf[256];
    format_alloc_failure(last_alloc_failure(), buf, sizeof(buf));
    return buf;
  }
};

TEST_F(AChunkMgrLimitTest, LimitIsHitExactlyAtTheBoundary) {
  mgr_.set_memory_limit(6 * MB);
  AChunk* a = alloc_normal();
  AChunk* b = alloc_mb(4);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(mgr_.get_hold(), 6 * MB);
  EXPECT_EQ(alloc_normal(), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::SERVER_LIMIT);
  EXPECT_EQ(last_alloc_failure().limit, 6 * MB);
  EXPECT_EQ(last_alloc_failure().hold, 6 * MB);
  EXPECT_NE(reason().find("SERVER_HOLD_REACH_LIMIT"), std::string::npos);
  EXPECT_EQ(mgr_.get_hold(), 6 * MB);  // nothing charged for the failure
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);
  expect_consistent();
}

TEST_F(AChunkMgrLimitTest, OverLimitSacrificesTheCacheLargestFirst) {
  mgr_.set_memory_limit(12 * MB);
  mgr_.free_chunk(alloc_mb(6));  // cached: large budget is 12/2 = 6 MiB
  AChunk* small = alloc_normal();
  AChunk* keep = alloc_normal();
  mgr_.free_chunk(small);
  EXPECT_EQ(mgr_.get_freelist_hold(), 8 * MB);
  EXPECT_EQ(mgr_.get_hold(), 10 * MB);
  // A 4 MiB chunk misses the cache and would reach 14 MiB: room is made by unmapping
  // the 6 MiB chunk only; the 2 MiB chunk stays cached.
  AChunk* four = alloc_mb(4);
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(mgr_.get_large_freelist_hold(), 0);
  EXPECT_EQ(total_cached(), 1);
  EXPECT_EQ(mgr_.get_hold(), 8 * MB);  // 4 + kept 2 + cached 2
  mgr_.free_chunk(four);
  mgr_.free_chunk(keep);
  expect_consistent();
}

TEST_F(AChunkMgrLimitTest, LoweringTheLimitFlushesTheCache) {
  std::vector<AChunk*> chunks;
  for (int i = 0; i < 4; ++i) chunks.push_back(alloc_normal());
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  mgr_.set_memory_limit(4 * MB);
  EXPECT_LE(mgr_.get_hold(), 4 * MB);
  EXPECT_EQ(total_cached(), 2);
  expect_consistent();
}

TEST_F(AChunkMgrLimitTest, MmapFailureWashesTheCacheAndRetries) {
  AChunk* cached = alloc_mb(4);
  mgr_.free_chunk(cached);
  os_.fail_next_maps(1);
  AChunk* a = alloc_normal();  // first map fails, cache is flushed, retry succeeds
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(total_cached(), 0);
  EXPECT_EQ(os_.map_calls(), 3);
  EXPECT_EQ(mgr_.get_hold(), 2 * MB);
  mgr_.free_chunk(a);
  expect_consistent();
}

TEST_F(AChunkMgrLimitTest, MmapFailingTwiceReturnsNullWithErrno) {
  AChunk* live = alloc_normal();
  const ChunkMgrStats before = mgr_.get_stats(false);
  os_.fail_next_maps(2);
  EXPECT_EQ(alloc_mb(8), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::PHYSICAL_MEMORY_EXHAUST);
  EXPECT_EQ(last_alloc_failure().sys_errno, ENOMEM);
  EXPECT_NE(reason().find("errno=12"), std::string::npos) << reason();
  const ChunkMgrStats after = mgr_.get_stats(false);
  EXPECT_EQ(after.hold, before.hold);
  EXPECT_EQ(after.total_hold, before.total_hold);
  EXPECT_EQ(after.total_maps, before.total_maps);
  EXPECT_EQ(after.total_unmaps, before.total_unmaps);
  // The next allocation works again.
  AChunk* b = alloc_mb(8);
  ASSERT_NE(b, nullptr);
  mgr_.free_chunk(b);
  mgr_.free_chunk(live);
  expect_consistent();
}

TEST_F(AChunkMgrLimitTest, EveryFailingMapStepLeavesCountersExact) {
  // Fail the first map only, then both, with and without something in the cache.
  for (int fails = 1; fails <= 2; ++fails) {
    for (bool with_cache : {false, true}) {
      if (with_cache) mgr_.free_chunk(alloc_mb(6));
      os_.fail_next_maps(fails);
      AChunk* c = alloc_normal();
      EXPECT_EQ(c != nullptr, fails == 1);
      EXPECT_EQ(total_cached(), 0);  // the cache was washed either way
      if (c != nullptr) {
        EXPECT_EQ(mgr_.get_hold(), 2 * MB);
        mgr_.free_chunk(c);
      } else {
        EXPECT_EQ(mgr_.get_hold(), 0);
      }
      mgr_.sync_wash();
      EXPECT_EQ(mgr_.get_hold(), 0);
      EXPECT_EQ(mgr_.get_total_hold(), 0);
      expect_consistent();
    }
  }
  EXPECT_EQ(os_.live_mappings(), 0);
}

TEST_F(AChunkMgrLimitTest, GrowingAReusedChunkOverTheLimitFails) {
  AChunk* a = mgr_.alloc_chunk(2 * MB);  // 4 MiB mapping, hold just over 2 MiB
  mgr_.free_chunk(a);
  mgr_.set_memory_limit(5 * MB);
  AChunk* keep = mgr_.alloc_chunk(ACHUNK_SIZE / 2);  // reuse not possible: other slot
  ASSERT_NE(keep, nullptr);
  // Needs the full 4 MiB charged: the cached chunk cannot grow, and a new map is over too.
  EXPECT_EQ(alloc_mb(4), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::SERVER_LIMIT);
  EXPECT_EQ(mgr_.get_hold(), 2 * MB);
  mgr_.free_chunk(keep);
  expect_consistent();
}

TEST_F(AChunkMgrLimitTest, InvalidSizesFailCleanly) {
  EXPECT_EQ(mgr_.alloc_chunk(0), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE);
  EXPECT_EQ(mgr_.alloc_chunk(-5), nullptr);
  EXPECT_EQ(mgr_.alloc_chunk(INT64_MAX), nullptr);
  EXPECT_EQ(os_.map_calls(), 0);
  EXPECT_EQ(mgr_.get_hold(), 0);
}

}  // namespace
}  // namespace achunk::testing
