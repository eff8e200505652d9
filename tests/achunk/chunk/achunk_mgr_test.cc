#include "achunk/chunk/achunk_mgr.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "achunk/base/error_report.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

TEST(AChunkMgrStaticTest, SlotIndexMatchesReferenceLayout) {
  EXPECT_EQ(AChunkMgr::slot_index(2 * MB, 5), 5);
  EXPECT_EQ(AChunkMgr::slot_index(4 * MB, 5), 8);
  EXPECT_EQ(AChunkMgr::slot_index(6 * MB, 0), 9);
  EXPECT_EQ(AChunkMgr::slot_index(20 * MB, 0), 16);
  EXPECT_EQ(AChunkMgr::slot_index(22 * MB, 0), AChunkMgr::HUGE_SLOT);
}

TEST(AChunkMgrStaticTest, HoldChargesTouchablePagesOnly) {
  EXPECT_EQ(chunk_hold_size(ACHUNK_SIZE), 2 * MB);
  EXPECT_EQ(chunk_hold_size(1), 2 * MB);
  EXPECT_EQ(chunk_aligned_size(ACHUNK_SIZE + 1), 4 * MB);
  EXPECT_EQ(chunk_hold_size(ACHUNK_SIZE + 1), 2 * MB + ACHUNK_PAGE_SIZE);
}

using AChunkMgrTest = ChunkMgrTest;

TEST_F(AChunkMgrTest, MissMapsThenHitReusesWithoutMapping) {
  AChunk* a = alloc_normal();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % ACHUNK_ALIGN, 0u);
  std::memset(a->data(), 0x5a, ACHUNK_SIZE);  // the whole payload is usable
  EXPECT_EQ(os_.map_calls(), 1);
  EXPECT_TRUE(a->fresh_);  // a new mapping: its payload reads as zero
  mgr_.free_chunk(a);
  EXPECT_EQ(mgr_.get_freelist_hold(), 2 * MB);
  EXPECT_EQ(mgr_.get_used(), 0);
  AChunk* b = alloc_normal();
  EXPECT_EQ(b, a);
  EXPECT_EQ(os_.map_calls(), 1);
  EXPECT_FALSE(b->fresh_);  // from the cache, with whatever the last user wrote
  const ChunkMgrStats s = mgr_.get_stats(false);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.cache_misses, 1);
  EXPECT_EQ(s.hold, 2 * MB);
  EXPECT_EQ(s.used, 2 * MB);
  mgr_.free_chunk(b);
  expect_consistent();
}

TEST_F(AChunkMgrTest, ReuseIsLifo) {
  AChunk* a = alloc_normal();
  AChunk* b = alloc_normal();
  AChunk* c = alloc_normal();
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);
  mgr_.free_chunk(c);
  EXPECT_EQ(alloc_normal(), c);
  EXPECT_EQ(alloc_normal(), b);
  EXPECT_EQ(alloc_normal(), a);
}

TEST_F(AChunkMgrTest, AdaptiveCapCachesEverything) {
  mgr_.set_max_chunk_cache_size(0, true);
  std::vector<AChunk*> chunks;
  for (int i = 0; i < 10; ++i) chunks.push_back(alloc_normal());
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  EXPECT_EQ(total_cached(), 10);
  EXPECT_EQ(os_.unmap_calls(), 0);
  expect_consistent();
}

TEST_F(AChunkMgrTest, CapOfTwoMegabytesKeepsOneChunk) {
  mgr_.set_max_chunk_cache_size(2 * MB, true);
  AChunk* a = alloc_normal();
  AChunk* b = alloc_normal();
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);
  EXPECT_EQ(total_cached(), 1);
  EXPECT_EQ(os_.unmap_calls(), 1);
  EXPECT_EQ(mgr_.get_freelist_hold(), 2 * MB);
  expect_consistent();
}

TEST_F(AChunkMgrTest, MiddleCapBoundsTheCacheAcrossWays) {
  mgr_.set_max_chunk_cache_size(7 * MB, true);  // room for three 2 MiB chunks
  std::vector<AChunk*> chunks;
  for (int i = 0; i < 6; ++i) chunks.push_back(alloc_normal());
  // Free from several threads so chunks land in different ways.
  std::thread t([&] {
    for (int i = 0; i < 3; ++i) mgr_.free_chunk(chunks[i]);
  });
  t.join();
  for (int i = 3; i < 6; ++i) mgr_.free_chunk(chunks[i]);
  EXPECT_EQ(total_cached(), 3);
  EXPECT_EQ(mgr_.get_freelist_hold(), 6 * MB);
  expect_consistent();
}

TEST_F(AChunkMgrTest, RuntimeShrinkReleasesSurplusAtOnce) {
  std::vector<AChunk*> chunks;
  for (int i = 0; i < 5; ++i) chunks.push_back(alloc_normal());
  chunks.push_back(alloc_mb(4));
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  EXPECT_EQ(mgr_.get_freelist_hold(), 5 * 2 * MB + 4 * MB);
  mgr_.set_max_chunk_cache_size(4 * MB, true);
  EXPECT_LE(mgr_.get_freelist_hold(), 4 * MB);
  // Largest first: the 4 MiB chunk went before the 2 MiB ones that fit.
  EXPECT_EQ(mgr_.get_large_freelist_hold(), 0);
  EXPECT_EQ(total_cached(), 2);
  expect_consistent();
  mgr_.set_max_chunk_cache_size(0, true);
  EXPECT_EQ(total_cached(), 2);  // growing the cap releases nothing
}

TEST_F(AChunkMgrTest, LargeSlotsServeTheirExactSizeFirst) {
  AChunk* four = alloc_mb(4);
  AChunk* six = alloc_mb(6);
  mgr_.free_chunk(four);
  mgr_.free_chunk(six);
  EXPECT_EQ(alloc_mb(6), six);
  EXPECT_EQ(alloc_mb(4), four);
  EXPECT_EQ(os_.map_calls(), 2);
  EXPECT_EQ(os_.resize_calls(), 0);
  mgr_.free_chunk(six);
  mgr_.free_chunk(four);
  const ChunkMgrStats s = mgr_.get_stats(false);
  EXPECT_EQ(s.large_maps, 2);
  EXPECT_EQ(s.slots[1].count, 1);  // 4 MB line
  EXPECT_EQ(s.slots[2].count, 1);  // 6 MB line
  expect_consistent();
}

TEST_F(AChunkMgrTest, ALargeRequestNoCachedSizeServesResizesAnotherCachedChunk) {
  AChunk* four = alloc_mb(4);
  static_cast<char*>(four->data())[100] = 7;
  mgr_.free_chunk(four);
  clock_.advance_us(AChunkMgr::RESIZE_MIN_IDLE_US);
  // Idle long enough, it is grown: the pages it had come along (the contents too), no new
  // mapping.
  AChunk* twelve = alloc_mb(12);
  EXPECT_EQ(os_.map_calls(), 1);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(twelve->aligned(), 12 * MB);
  EXPECT_EQ(static_cast<char*>(twelve->data())[100], 7);
  EXPECT_EQ(mgr_.get_hold(), chunk_hold_size(payload_for_mb(12)));
  EXPECT_EQ(mgr_.get_total_hold(), 12 * MB);
  mgr_.free_chunk(twelve);
  clock_.advance_us(AChunkMgr::RESIZE_MIN_IDLE_US);
  // Shrunk: the smallest bigger chunk, its tail unmapped.
  AChunk* six = alloc_mb(6);
  EXPECT_EQ(os_.resize_calls(), 2);
  EXPECT_EQ(six->aligned(), 6 * MB);
  EXPECT_EQ(mgr_.get_hold(), chunk_hold_size(payload_for_mb(6)));
  EXPECT_EQ(mgr_.get_total_hold(), 6 * MB);
  // A huge request grows the biggest cached large chunk, however recently cached.
  mgr_.free_chunk(six);
  AChunk* huge = alloc_mb(24);
  EXPECT_EQ(os_.resize_calls(), 3);
  EXPECT_EQ(os_.map_calls(), 1);
  // Freed, it is cached whole in the huge slot.
  mgr_.free_chunk(huge);
  EXPECT_EQ(os_.resize_calls(), 3);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::HUGE_SLOT), 1);
  // And an 8 MiB request shrinks it in turn once it is idle: still no new mapping.
  clock_.advance_us(AChunkMgr::RESIZE_MIN_IDLE_US);
  AChunk* eight = alloc_mb(8);
  EXPECT_EQ(os_.map_calls(), 1);
  EXPECT_EQ(os_.resize_calls(), 4);
  mgr_.free_chunk(eight);
  mgr_.set_max_chunk_cache_size(0, false);  // the large slots flushed
  // Nothing cached any more: a plain map, counted as a miss.
  AChunk* ten = alloc_mb(10);
  EXPECT_EQ(os_.map_calls(), 2);
  mgr_.free_chunk(ten);
  const ChunkMgrStats s = mgr_.get_stats(false);
  EXPECT_EQ(s.cache_resizes, 4);
  EXPECT_EQ(s.cache_hits, 4);
  EXPECT_EQ(s.cache_misses, 2);  // the first 4 MiB and the last 10 MiB
  expect_consistent();
}

TEST_F(AChunkMgrTest, AChunkOfASizeAskedForAMomentAgoIsNotResizedForAnotherSize) {
  // A workload cycling through several sizes keeps one chunk of each cached, rather than
  // converting them back and forth (each conversion faults pages in).
  mgr_.free_chunk(alloc_mb(4));
  clock_.advance_us(AChunkMgr::RESIZE_UNASKED_US - 1);
  AChunk* twelve = alloc_mb(12);
  EXPECT_EQ(os_.map_calls(), 2);
  EXPECT_EQ(os_.resize_calls(), 0);
  mgr_.free_chunk(twelve);
  AChunk* four = alloc_mb(4);  // its own size is still there
  EXPECT_EQ(four->aligned(), 4 * MB);
  EXPECT_EQ(os_.map_calls(), 2);
  mgr_.free_chunk(four);
  EXPECT_EQ(mgr_.get_stats(false).cache_misses, 2);
  expect_consistent();
}

TEST_F(AChunkMgrTest, AChunkOfASizeStillAskedForIsResizedOnlyOnceIdleForLong) {
  // Two 4 MiB chunks in a stationary mix: one stays cached while the other is asked for
  // again and again. The cached one keeps its size until it has idled RESIZE_MIN_IDLE_US.
  AChunk* kept = alloc_mb(4);
  AChunk* busy = alloc_mb(4);
  mgr_.free_chunk(kept);
  const int64_t step = AChunkMgr::RESIZE_UNASKED_US / 2;
  auto ask_again = [&] {
    clock_.advance_us(step);
    mgr_.free_chunk(busy);
    busy = alloc_mb(4);
  };
  for (int64_t idle = step; idle < AChunkMgr::RESIZE_MIN_IDLE_US; idle += step) ask_again();
  AChunk* twelve = alloc_mb(12);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(os_.map_calls(), 3);
  mgr_.free_chunk(twelve);
  ask_again();
  // Idle RESIZE_MIN_IDLE_US now: surplus, and resized for the next size that misses.
  AChunk* eighteen = alloc_mb(18);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(os_.map_calls(), 3);
  mgr_.free_chunk(eighteen);
  mgr_.free_chunk(busy);
  expect_consistent();
}

TEST_F(AChunkMgrTest, AChunkOfASizeNobodyAsksForAnyMoreServesAnotherSizeAtOnce) {
  // A drifting mix: the last requests asked for 8 MiB, not 4 any more. The 4 MiB chunk,
  // freed just now, is resized for the new size rather than a new mapping faulted in
  // beside it.
  AChunk* four = alloc_mb(4);
  for (int i = 0; i < AChunkMgr::RESIZE_UNASKED_REQUESTS - 1; ++i) {
    clock_.advance_us(AChunkMgr::RESIZE_UNASKED_US);
    mgr_.free_chunk(alloc_mb(8));
  }
  mgr_.free_chunk(four);
  EXPECT_EQ(os_.map_calls(), 2);
  AChunk* twelve = alloc_mb(12);
  EXPECT_EQ(os_.map_calls(), 2);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(twelve->aligned(), 12 * MB);
  // The 8 MiB chunk, asked for a request ago, stays as it is.
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::NORMAL_ACHUNK_NWAY + 2), 1);
  mgr_.free_chunk(twelve);
  EXPECT_EQ(mgr_.get_stats(false).cache_resizes, 1);
  expect_consistent();
}

TEST_F(AChunkMgrTest, AFastLoopOverManySizesKeepsAChunkOfEach) {
  // Requests far apart in count but not in time (a loop calloc'ing buffers of many sizes):
  // no size is unasked, so none is converted while the loop runs.
  const int sizes[] = {4, 6, 8, 10, 12, 14};
  for (int mb : sizes) mgr_.free_chunk(alloc_mb(mb));
  const int64_t maps = os_.map_calls();
  for (int round = 0; round < 3; ++round) {
    for (int mb : sizes) {
      clock_.advance_us(AChunkMgr::RESIZE_UNASKED_US / 20);
      mgr_.free_chunk(alloc_mb(mb));
    }
  }
  // A size none of the last requests asked for, within RESIZE_UNASKED_US: a new mapping.
  mgr_.free_chunk(alloc_mb(18));
  EXPECT_EQ(os_.map_calls(), maps + 1);
  EXPECT_EQ(os_.resize_calls(), 0);
  // Once RESIZE_UNASKED_US has passed too, the next miss converts the biggest smaller chunk
  // of an unasked size: 10 MiB (18, 14 and 12 MiB were among the last requests).
  clock_.advance_us(AChunkMgr::RESIZE_UNASKED_US);
  AChunk* twenty = alloc_mb(20);
  EXPECT_EQ(os_.map_calls(), maps + 1);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::NORMAL_ACHUNK_NWAY + 3), 0);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::NORMAL_ACHUNK_NWAY + 4), 1);
  mgr_.free_chunk(twenty);
  expect_consistent();
}

TEST_F(AChunkMgrTest, AFailedResizeUnmapsTheCachedChunkAndMapsAFreshOne) {
  mgr_.free_chunk(alloc_mb(4));
  clock_.advance_us(AChunkMgr::RESIZE_MIN_IDLE_US);
  os_.fail_next_resizes(1);
  AChunk* twelve = alloc_mb(12);
  ASSERT_NE(twelve, nullptr);
  EXPECT_EQ(os_.map_calls(), 2);
  EXPECT_EQ(mgr_.get_total_hold(), 12 * MB);
  EXPECT_EQ(mgr_.get_freelist_hold(), 0);
  mgr_.free_chunk(twelve);
  expect_consistent();
}

TEST_F(AChunkMgrTest, LargeRequestTakesTheNextSizeWithinAQuarter) {
  AChunk* ten = alloc_mb(10);
  mgr_.free_chunk(ten);
  AChunk* eight = alloc_mb(8);  // no 8 MiB chunk cached; 10 MiB is 25% more
  ASSERT_EQ(eight, ten);
  EXPECT_EQ(os_.map_calls(), 1);
  // The 2 MiB tail keeps its pages, still charged: the request's owner is charged 8.
  EXPECT_EQ(os_.release_calls(), 0);
  EXPECT_EQ(mgr_.get_hold(), 10 * MB);
  EXPECT_EQ(eight->hold(), chunk_hold_size(payload_for_mb(8)));
  EXPECT_EQ(eight->aligned(), 10 * MB);  // it keeps its mapping
  mgr_.free_chunk(eight);
  EXPECT_EQ(mgr_.cached_count(AChunkMgr::slot_index(10 * MB, 0)), 1);
  EXPECT_EQ(mgr_.get_large_freelist_hold(), 10 * MB);
  AChunk* ten_again = alloc_mb(10);  // its own size: nothing to charge, nothing to fault
  ASSERT_EQ(ten_again, ten);
  EXPECT_EQ(mgr_.get_hold(), 10 * MB);
  mgr_.free_chunk(ten_again);
  clock_.advance_us(AChunkMgr::RESIZE_MIN_IDLE_US);
  // 8 MiB would be a third more than 6: not taken as it is, but resized (tail unmapped).
  AChunk* six = alloc_mb(6);
  EXPECT_EQ(six->aligned(), 6 * MB);
  EXPECT_EQ(os_.resize_calls(), 1);
  mgr_.free_chunk(six);
  const ChunkMgrStats s = mgr_.get_stats(false);
  EXPECT_EQ(s.cache_hits, 3);
  EXPECT_EQ(s.large_maps, 1);
  expect_consistent();
}

TEST_F(AChunkMgrTest, MeasuringTheCachesResidentPagesHoldsUpNoAllocation) {
  mgr_.free_chunk(alloc_normal());
  mgr_.free_chunk(alloc_mb(8));
  // While a cached chunk's pages are counted (a mincore each), another thread takes a
  // chunk from the same slot: it must not wait for the count to finish.
  bool served = true;
  std::vector<std::thread> takers;
  std::vector<AChunk*> taken(4, nullptr);
  std::atomic<int> done{0};
  os_.set_resident_hook([&] {
    const int i = static_cast<int>(takers.size());
    const int before = done.load();
    takers.emplace_back([&, i] {
      taken[i] = alloc_normal();
      done.fetch_add(1);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (done.load() == before && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    served = served && done.load() > before;
  });
  const ChunkMgrStats s = mgr_.get_stats(true);
  os_.set_resident_hook(nullptr);
  for (std::thread& t : takers) t.join();  // (they finish once no lock is held)
  for (AChunk* c : taken) mgr_.free_chunk(c);
  EXPECT_TRUE(served);
  EXPECT_GE(os_.resident_calls(), 2);
  EXPECT_EQ(s.cache_resident, 2 * MB + 8 * MB);
  expect_consistent();
}

TEST_F(AChunkMgrTest, ResidentPagesOfManyCachedChunksAreSampledTheRestCountWhole) {
  os_.set_resident_per_range(4096);
  std::vector<AChunk*> chunks;
  for (int i = 0; i < AChunkMgr::RESIDENT_SAMPLE + 3; ++i) chunks.push_back(alloc_mb(4));
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  const ChunkMgrStats s = mgr_.get_stats(true);
  EXPECT_EQ(os_.resident_calls(), AChunkMgr::RESIDENT_SAMPLE);
  EXPECT_EQ(s.cache_resident, AChunkMgr::RESIDENT_SAMPLE * 4096 + 3 * 4 * MB);
  expect_consistent();
}

TEST_F(AChunkMgrTest, LargeCacheOffUnmapsLargeChunks) {
  AChunk* a = alloc_mb(8);
  mgr_.free_chunk(a);
  EXPECT_EQ(mgr_.get_large_freelist_hold(), 8 * MB);
  mgr_.set_max_chunk_cache_size(0, false);  // switching off flushes the large slots
  EXPECT_EQ(mgr_.get_large_freelist_hold(), 0);
  AChunk* b = alloc_mb(8);
  mgr_.free_chunk(b);
  EXPECT_EQ(total_cached(), 0);
  expect_consistent();
}

TEST_F(AChunkMgrTest, LargeChunksTakeAtMostHalfTheBudget) {
  mgr_.set_max_chunk_cache_size(16 * MB, true);  // budget for large chunks: 8 MiB
  AChunk* a = alloc_mb(6);
  AChunk* b = alloc_mb(4);
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);  // 6 + 4 > 8: refused
  EXPECT_EQ(mgr_.get_large_freelist_hold(), 6 * MB);
  EXPECT_EQ(total_cached(), 1);
  expect_consistent();
}

TEST_F(AChunkMgrTest, ReusingALargeChunkReconcilesItsHold) {
  const int64_t big = 4 * MB - ACHUNK_HEADER_SIZE;  // charges all 4 MiB
  const int64_t small = 2 * MB + 100 * 1024;        // same 4 MiB mapping, fewer pages
  AChunk* a = mgr_.alloc_chunk(big);
  mgr_.free_chunk(a);
  AChunk* b = mgr_.alloc_chunk(small);
  ASSERT_EQ(b, a);
  // The tail the small request cannot touch keeps its pages and its charge.
  EXPECT_EQ(os_.release_calls(), 0);
  EXPECT_EQ(mgr_.get_hold(), 4 * MB);
  EXPECT_EQ(b->hold(), chunk_hold_size(small));
  mgr_.free_chunk(b);
  AChunk* c = mgr_.alloc_chunk(big);
  ASSERT_EQ(c, a);
  EXPECT_EQ(mgr_.get_hold(), 4 * MB);
  mgr_.free_chunk(c);
  expect_consistent();
}

// A chunk a small request mapped is charged more when a bigger one reuses it, and keeps
// that charge for the next small one.
TEST_F(AChunkMgrTest, ReusingALargeChunkChargesWhatABiggerRequestNeeds) {
  const int64_t big = 4 * MB - ACHUNK_HEADER_SIZE;
  const int64_t small = 2 * MB + 100 * 1024;
  AChunk* a = mgr_.alloc_chunk(small);
  EXPECT_EQ(mgr_.get_hold(), chunk_hold_size(small));
  mgr_.free_chunk(a);
  AChunk* b = mgr_.alloc_chunk(big);
  ASSERT_EQ(b, a);
  EXPECT_EQ(mgr_.get_hold(), 4 * MB);
  mgr_.free_chunk(b);
  ASSERT_EQ(mgr_.alloc_chunk(small), a);
  EXPECT_EQ(mgr_.get_hold(), 4 * MB);
  mgr_.free_chunk(a);
  expect_consistent();
}

// The busy loop the chunk cache is for: two sizes in turn on one cached chunk (best fit
// from the next slot, then the chunk's own). Nothing goes back to the OS per round.
TEST_F(AChunkMgrTest, AlternatingSizesOnOneChunkReleaseNothingPerRound) {
  for (int round = 0; round < 100; ++round) {
    AChunk* a = alloc_mb(10);
    mgr_.free_chunk(a);
    AChunk* b = alloc_mb(8);  // takes the 10 MiB chunk
    ASSERT_EQ(b, a);
    mgr_.free_chunk(b);
  }
  EXPECT_EQ(os_.map_calls(), 1);
  EXPECT_EQ(os_.release_calls(), 0);
  EXPECT_EQ(os_.resize_calls(), 0);
  EXPECT_EQ(mgr_.get_hold(), 10 * MB);
  expect_consistent();
}

TEST_F(AChunkMgrTest, ThreadPrefersItsOwnWayThenTakesAnother) {
  AChunk* a = alloc_normal();
  const int my_way = AChunkMgr::thread_way();
  int other_way = my_way;
  // Ways go to threads round-robin, so one of 8 new threads has a different way.
  for (int tries = 0; tries < AChunkMgr::NORMAL_ACHUNK_NWAY && other_way == my_way; ++tries) {
    std::thread t([&] {
      if (AChunkMgr::thread_way() == my_way) return;
      other_way = AChunkMgr::thread_way();
      mgr_.free_chunk(a);
    });
    t.join();
  }
  ASSERT_NE(other_way, my_way);
  EXPECT_EQ(mgr_.cached_count(other_way), 1);
  EXPECT_EQ(alloc_normal(), a);  // found in the other thread's way
  EXPECT_EQ(mgr_.get_stats(false).cache_hits, 1);
}

struct CapturedError {
  static inline int count = 0;
  static inline ErrorKind kind = ErrorKind::INVALID_FREE;
  static inline std::string message;
  static void handler(ErrorKind k, const void*, const char* msg) {
    ++count;
    kind = k;
    message = msg;
  }
};

class AChunkMgrErrorTest : public ChunkMgrTest {
 protected:
  void SetUp() override {
    CapturedError::count = 0;
    previous_ = set_error_handler(&CapturedError::handler);
  }
  void TearDown() override { set_error_handler(previous_); }
  ErrorHandler previous_ = nullptr;
};

TEST_F(AChunkMgrErrorTest, DoubleFreeIsReportedAndChangesNothing) {
  AChunk* a = alloc_normal();
  mgr_.free_chunk(a);
  const ChunkMgrStats before = mgr_.get_stats(false);
  mgr_.free_chunk(a);
  EXPECT_EQ(CapturedError::count, 1);
  EXPECT_EQ(CapturedError::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_NE(CapturedError::message.find("double free"), std::string::npos);
  const ChunkMgrStats after = mgr_.get_stats(false);
  EXPECT_EQ(after.hold, before.hold);
  EXPECT_EQ(total_cached(), 1);
  expect_consistent();
}

TEST_F(AChunkMgrErrorTest, InvalidFreeIsReported) {
  AChunk* a = alloc_normal();
  mgr_.free_chunk(reinterpret_cast<AChunk*>(reinterpret_cast<char*>(a) + 4096));
  EXPECT_EQ(CapturedError::count, 1);
  EXPECT_EQ(CapturedError::kind, ErrorKind::INVALID_FREE);
  EXPECT_NE(CapturedError::message.find("not 2 MiB aligned"), std::string::npos);
  alignas(ACHUNK_ALIGN) static char fake_chunk[sizeof(AChunk)] = {};
  mgr_.free_chunk(reinterpret_cast<AChunk*>(fake_chunk));
  EXPECT_EQ(CapturedError::count, 2);
  EXPECT_NE(CapturedError::message.find("no chunk achunk mapped"), std::string::npos);
  // A chunk of ours whose header was overwritten.
  a->magic_.store(0x12345678);
  mgr_.free_chunk(a);
  EXPECT_EQ(CapturedError::count, 3);
  EXPECT_NE(CapturedError::message.find("bad magic"), std::string::npos);
  a->magic_.store(AChunk::MAGIC_CODE);
  mgr_.free_chunk(a);
  EXPECT_EQ(CapturedError::count, 3);
  expect_consistent();
}

// A huge chunk is unmapped at once; freeing it again must not read its header.
TEST_F(AChunkMgrErrorTest, FreeOfAnUnmappedChunkIsADoubleFree) {
  mgr_.set_max_chunk_cache_size(0, false);  // a huge chunk is then unmapped at once
  AChunk* a = mgr_.alloc_chunk(AChunkMgr::MAX_LARGE_ACHUNK_SIZE + ACHUNK_ALIGN);
  ASSERT_NE(a, nullptr);
  mgr_.free_chunk(a);
  ASSERT_EQ(os_.live_mappings(), 0);
  mgr_.free_chunk(a);
  EXPECT_EQ(CapturedError::count, 1);
  EXPECT_EQ(CapturedError::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_NE(CapturedError::message.find("already free (cached or unmapped)"), std::string::npos);
  expect_consistent();
}

TEST(AChunkMgrDeathTest, DefaultHandlerAbortsWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        FakeOs os;
        FakeClock clock;
        AChunkMgr mgr(os, clock);
        AChunk* a = mgr.alloc_chunk(ACHUNK_SIZE);
        mgr.free_chunk(a);
        mgr.free_chunk(a);
      },
      "achunk: double free of 0x[0-9a-f]+: chunk is already free");
}

// A change of one option applies that option alone: re-applying them all would also
// reset a cap the host set through the API, and flush the cache against it.
TEST_F(AChunkMgrTest, ApplyOptionChangesThatOptionAlone) {
  Options opts;
  mgr_.apply_options(opts);
  mgr_.set_max_chunk_cache_size(4 * MB, true);
  opts.values[OPT_CHUNK_CACHE_TTL_MS] = 5000;
  mgr_.apply_option(OPT_CHUNK_CACHE_TTL_MS, opts);
  EXPECT_EQ(mgr_.get_chunk_cache_ttl_ms(), 5000);
  EXPECT_EQ(mgr_.get_max_chunk_cache_size(), 4 * MB);
  opts.values[OPT_MEMORY_CHUNK_CACHE_SIZE] = 2 * MB;
  mgr_.apply_option(OPT_MEMORY_CHUNK_CACHE_SIZE, opts);
  EXPECT_EQ(mgr_.get_max_chunk_cache_size(), 2 * MB);
  EXPECT_EQ(mgr_.get_chunk_cache_ttl_ms(), 5000);
}

// A placed chunk: its second 2 MiB unit starts at a multiple of head_align; the lead
// before it is mapped with it, and unmapped when it is freed, the chunk cached where it
// was placed.
TEST_F(ChunkMgrTest, HeadAlignPlacesTheChunk) {
  for (int64_t head_align : {int64_t{4} << 20, int64_t{16} << 20}) {
    AChunk* c = mgr_.alloc_chunk(ACHUNK_SIZE, head_align);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ((reinterpret_cast<uintptr_t>(c) + ACHUNK_ALIGN) % head_align, 0u);
    EXPECT_EQ(c->lead_, head_align - ACHUNK_ALIGN);
    EXPECT_EQ(mgr_.get_hold(), c->hold());
    EXPECT_EQ(os_.mapped_bytes(), c->aligned() + c->lead_);
    expect_consistent();
    const int64_t head_unmaps = os_.head_unmaps();
    mgr_.free_chunk(c);
    EXPECT_EQ(os_.head_unmaps(), head_unmaps + 1);
    EXPECT_EQ(c->lead_, 0);
    EXPECT_EQ(total_cached(), 1);
    EXPECT_EQ(os_.mapped_bytes(), c->aligned());
    expect_consistent();
    mgr_.sync_wash();
    EXPECT_EQ(os_.live_mappings(), 0);
    EXPECT_EQ(mgr_.get_hold(), 0);
    expect_consistent();
  }
  EXPECT_EQ(mgr_.alloc_chunk(ACHUNK_SIZE, (int64_t{3} << 20)), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_ARGUMENT);
}

// A loop of buffers aligned to 4 MiB or more must not map, fault in and unmap a chunk
// per round: the next request the freed chunk's place meets (that alignment or a smaller
// one, or none) takes it from the cache.
TEST_F(ChunkMgrTest, AFreedPlacedChunkServesTheNextRequestItsPlaceMeets) {
  constexpr int64_t ALIGN = 16 * MB;
  AChunk* c = mgr_.alloc_chunk(payload_for_mb(6), ALIGN);
  ASSERT_NE(c, nullptr);
  mgr_.free_chunk(c);
  const int64_t maps = os_.map_calls();
  for (int64_t head_align : {ALIGN, 4 * MB, ALIGN}) {
    AChunk* again = mgr_.alloc_chunk(payload_for_mb(6), head_align);
    EXPECT_EQ(again, c) << head_align;
    EXPECT_EQ(again->lead_, 0);
    EXPECT_EQ(mgr_.get_hold(), again->hold());
    mgr_.free_chunk(again);
  }
  // A plain request of the size (or a little smaller) takes it as any cached chunk.
  EXPECT_EQ(mgr_.alloc_chunk(payload_for_mb(6) - MB), c);
  EXPECT_EQ(os_.map_calls(), maps);
  mgr_.free_chunk(c);
  // An alignment its place does not meet maps a chunk of its own.
  const uintptr_t second_unit = reinterpret_cast<uintptr_t>(c) + ACHUNK_ALIGN;
  const int64_t unmet = int64_t{2} << __builtin_ctzll(second_unit);
  if (unmet > 256 * MB) GTEST_SKIP() << "the fake placed the chunk too well to find an unmet one";
  AChunk* other = mgr_.alloc_chunk(payload_for_mb(6), unmet);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, c);
  EXPECT_EQ(os_.map_calls(), maps + 1);
  EXPECT_EQ((reinterpret_cast<uintptr_t>(other) + ACHUNK_ALIGN) % unmet, 0u);
  mgr_.free_chunk(other);
  expect_consistent();
}

// The look is bounded: a request placed for an alignment reads at most PLACED_LOOK
// cached chunks of its size, newest first, so one that meets it behind PLACED_LOOK newer
// ones that do not is not found and a chunk is mapped.
TEST_F(ChunkMgrTest, APlacedRequestLooksAtTheNewestChunksOfItsSizeOnly) {
  constexpr int64_t ALIGN = 64 * MB;
  AChunk* placed = mgr_.alloc_chunk(payload_for_mb(4), ALIGN);
  ASSERT_NE(placed, nullptr);
  std::vector<AChunk*> unmet;
  std::vector<AChunk*> met;  // plain chunks that meet ALIGN by chance: kept out of the cache
  while (static_cast<int>(unmet.size()) < AChunkMgr::PLACED_LOOK) {
    AChunk* c = mgr_.alloc_chunk(payload_for_mb(4));
    ASSERT_NE(c, nullptr);
    ((reinterpret_cast<uintptr_t>(c) + ACHUNK_ALIGN) % ALIGN == 0 ? met : unmet).push_back(c);
  }
  mgr_.free_chunk(placed);
  for (AChunk* c : unmet) mgr_.free_chunk(c);
  int64_t maps = os_.map_calls();
  AChunk* fresh = mgr_.alloc_chunk(payload_for_mb(4), ALIGN);
  EXPECT_NE(fresh, placed);
  EXPECT_EQ(os_.map_calls(), maps + 1);
  // One of the newer ones taken off the top, the placed chunk is within the look again.
  AChunk* top = mgr_.alloc_chunk(payload_for_mb(4));
  EXPECT_EQ(top, unmet.back());
  maps = os_.map_calls();
  AChunk* found = mgr_.alloc_chunk(payload_for_mb(4), ALIGN);
  EXPECT_EQ(found, placed);
  EXPECT_EQ(os_.map_calls(), maps);
  for (AChunk* c : {fresh, top, found}) mgr_.free_chunk(c);
  for (AChunk* c : met) mgr_.free_chunk(c);
  expect_consistent();
}

// A lead the OS refuses to unmap leaves the placed chunk as it was, unmapped whole.
TEST_F(ChunkMgrTest, APlacedChunkWhoseLeadStaysMappedIsUnmappedWhole) {
  AChunk* c = mgr_.alloc_chunk(payload_for_mb(6), 8 * MB);
  ASSERT_NE(c, nullptr);
  os_.fail_nth(FakeOs::Call::UNMAP, 1);
  mgr_.free_chunk(c);
  EXPECT_EQ(os_.failed_head_unmaps(), 1);
  EXPECT_EQ(total_cached(), 0);
  EXPECT_EQ(os_.live_mappings(), 0);
  EXPECT_EQ(mgr_.get_hold(), 0);
  expect_consistent();
}

}  // namespace
}  // namespace achunk::testing
