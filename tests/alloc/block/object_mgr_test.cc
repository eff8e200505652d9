#include "alloc/block/object_mgr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "alloc/object/object_set.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class ObjectMgrTest : public ChunkMgrTest {
 protected:
  // The shard lock_any() gives a new thread, released before the thread ends.
  int shard_for_new_thread(ObjectMgr& mgr) {
    int got = -1;
    std::thread([&] {
      SubObjectMgr& s = mgr.lock_any();
      got = index_of(mgr, s);
      s.lock_.unlock();
    }).join();
    return got;
  }
  static int index_of(ObjectMgr& mgr, SubObjectMgr& s) {
    for (int i = 0; i < ObjectMgr::MAX_SHARDS; ++i) {
      if (&mgr.shard(i) == &s) return i;
    }
    return -1;
  }

  // One collision: shard 0 is held here while a new thread asks for a shard. Returns the
  // shard the thread got: a new one, or shard 0 after waiting for it.
  static int collide(ObjectMgr& mgr) {
    SubObjectMgr& held = mgr.shard(0);
    held.lock_.lock();
    const int before = mgr.collisions();
    int got = -1;
    std::atomic<bool> done{false};
    std::thread asker([&] {
      SubObjectMgr& s = mgr.lock_any();
      got = index_of(mgr, s);
      s.lock_.unlock();
      done.store(true);
    });
    // It either opened a shard (done) or counted its collision and waits for shard 0.
    while (!done.load() && mgr.collisions() == before) std::this_thread::yield();
    held.lock_.unlock();
    asker.join();
    return got;
  }

  DirectChunkSource source_{mgr_};
};

TEST_F(ObjectMgrTest, CollisionsNowAndThenAmongManyLockingsOpenNoShard) {
  ObjectSet set(source_);
  ObjectMgr& mgr = set.object_mgr();
  mgr.set_contention_rule(4, ObjectMgr::MAX_SHARDS);
  for (int round = 0; round < 3; ++round) {
    // 4 collisions among 100 lockings: fewer than one in ACQUISITIONS_PER_COLLISION.
    for (int i = 0; i < 100; ++i) mgr.lock_any().lock_.unlock();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(collide(mgr), 0);
    EXPECT_EQ(mgr.open_shards(), 1);
    EXPECT_EQ(mgr.collisions(), 0);  // the window was judged and a new one begun
  }
}

TEST_F(ObjectMgrTest, ABurstOfCollisionsOpensAShard) {
  ObjectSet set(source_);
  ObjectMgr& mgr = set.object_mgr();
  mgr.set_contention_rule(4, ObjectMgr::MAX_SHARDS);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(collide(mgr), 0);  // they wait
  EXPECT_EQ(mgr.open_shards(), 1);
  EXPECT_EQ(collide(mgr), 1);  // the fourth in a row opens shard 1 instead of waiting
  EXPECT_EQ(mgr.open_shards(), 2);
}

TEST_F(ObjectMgrTest, NoMoreShardsOpenThanTheCpusAllow) {
  ObjectSet set(source_);
  ObjectMgr& mgr = set.object_mgr();
  EXPECT_EQ(mgr.max_open(), ObjectMgr::max_open_for(usable_cpus()));
  mgr.set_contention_rule(1, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(collide(mgr), 0);
  EXPECT_EQ(mgr.open_shards(), 1);
  // One shard per CPU, at least one, at most MAX_SHARDS.
  EXPECT_EQ(ObjectMgr::max_open_for(0), 1);
  EXPECT_EQ(ObjectMgr::max_open_for(1), 1);
  EXPECT_EQ(ObjectMgr::max_open_for(2), 2);
  EXPECT_EQ(ObjectMgr::max_open_for(6), 6);
  EXPECT_EQ(ObjectMgr::max_open_for(96), ObjectMgr::MAX_SHARDS);
}

TEST_F(ObjectMgrTest, WithoutContentionEveryThreadWorksInOneShard) {
  ObjectSet set(source_);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<void*> objs;
      for (int i = 0; i < 50; ++i) objs.push_back(set.alloc(100 * 1024, 0));
      for (void* p : objs) ObjectSet::free(p);
      set.flush_thread_heap();
    });
    threads.back().join();  // one at a time: no lock is ever busy
  }
  EXPECT_EQ(set.object_mgr().open_shards(), 1);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(ObjectMgrTest, ABusyShardMakesTheNextThreadOpenAnotherAndKeepIt) {
  ObjectSet set(source_);
  set.object_mgr().set_contention_rule(1, ObjectMgr::MAX_SHARDS);  // open at once
  ObjectMgr& mgr = set.object_mgr();
  SubObjectMgr& first = mgr.lock_any();
  ASSERT_EQ(index_of(mgr, first), 0);
  void* big = nullptr;
  int second = -1;
  int again = -1;
  std::atomic<bool> asked{false};
  std::atomic<bool> released{false};
  std::thread other([&] {
    big = set.alloc(300 * 1024, 0);  // shard 0 is busy: a second shard is opened
    SubObjectMgr& s = mgr.lock_any();
    second = index_of(mgr, s);
    s.lock_.unlock();
    asked.store(true);
    while (!released.load()) std::this_thread::yield();
    // Shard 0 is free again, yet the thread stays where it last got in.
    SubObjectMgr& s2 = mgr.lock_any();
    again = index_of(mgr, s2);
    s2.lock_.unlock();
  });
  while (!asked.load()) std::this_thread::yield();
  first.lock_.unlock();
  released.store(true);
  other.join();
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(mgr.open_shards(), 2);
  EXPECT_EQ(second, 1);
  EXPECT_EQ(again, 1);
  // The object's chunk belongs to shard 1; its free goes there, whoever frees it.
  EXPECT_EQ(&ObjectMgr::shard_of(big), &mgr.shard(1));
  EXPECT_EQ(ObjectSet::owner_of(big), &set);
  EXPECT_GT(mgr.shard(1).block_set_.hold(), 0);
  EXPECT_EQ(mgr.shard(0).block_set_.hold(), 0);
  ObjectSet::free(big);
  EXPECT_EQ(mgr.shard(1).block_set_.hold(), 0);
  EXPECT_EQ(set.hold(), 0);
  // Uncontended now: a fresh thread starts from its own (zero) hint and stays in shard 0.
  EXPECT_EQ(shard_for_new_thread(mgr), 0);
}

TEST_F(ObjectMgrTest, WithEveryShardBusyAThreadWaitsForItsOwnInsteadOfOpeningMore) {
  ObjectSet set(source_);
  set.object_mgr().set_contention_rule(1, ObjectMgr::MAX_SHARDS);  // open at once
  ObjectMgr& mgr = set.object_mgr();
  // Open all shards by holding each while asking for another.
  std::vector<SubObjectMgr*> held;
  for (int i = 0; i < ObjectMgr::MAX_SHARDS; ++i) held.push_back(&mgr.lock_any());
  EXPECT_EQ(mgr.open_shards(), ObjectMgr::MAX_SHARDS);
  for (int i = 0; i < ObjectMgr::MAX_SHARDS; ++i) EXPECT_EQ(index_of(mgr, *held[i]), i);
  int got = -1;
  std::thread waiter([&] {
    SubObjectMgr& s = mgr.lock_any();  // a new thread's hint is shard 0
    got = index_of(mgr, s);
    s.lock_.unlock();
  });
  for (SubObjectMgr* s : held) s->lock_.unlock();
  waiter.join();
  EXPECT_EQ(got, 0);
  EXPECT_EQ(mgr.open_shards(), ObjectMgr::MAX_SHARDS);
}

TEST_F(ObjectMgrTest, SetTotalsAndScansCoverEveryShard) {
  ObjectSet set(source_);
  set.object_mgr().set_contention_rule(1, ObjectMgr::MAX_SHARDS);  // open at once
  ObjectMgr& mgr = set.object_mgr();
  const uint16_t label = 7;
  void* in_first = set.alloc(200 * 1024, label);
  SubObjectMgr& first = mgr.lock_any();
  void* in_second = nullptr;
  std::thread([&] {
    in_second = set.alloc(200 * 1024, label);
    set.flush_thread_heap();
  }).join();
  first.lock_.unlock();
  ASSERT_NE(in_second, nullptr);
  ASSERT_NE(&ObjectMgr::shard_of(in_first), &ObjectMgr::shard_of(in_second));
  EXPECT_EQ(set.hold(), mgr.shard(0).block_set_.hold() + mgr.shard(1).block_set_.hold());
  EXPECT_EQ(set.span_used(), mgr.shard(0).block_set_.used() + mgr.shard(1).block_set_.used());
  LabelUsage usage[4];
  LabelUsage total;
  ASSERT_EQ(set.scan_usage(usage, 4, &total), 1);
  EXPECT_EQ(usage[0].count, 2);
  EXPECT_EQ(usage[0].used, 400 * 1024);
  ObjectSet::free(in_first);
  ObjectSet::free(in_second);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

// What the wash's between-batches hook saw (a plain function: no captures).
struct WashTurns {
  static inline int count = 0;
  static inline bool lock_was_free = true;
  static void between(SpinLock& wash_lock) {
    ++count;
    const bool got = wash_lock.try_lock();
    lock_was_free = lock_was_free && got;
    if (got) wash_lock.unlock();
  }
};

// The washer's lock, which fork holds, is held for one batch of spans at a time: between
// batches it is free, so a fork waits for one batch's madvise calls, not the whole wash.
TEST_F(ObjectMgrTest, AWashLetsTheWashLockGoBetweenBatches) {
  source_.set_span_idle_ms(-1);  // only the call below washes
  ObjectSet set(source_);
  ObjectMgr& mgr = set.object_mgr();
  constexpr int SPANS = 40;  // with the chunk's tail: batches of 16, 16 and 9
  std::vector<ABlock*> spans;
  for (int i = 0; i < 2 * SPANS; ++i) spans.push_back(set.alloc_span(ABLOCK_SIZE));
  for (int i = 1; i < 2 * SPANS; i += 2) ObjectSet::free_span(spans[i]);  // none merge
  WashTurns::count = 0;
  WashTurns::lock_was_free = true;
  const int64_t calls = os_.release_calls();
  EXPECT_GE(mgr.wash_stale_spans(0, &WashTurns::between), SPANS * ABLOCK_SIZE);
  const int64_t washed_spans = os_.release_calls() - calls;
  EXPECT_GE(washed_spans, SPANS);
  EXPECT_EQ(WashTurns::count, (washed_spans + ObjectMgr::WASH_BATCH - 1) / ObjectMgr::WASH_BATCH);
  EXPECT_TRUE(WashTurns::lock_was_free);
  for (int i = 0; i < 2 * SPANS; i += 2) ObjectSet::free_span(spans[i]);
  EXPECT_EQ(set.span_used(), 0);
}

// A usage scan visits every chunk once, holding its shard's lock for one chunk a turn and
// letting it go between turns.
TEST_F(ObjectMgrTest, AScanVisitsEachChunkOnceAndLetsTheShardGoBetweenChunks) {
  ObjectSet set(source_);
  ObjectMgr& mgr = set.object_mgr();
  std::vector<void*> bigs;
  for (int i = 0; i < 5; ++i) bigs.push_back(set.alloc(1500 * 1024, 0));  // a chunk each
  std::vector<AChunk*> visited;
  int betweens = 0;
  mgr.for_each_chunk_in_turn(
      [&](BlockSet& bs, AChunk* chunk) {
        EXPECT_TRUE(mgr.shard(0).lock_.held());
        EXPECT_EQ(&bs, &mgr.shard(0).block_set_);
        visited.push_back(chunk);
      },
      [&] {
        EXPECT_FALSE(mgr.shard(0).lock_.held());
        ++betweens;
      });
  std::vector<AChunk*> all;
  set.for_each_chunk([&](AChunk* chunk) { all.push_back(chunk); });
  std::sort(visited.begin(), visited.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(visited, all);
  EXPECT_GE(all.size(), 5u);
  EXPECT_EQ(betweens, static_cast<int>(all.size()));  // one chunk a turn
  for (void* p : bigs) ObjectSet::free(p);
  set.flush_thread_heap();
}

// Chunks that leave the set between turns are never visited after they left (their
// memory may be unmapped); the others are visited once each. After MAX_SCAN_RESTARTS
// restarts the rest is visited in one hold, so churn cannot make a scan quadratic.
TEST_F(ObjectMgrTest, AScanSkipsChunksThatLeftAndBoundsItsRestarts) {
  ObjectSet set(source_);
  ObjectMgr& mgr = set.object_mgr();
  BlockSet& bs = mgr.shard(0).block_set_;
  constexpr int CHUNKS = 12;
  std::vector<void*> bigs;
  for (int i = 0; i < CHUNKS; ++i) bigs.push_back(set.alloc(1500 * 1024, 0));
  std::vector<AChunk*> visited;
  std::vector<AChunk*> gone;
  int betweens = 0;
  mgr.for_each_chunk_in_turn(
      [&](BlockSet&, AChunk* chunk) {
        EXPECT_EQ(std::count(gone.begin(), gone.end(), chunk), 0);
        visited.push_back(chunk);
      },
      [&] {
        ++betweens;
        // Free an object whose chunk the scan has not reached: the chunk leaves the set.
        for (void*& p : bigs) {
          AChunk* chunk = p != nullptr ? AChunk::ptr2chunk(p) : nullptr;
          if (chunk == nullptr || std::count(visited.begin(), visited.end(), chunk) != 0) continue;
          const uint64_t unlinks = bs.chunk_unlinks();
          ObjectSet::free(p);
          p = nullptr;
          EXPECT_EQ(bs.chunk_unlinks(), unlinks + 1);
          gone.push_back(chunk);
          break;
        }
      });
  EXPECT_EQ(betweens, ObjectMgr::MAX_SCAN_RESTARTS + 1);
  EXPECT_EQ(gone.size(), static_cast<size_t>(ObjectMgr::MAX_SCAN_RESTARTS + 1));
  std::vector<AChunk*> all;
  set.for_each_chunk([&](AChunk* chunk) { all.push_back(chunk); });
  std::sort(visited.begin(), visited.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(visited, all);  // each survivor once
  EXPECT_EQ(all.size() + gone.size(), static_cast<size_t>(CHUNKS));
  for (void* p : bigs) {
    if (p != nullptr) ObjectSet::free(p);
  }
  set.flush_thread_heap();
}

TEST_F(ObjectMgrTest, ThreadsAllocatingBigObjectsTogetherLoseNothing) {
  ObjectSet set(source_);
  constexpr int THREADS = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < THREADS; ++t) {
    threads.emplace_back([&set, t] {
      std::vector<std::pair<unsigned char*, int64_t>> live;
      for (int i = 0; i < 400; ++i) {
        const int64_t size = 64 * 1024 + (i * 7919 + t * 131) % (512 * 1024);
        auto* p = static_cast<unsigned char*>(set.alloc(size, 0));
        ASSERT_NE(p, nullptr);
        p[0] = static_cast<unsigned char>(t);
        p[size - 1] = static_cast<unsigned char>(i);
        live.emplace_back(p, size);
        if (live.size() > 8) {
          auto [q, n] = live.front();
          ASSERT_EQ(q[0], t);
          ObjectSet::free(q);
          live.erase(live.begin());
        }
      }
      for (auto [q, n] : live) ObjectSet::free(q);
      set.flush_thread_heap();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GE(set.object_mgr().open_shards(), 1);
  EXPECT_EQ(set.span_used(), 0);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(ObjectMgrTest, WashingIdleSpansHoldsUpNoAllocation) {
  ObjectSet set(source_);
  // Spans free beside a live object, so its chunk stays and they stay free spans.
  void* keep = set.alloc(100 * 1024, 0);
  std::vector<void*> freed;
  for (int i = 0; i < 40; ++i) freed.push_back(set.alloc(100 * 1024, 0));
  void* keep2 = set.alloc(100 * 1024, 0);
  for (size_t i = 0; i < freed.size(); i += 2) ObjectSet::free(freed[i]);  // not adjacent
  clock_.advance_ms(5000);
  // While a span's pages go back (a madvise each), another thread allocates from the
  // same set: it must not wait for the washing to finish.
  bool served = true;
  std::vector<std::thread> allocators;
  std::vector<void*> got(64, nullptr);
  std::atomic<int> done{0};
  const std::thread::id washer = std::this_thread::get_id();
  os_.set_release_hook([&] {
    // (Only the washer's: an allocating thread's own frees may wash too.)
    const int i = static_cast<int>(allocators.size());
    if (std::this_thread::get_id() != washer || i >= 64) return;
    const int before = done.load();
    allocators.emplace_back([&, i] {
      got[i] = set.alloc(300 * 1024, 0);  // fits no freed span: leaves them to the washer
      done.fetch_add(1);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (done.load() == before && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    served = served && done.load() > before;
  });
  const int64_t washed = set.wash_stale_spans(1000 * 1000);
  os_.set_release_hook(nullptr);
  for (std::thread& t : allocators) t.join();
  EXPECT_TRUE(served);
  EXPECT_GE(washed, 20 * 100 * 1024);
  EXPECT_GE(allocators.size(), 20u);
  // Nothing lost: every object back, every span back, the chunks given back.
  for (void* p : got) {
    if (p != nullptr) ObjectSet::free(p);
  }
  for (size_t i = 1; i < freed.size(); i += 2) ObjectSet::free(freed[i]);
  ObjectSet::free(keep);
  ObjectSet::free(keep2);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(ObjectMgrTest, WashedSpansComeBackMergedAndCleanAndAreNotWashedTwice) {
  ObjectSet set(source_);
  void* keep = set.alloc(100 * 1024, 0);
  std::vector<void*> objs;
  for (int i = 0; i < 6; ++i) objs.push_back(set.alloc(100 * 1024, 0));
  void* keep2 = set.alloc(100 * 1024, 0);
  for (void* p : objs) ObjectSet::free(p);  // one free span of 6 objects' blocks
  clock_.advance_ms(5000);
  const int64_t first = set.wash_stale_spans(1000 * 1000);
  EXPECT_GT(first, 0);
  const int64_t releases = os_.release_calls();
  EXPECT_EQ(set.wash_stale_spans(0), 0);  // clean already: nothing to wash again
  EXPECT_EQ(os_.release_calls(), releases);
  // A washed span is zero: a calloc-style request need not clear it.
  bool zeroed = false;
  ABlock* block = ObjectMgr::shard_of(keep).block_set_.alloc_block(6 * 100 * 1024, &zeroed);
  ASSERT_NE(block, nullptr);
  EXPECT_TRUE(zeroed);
  ObjectMgr::shard_of(keep).block_set_.free_block(block);
  ObjectSet::free(keep);
  ObjectSet::free(keep2);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

}  // namespace
}  // namespace achunk::testing
