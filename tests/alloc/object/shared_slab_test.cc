// Shared slabs: a thread's first small objects, within the option shared_slab_bytes,
// come from one slab per class that all threads share, with no heap and no ThreadState;
// past its budget the thread carves its own; idle shared slabs go back by the looks.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <set>
#include <thread>
#include <vector>

#include "alloc/object/label.h"
#include "alloc/object/malloc_allocator.h"
#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "alloc/object/thread_state.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class SharedSlabTest : public ChunkMgrTest {
 protected:
  // The option is process-wide: each test sets it and puts the default back.
  struct Budget {
    explicit Budget(int64_t bytes) { ObjectSet::set_shared_slab_bytes(bytes); }
    ~Budget() { ObjectSet::set_shared_slab_bytes(0); }
  };
  static ABlock* slab_at(void* p) { return BlockSet::ptr2block(header_of(p)); }
  static const void* owner_of_slab(void* p) {
    return slab_of(slab_at(p))->owner_thread_.load(std::memory_order_relaxed);
  }
  // `threads` threads alive at once, each holding `n` objects of `size` bytes until all
  // hold theirs (the slabs they sit on are returned in *slabs), then freeing them.
  static void hold_together(ObjectSet& set, int threads, int n, int64_t size,
                            std::set<ABlock*>* slabs, std::atomic<int>* without_heap) {
    std::barrier all_held(threads);
    std::mutex mu;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&] {
        std::vector<void*> objs;
        for (int i = 0; i < n; ++i) objs.push_back(set.alloc(size, 0));
        if (set.existing_heap() == nullptr && !thread_state_owned()) without_heap->fetch_add(1);
        {
          std::lock_guard<std::mutex> guard(mu);
          for (void* p : objs) slabs->insert(slab_at(p));
        }
        all_held.arrive_and_wait();
        for (void* p : objs) ObjectSet::free(p);
      });
    }
    for (std::thread& t : ts) t.join();
  }
  // Every object freed: two looks give back the idle shared slabs (the first sees them
  // busy) and settle the ready ones; with the warm slabs gone nothing stays.
  static void expect_all_back(ObjectSet& set) {
    set.reclaim_idle_spares();
    set.reclaim_idle_spares();
    set.release_warm();
    EXPECT_EQ(set.span_used(), 0);
  }
  DirectChunkSource source_{mgr_};
};

TEST_F(SharedSlabTest, ThreadsWithinTheirBudgetShareOneSlabPerClass) {
  constexpr int THREADS = 40;
  constexpr int N = 10;
  std::set<ABlock*> own;
  std::set<ABlock*> shared;
  std::atomic<int> without_heap{0};
  {
    ObjectSet set(source_);
    hold_together(set, THREADS, N, 100, &own, &without_heap);
    EXPECT_EQ(set.shared_allocs(), 0);
  }
  // A slab each without the budget.
  EXPECT_EQ(own.size(), static_cast<size_t>(THREADS));
  EXPECT_EQ(without_heap.load(), 0);
  {
    const Budget budget(64 << 10);
    ObjectSet set(source_);
    hold_together(set, THREADS, N, 100, &shared, &without_heap);
    EXPECT_EQ(set.shared_allocs(), THREADS * N);
    // 400 slots of 128 bytes fill slabs of 16 KiB back to back: four of them.
    const int64_t per_slab = (slab_bytes(size_class_of(100)) - slab_lead(size_class_of(100))) / 128;
    EXPECT_EQ(static_cast<int64_t>(shared.size()), (THREADS * N + per_slab - 1) / per_slab);
    // Neither a heap nor a ThreadState for any of them.
    EXPECT_EQ(without_heap.load(), THREADS);
    // Every object freed: the look that finds the shared slab idle gives it back, and the
    // full ones settle once their frees made them ready.
    set.reclaim_idle_spares();
    set.reclaim_idle_spares();
    EXPECT_GT(set.shared_reclaimed(), 0);
    EXPECT_EQ(set.span_used(), 0);
  }
}

TEST_F(SharedSlabTest, AThreadPastItsBudgetCarvesItsOwnSlabs) {
  const Budget budget(4096);
  ObjectSet set(source_);
  std::thread([&] {
    constexpr int64_t SLOT = 80;  // a 64-byte object's slot
    std::vector<void*> objs;
    for (int64_t taken = 0; taken < 4096; taken += SLOT) objs.push_back(set.alloc(64, 0));
    EXPECT_EQ(set.shared_allocs(), static_cast<int64_t>(objs.size()));
    EXPECT_EQ(set.existing_heap(), nullptr);
    EXPECT_EQ(owner_of_slab(objs.back()), set.shared_marker());
    // The budget is spent: the next object comes from the thread's own slab.
    void* own = set.alloc(64, 0);
    EXPECT_NE(set.existing_heap(), nullptr);
    EXPECT_EQ(owner_of_slab(own), this_thread_marker());
    EXPECT_NE(slab_at(own), slab_at(objs.back()));
    EXPECT_EQ(set.shared_allocs(), static_cast<int64_t>(objs.size()));
    // Larger slots never take the shared path, within the budget or not.
    void* big_slot = set.alloc(2000, 0);
    EXPECT_EQ(owner_of_slab(big_slot), this_thread_marker());
    for (void* p : objs) ObjectSet::free(p);
    ObjectSet::free(own);
    ObjectSet::free(big_slot);
    set.flush_thread_heap();
  }).join();
  expect_all_back(set);
}

TEST_F(SharedSlabTest, TheLookKeepsASharedSlabInUseOrBusySinceTheLastOne) {
  const Budget budget(64 << 10);
  ObjectSet set(source_);
  void* kept = nullptr;
  void* gone = nullptr;
  std::thread([&] {
    kept = set.alloc(48, 0);
    gone = set.alloc(48, 0);
  }).join();
  EXPECT_EQ(slab_at(kept), slab_at(gone));
  const int64_t used = set.span_used();
  ObjectSet::free(gone);
  // Allocated from since the last look (the first): busy.
  set.reclaim_idle_spares();
  EXPECT_EQ(set.span_used(), used);
  // Idle, but an object is live on it.
  set.reclaim_idle_spares();
  EXPECT_EQ(set.span_used(), used);
  EXPECT_EQ(set.shared_reclaimed(), 0);
  ObjectSet::free(kept);
  set.reclaim_idle_spares();
  EXPECT_EQ(set.span_used(), 0);
  EXPECT_EQ(set.shared_reclaimed(), slab_bytes(size_class_of(48)));
  // The next shared object takes a fresh slab.
  std::thread([&] { kept = set.alloc(48, 0); }).join();
  EXPECT_EQ(owner_of_slab(kept), set.shared_marker());
  ObjectSet::free(kept);
}

// A shared slab runs full and is let go like a heap's: the frees into it make it ready,
// and the next shared allocation, or any heap's refill, takes its room.
TEST_F(SharedSlabTest, AFullSharedSlabComesBackThroughTheReadyStack) {
  const Budget budget(1 << 20);
  ObjectSet set(source_);
  const int sc = size_class_of(1000);
  const int64_t per_slab = (slab_bytes(sc) - slab_lead(sc)) / class_slot_size(sc);
  std::vector<void*> objs;
  std::thread([&] {
    for (int64_t i = 0; i < per_slab + 1; ++i) objs.push_back(set.alloc(1000, 0));
  }).join();
  ABlock* first = slab_at(objs.front());
  EXPECT_NE(slab_at(objs.back()), first);  // the first ran full
  ObjectSet::free(objs.front());           // makes it ready
  std::thread([&] {
    // The second slab has room left: the shared path keeps to it.
    void* p = set.alloc(1000, 0);
    EXPECT_EQ(slab_at(p), slab_at(objs.back()));
    objs.front() = p;
  }).join();
  for (void* p : objs) ObjectSet::free(p);
  expect_all_back(set);
}

// Threads allocate within their budget and free each other's objects while others do the
// same and the looks run (TSan covers the races).
TEST_F(SharedSlabTest, ThreadsAllocatingAndFreeingEachOthersSharedObjectsRaceSafely) {
  const Budget budget(32 << 10);
  ObjectSet set(source_);
  constexpr int THREADS = 4;
  constexpr int ROUNDS = 30;
  std::atomic<bool> done{false};
  std::thread look([&] {
    while (!done.load()) set.reclaim_idle_spares();
  });
  for (int round = 0; round < ROUNDS; ++round) {
    std::vector<std::vector<void*>> objs(THREADS);
    std::barrier all_held(THREADS);
    std::vector<std::thread> ts;
    for (int t = 0; t < THREADS; ++t) {
      ts.emplace_back([&, t] {
        for (int i = 0; i < 300; ++i) {
          void* p = set.alloc(16 + (i * 37 + t) % 900, 0);
          ASSERT_NE(p, nullptr);
          objs[t].push_back(p);
        }
        all_held.arrive_and_wait();
        for (void* p : objs[(t + 1) % THREADS]) ObjectSet::free(p);
      });
    }
    for (std::thread& t : ts) t.join();
  }
  done.store(true);
  look.join();
  EXPECT_GT(set.shared_allocs(), 0);
  expect_all_back(set);
}

// Through ob_malloc's engine: a thread within its budget takes no ThreadState, so its
// label and ctx lookups go uncached; its objects are accounted as any others. A big
// object takes a state (not a heap), so a thread of big buffers caches its lookups.
TEST_F(SharedSlabTest, ObMallocWithinTheBudgetTakesNoThreadState) {
  const Budget budget(64 << 10);
  auto alloc = std::make_unique<ObMallocAllocator>(mgr_);
  const ObMemAttr attr(1001, "t_shared");
  std::thread([&] {
    std::vector<void*> objs;
    for (int i = 0; i < 100; ++i) objs.push_back(alloc->alloc(200, attr));
    EXPECT_FALSE(thread_state_owned());
    LabelUsage out[8];
    LabelUsage total;
    const int n = alloc->get_tenant_ctx_allocator(1001, DEFAULT_CTX_ID)
                      ->object_set()
                      .scan_usage(out, 8, &total);
    ASSERT_EQ(n, 1);
    EXPECT_EQ(out[0].label, label_id("t_shared"));
    EXPECT_EQ(out[0].count, 100);
    EXPECT_EQ(out[0].used, 100 * 200);
    for (void* p : objs) ObMallocAllocator::free(p);
    ObTenantCtxAllocator* ta = alloc->get_tenant_ctx_allocator(1001, DEFAULT_CTX_ID);
    void* big = alloc->alloc(100 << 10, attr);
    EXPECT_TRUE(thread_state_owned());
    EXPECT_EQ(ta->object_set().existing_heap(), nullptr);
    EXPECT_EQ(thread_state().ta_cache.ta, ta);
    ObMallocAllocator::free(big);
  }).join();
  ObjectSet& set = alloc->get_tenant_ctx_allocator(1001, DEFAULT_CTX_ID)->object_set();
  expect_all_back(set);
}

}  // namespace
}  // namespace achunk::testing
