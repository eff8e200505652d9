// Idle eviction: TTL boundary, one eviction per free, the rotating cursor, the
// evicting_ guard, the counter, and the steady-load behaviour LIFO reuse makes possible.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

constexpr int64_t TTL_MS = AChunkMgr::CACHE_EXPIRE_US / 1000;

class AChunkMgrEvictTest : public ChunkMgrTest {
 protected:
  // Frees a chunk that is never cached, purely to give free_chunk a chance to evict: a
  // huge placed chunk (no test here caches a huge one it could reuse) whose lead the OS
  // refuses to unmap, so its free unmaps it whole and only the eviction touches the cache.
  void poke_free() {
    AChunk* c = mgr_.alloc_chunk(payload_for_mb(24), 4 * MB);
    ASSERT_NE(c, nullptr);
    ASSERT_GT(c->lead_, 0);
    os_.fail_nth(FakeOs::Call::UNMAP, 1);
    mgr_.free_chunk(c);
  }
  void cache_normal_chunks(int n) {
    std::vector<AChunk*> chunks;
    for (int i = 0; i < n; ++i) chunks.push_back(alloc_normal());
    for (AChunk* c : chunks) mgr_.free_chunk(c);
  }
};

TEST_F(AChunkMgrEvictTest, DefaultTtlIsThirtySeconds) {
  EXPECT_EQ(mgr_.get_chunk_cache_ttl_ms(), 30000);
}

TEST_F(AChunkMgrEvictTest, ExpiryBoundary) {
  cache_normal_chunks(1);
  clock_.advance_us(AChunkMgr::CACHE_EXPIRE_US - 1000);  // 29.999 s
  poke_free();
  EXPECT_EQ(total_cached(), 1);
  EXPECT_EQ(mgr_.get_expired_unmaps(), 0);
  clock_.advance_us(1000);  // 30 s
  poke_free();
  EXPECT_EQ(total_cached(), 0);
  EXPECT_EQ(mgr_.get_expired_unmaps(), 1);
  EXPECT_EQ(mgr_.get_hold(), 0);
  expect_consistent();
}

TEST_F(AChunkMgrEvictTest, AtMostOneEvictionPerFree) {
  cache_normal_chunks(5);
  clock_.advance_ms(TTL_MS * 2);
  for (int i = 1; i <= 5; ++i) {
    poke_free();
    EXPECT_EQ(mgr_.get_expired_unmaps(), i);
    EXPECT_EQ(total_cached(), 5 - i);
  }
  poke_free();
  EXPECT_EQ(mgr_.get_expired_unmaps(), 5);
  expect_consistent();
}

TEST_F(AChunkMgrEvictTest, TheFreedChunkItselfIsNotEvicted) {
  cache_normal_chunks(1);
  clock_.advance_ms(TTL_MS);
  AChunk* fresh = alloc_normal();  // reuses the cached chunk
  mgr_.free_chunk(fresh);          // re-stamped on entry, so it is young again
  EXPECT_EQ(total_cached(), 1);
  EXPECT_EQ(mgr_.get_expired_unmaps(), 0);
}

TEST_F(AChunkMgrEvictTest, CursorReachesEverySlot) {
  // One expired chunk in every large slot and several in this thread's normal way.
  std::vector<AChunk*> chunks;
  for (int mb = 4; mb <= 20; mb += 2) chunks.push_back(alloc_mb(mb));
  for (int i = 0; i < 4; ++i) chunks.push_back(alloc_normal());
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  const int64_t cached = total_cached();
  ASSERT_EQ(cached, 9 + 4);
  clock_.advance_ms(TTL_MS);
  // Each eviction resumes after the slot it took from, so within one rotation every
  // non-empty slot loses a chunk; the busy normal way cannot starve the large slots.
  std::vector<int64_t> before(AChunkMgr::CACHEABLE_SLOTS);
  int nonempty = 0;
  for (int i = 0; i < AChunkMgr::CACHEABLE_SLOTS; ++i) {
    before[i] = mgr_.cached_count(i);
    nonempty += before[i] > 0 ? 1 : 0;
  }
  ASSERT_EQ(nonempty, 10);
  for (int i = 0; i < nonempty; ++i) poke_free();
  for (int i = 0; i < AChunkMgr::CACHEABLE_SLOTS; ++i) {
    if (before[i] > 0) {
      EXPECT_EQ(mgr_.cached_count(i), before[i] - 1) << "slot " << i;
    }
  }
  for (int64_t i = nonempty; i < cached; ++i) poke_free();
  EXPECT_EQ(total_cached(), 0);
  EXPECT_EQ(mgr_.get_expired_unmaps(), cached);
  expect_consistent();
}

TEST_F(AChunkMgrEvictTest, DisabledTtlNeverEvicts) {
  mgr_.set_chunk_cache_ttl_ms(-1);
  cache_normal_chunks(3);
  clock_.advance_ms(TTL_MS * 1000);
  for (int i = 0; i < 10; ++i) poke_free();
  EXPECT_EQ(total_cached(), 3);
  EXPECT_EQ(mgr_.get_expired_unmaps(), 0);
}

TEST_F(AChunkMgrEvictTest, RuntimeTtlChangeAppliesToChunksAlreadyCached) {
  cache_normal_chunks(1);
  clock_.advance_ms(1500);
  poke_free();
  EXPECT_EQ(total_cached(), 1);
  mgr_.set_chunk_cache_ttl_ms(1000);
  poke_free();
  EXPECT_EQ(total_cached(), 0);
}

TEST_F(AChunkMgrEvictTest, NothingExpiredMeansNoExtraUnmaps) {
  cache_normal_chunks(4);
  const int64_t unmaps = os_.unmap_calls();
  for (int i = 0; i < 100; ++i) {
    clock_.advance_ms(100);
    mgr_.free_chunk(alloc_normal());
  }
  EXPECT_EQ(os_.unmap_calls(), unmaps);
  EXPECT_EQ(total_cached(), 4);
}

TEST_F(AChunkMgrEvictTest, SteadyLoadKeepsWorkingSetAndExpiresSurplus) {
  constexpr int M = 12;  // chunks cached after a burst
  constexpr int K = 3;   // working set of the steady load that follows
  cache_normal_chunks(M);
  const int64_t maps = os_.map_calls();
  const ChunkMgrStats start = mgr_.get_stats(false);
  // 60 s of steady load: every 100 ms allocate K chunks and free them again.
  for (int step = 0; step < 600; ++step) {
    clock_.advance_ms(100);
    AChunk* held[K];
    for (AChunk*& c : held) c = alloc_normal();
    for (AChunk* c : held) mgr_.free_chunk(c);
  }
  const ChunkMgrStats end = mgr_.get_stats(false);
  EXPECT_EQ(os_.map_calls(), maps);  // no allocation missed
  EXPECT_EQ(end.cache_misses, start.cache_misses);
  EXPECT_EQ(end.cache_hits - start.cache_hits, 600 * K);
  EXPECT_EQ(total_cached(), K);  // the surplus expired
  EXPECT_EQ(mgr_.get_expired_unmaps(), M - K);
  expect_consistent();
}

TEST_F(AChunkMgrEvictTest, ConcurrentFreeSkipsWhileAnotherThreadEvicts) {
  AChunk* first = alloc_normal();
  AChunk* second = alloc_normal();
  cache_normal_chunks(3);
  clock_.advance_ms(TTL_MS);

  std::mutex mu;
  std::condition_variable cv;
  bool in_unmap = false;
  bool release = false;
  os_.set_unmap_hook([&] {
    std::unique_lock<std::mutex> lock(mu);
    in_unmap = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  // Thread A caches `first`, then evicts an expired chunk and blocks inside its munmap
  // while holding evicting_ (caching `first` itself does not unmap anything).
  std::thread a([&] { mgr_.free_chunk(first); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_unmap; });
  }
  os_.set_unmap_hook(nullptr);
  const int64_t cached_before = total_cached();
  // Thread B frees while A is evicting: it must return without evicting or waiting.
  mgr_.free_chunk(second);
  EXPECT_EQ(total_cached(), cached_before + 1);
  EXPECT_EQ(mgr_.get_expired_unmaps(), 0);  // A's eviction has not finished counting
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  a.join();
  EXPECT_EQ(mgr_.get_expired_unmaps(), 1);
  EXPECT_EQ(total_cached(), 4);
  expect_consistent();
}

TEST_F(AChunkMgrEvictTest, ExpiredUnmapsIsPrinted) {
  cache_normal_chunks(2);
  clock_.advance_ms(TTL_MS);
  poke_free();
  char buf[4096];
  mgr_.print(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find("expired_unmaps=              1"), std::string::npos) << buf;
  mgr_.print_json(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find("\"expired_unmaps\":1"), std::string::npos) << buf;
}

}  // namespace
}  // namespace achunk::testing

namespace achunk::testing {
namespace {

class AChunkMgrReleaseTest : public ChunkMgrTest {};

TEST_F(AChunkMgrReleaseTest, ReleaseExpiredTakesEveryExpiredChunkAndNothingYounger) {
  std::vector<AChunk*> old_chunks;
  for (int i = 0; i < 5; ++i) old_chunks.push_back(alloc_normal());
  old_chunks.push_back(alloc_mb(6));
  for (AChunk* c : old_chunks) mgr_.free_chunk(c);
  clock_.advance_ms(20000);
  mgr_.free_chunk(alloc_normal());  // reuses one old chunk: young again
  EXPECT_EQ(mgr_.release_expired(), 0);
  clock_.advance_ms(10000);  // the 5 untouched ones are now 30 s old
  EXPECT_EQ(mgr_.release_expired(), 5);
  EXPECT_EQ(total_cached(), 1);
  EXPECT_EQ(mgr_.get_expired_unmaps(), 5);
  mgr_.set_chunk_cache_ttl_ms(-1);
  clock_.advance_ms(100000);
  EXPECT_EQ(mgr_.release_expired(), 0);  // eviction off
  expect_consistent();
}

}  // namespace
}  // namespace achunk::testing
