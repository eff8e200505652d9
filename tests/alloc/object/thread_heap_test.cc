#include "alloc/object/thread_heap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "support/chunk_mgr_fixture.h"
#include "support/idle_thread.h"
#include "support/thread_heap_peer.h"

namespace achunk::testing {
namespace {

constexpr int64_t SLAB = 16 * 1024;  // the slab of every class up to 1 KiB

class ThreadHeapTest : public ChunkMgrTest {
 protected:
  // `slabs` full slabs of 100-byte objects (127 to a slab), in allocation order.
  std::vector<std::vector<void*>> fill_slabs(ObjectSet& set, int slabs) {
    std::vector<std::vector<void*>> out(slabs);
    for (auto& slab : out) {
      for (int i = 0; i < PER_SLAB; ++i) slab.push_back(set.alloc(100, 0));
    }
    return out;
  }
  static constexpr int PER_SLAB = 127;

  // One object in each of `n` classes up to 1 KiB, each on a fresh current slab.
  static std::vector<void*> one_per_class(ObjectSet& set, int n) {
    std::vector<void*> out;
    int last_sc = -1;
    for (int64_t size = 16; static_cast<int>(out.size()) < n; size += 16) {
      if (size_class_of(size) == last_sc) continue;
      last_sc = size_class_of(size);
      out.push_back(set.alloc(size, 0));
    }
    EXPECT_LE(class_slot_size(last_sc), 1024);
    return out;
  }

  DirectChunkSource source_{mgr_};
};

TEST_F(ThreadHeapTest, EmptiedSlabsStayAsSparesWithinTheHeapBudget) {
  ObjectSet set(source_);
  // 20000 bytes: 3 to a 64 KiB slab (60 KiB carved), so the budget holds KEPT + 1 slabs:
  // the current one, kept when it empties, and KEPT spares (and no slab filled here is
  // old enough among the full ones to be disowned).
  constexpr int64_t BIG_SLAB = 64 * 1024;
  ASSERT_EQ(slab_size(size_class_of(20000)), BIG_SLAB);
  constexpr int KEPT = ThreadHeap::SPARE_BYTES_MAX / BIG_SLAB - 1;
  ASSERT_GE(KEPT, 3);
  ASSERT_LT(KEPT + 3, ThreadHeap::FULL_SLABS_KEPT);
  ASSERT_GT((KEPT + 2) * 3 * 20480, ThreadHeap::SPARE_BYTES_MAX);
  std::vector<void*> objs;
  for (int i = 0; i < 3 * (KEPT + 3); ++i) objs.push_back(set.alloc(20000, 0));
  const int64_t full = set.span_used();
  const int64_t releases = os_.release_calls();
  for (int i = 0; i < 3 * KEPT; ++i) ObjectSet::free(objs[i]);
  EXPECT_EQ(set.span_used(), full);  // every one a spare
  for (int i = 3 * KEPT; i < 3 * (KEPT + 3); ++i) ObjectSet::free(objs[i]);
  // Past the budget a slab joins the set's free spans, with its pages: only idle time
  // washes it. The last, the current slab, stays current.
  EXPECT_EQ(set.span_used(), full - 2 * BIG_SLAB);
  EXPECT_EQ(os_.release_calls(), releases);
  // The current slab and the spares come back first: refilling as many slabs takes no
  // new span.
  const int64_t with_spares = set.span_used();
  for (int i = 0; i < 3 * (KEPT + 1); ++i) objs[i] = set.alloc(20000, 0);
  EXPECT_EQ(set.span_used(), with_spares);
  for (int i = 0; i < 3 * (KEPT + 1); ++i) ObjectSet::free(objs[i]);
}

TEST_F(ThreadHeapTest, ABatchCycledAcrossSlabBoundariesNeitherGivesBackNorWashes) {
  source_.set_span_idle_ms(1'000);
  ObjectSet set(source_);
  // 4096-byte objects: 9 to a 48 KiB slab, so a batch of 12 spans two slabs, and each
  // round empties both.
  ASSERT_EQ(slab_size(size_class_of(4096)), 3 * SLAB);
  std::vector<void*> batch(12);
  for (void*& p : batch) p = set.alloc(4096, 0);
  for (void* p : batch) ObjectSet::free(p);
  const int64_t used = set.span_used();
  const int64_t releases = os_.release_calls();
  for (int round = 0; round < 1000; ++round) {
    for (void*& p : batch) p = set.alloc(4096, 0);
    for (void* p : batch) ObjectSet::free(p);
    clock_.advance_ms(10);  // ten seconds in all, never idle for a whole span_idle_ms
  }
  EXPECT_EQ(set.span_used(), used);
  EXPECT_EQ(os_.release_calls(), releases);
}

TEST_F(ThreadHeapTest, TheLookGivesBackTheSparesOfHeapsIdleSinceTheLastOneAndTimeWashesThem) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  IdleThread idle;
  // Two objects, each alone on its class's current slab, freed: the slabs stay current.
  idle.run([&] {
    ObjectSet::free(set.alloc(100, 0));
    ObjectSet::free(set.alloc(2000, 0));
  });
  set.reclaim_idle_spares();  // the first look only notes the idle heap's activity
  EXPECT_EQ(set.spares_reclaimed(), 0);
  // A slow-path call since (a third class's first slab): busy, so it keeps them.
  idle.run([&] { ObjectSet::free(set.alloc(500, 0)); });
  set.reclaim_idle_spares();
  EXPECT_EQ(set.spares_reclaimed(), 0);
  const int64_t taken = slab_size(size_class_of(100)) + slab_size(size_class_of(2000)) +
                        slab_size(size_class_of(500));
  const int64_t before = set.span_used();
  const int64_t released = os_.released_bytes();
  const int64_t barriers = os_.barrier_calls();
  set.reclaim_idle_spares();
  EXPECT_EQ(set.spares_reclaimed(), taken);
  EXPECT_EQ(set.span_used(), before - taken);
  EXPECT_EQ(os_.barrier_calls(), barriers + 1);  // one for the heap's three slabs
  EXPECT_EQ(os_.released_bytes(), released);     // free spans now, with their pages
  // Once free for a whole span_idle_ms, the release thread's visit washes them.
  clock_.advance_ms(30'000);
  set.wash_stale_spans(30'000'000);
  EXPECT_GE(os_.released_bytes() - released, taken);
  int64_t washed = 0;
  const int64_t free_bytes = set.free_span_bytes(&washed);
  EXPECT_EQ(washed, free_bytes);
  // The idle thread carries on with new slabs.
  idle.run([&] {
    void* p = set.alloc(100, 0);
    std::memset(p, 7, 100);
    void* q = set.alloc(2000, 0);
    std::memset(q, 8, 2000);
    EXPECT_EQ(static_cast<unsigned char*>(p)[99], 7);
    ObjectSet::free(p);
    ObjectSet::free(q);
  });
}

// A thread cycling 8 buffers of a 1-8 KiB class stays on one slab: with 6 slots to a slab,
// each round filled one, took another, and emptied both (four slow-path calls).
// (A set per size: together these slabs exceed what a heap keeps current.)
TEST_F(ThreadHeapTest, EightBuffersCycledInAClassUpTo8KiBTakeNoSlowPath) {
  for (const int64_t size : {1024, 1500, 2048, 3000, 4096, 6000, 8000}) {
    ObjectSet set(source_);
    void* batch[8];
    for (void*& p : batch) p = set.alloc(size, 0);
    for (void* p : batch) ObjectSet::free(p);
    const ThreadHeap* heap = set.heap_for_this_thread();
    const uint64_t refills = heap->refills();
    for (int round = 0; round < 100; ++round) {
      for (void*& p : batch) p = set.alloc(size, 0);
      for (void* p : batch) ObjectSet::free(p);
    }
    EXPECT_EQ(heap->refills(), refills) << size;
  }
}

// The common "allocate, use, free" of a lone object: its slab stays current when emptied,
// so no round trip takes a slow path (each took two before: park, then refill).
TEST_F(ThreadHeapTest, ALoneObjectCycledOnItsSlabTakesNoSlowPath) {
  ObjectSet set(source_);
  ObjectSet::free(set.alloc(64, 0));
  const ThreadHeap* heap = set.heap_for_this_thread();
  const uint64_t refills = heap->refills();
  const int64_t used = set.span_used();
  for (int i = 0; i < 1000; ++i) ObjectSet::free(set.alloc(64, 0));
  EXPECT_EQ(heap->refills(), refills);
  EXPECT_EQ(set.span_used(), used);
}

// The carved bytes of the set's empty slabs (spares and kept current slabs).
int64_t empty_slab_carved(ObjectSet& set) {
  SpanUsage u;
  int64_t resident = 0;
  set.scan_spans(
      &u, &resident, [](void*, void*, int64_t, unsigned char*) -> int64_t { return -1; }, nullptr);
  return u.slab_slots - u.slab_live;
}

// A thread that went through every class, filling a slab of each, as a buffer grown by
// realloc may: it keeps its emptied current slabs and spares within both budgets, the
// first classes' current, and the rest go back to the set.
TEST_F(ThreadHeapTest, EmptiedCurrentSlabsAreKeptWithinTheirBudget) {
  ObjectSet set(source_);
  const int64_t heap_only = (set.heap_for_this_thread(), set.span_used());
  std::vector<void*> objs;
  int64_t all_slabs = 0;
  int64_t all_slots = 0;
  int last_sc = -1;
  for (int64_t size = 16; size <= SMALL_OBJECT_MAX; size += 16) {
    if (size_class_of(size) == last_sc) continue;
    last_sc = size_class_of(size);
    all_slabs += slab_size(last_sc);
    const int64_t slot = class_slot_size(last_sc);
    const int64_t capacity = (slab_size(last_sc) - AOBJECT_HEADER_SIZE) / slot;
    all_slots += capacity * slot;
    for (int64_t i = 0; i < capacity; ++i) objs.push_back(set.alloc(size, 0));
  }
  ASSERT_GT(all_slots, ThreadHeap::SPARE_BYTES_MAX);
  EXPECT_EQ(set.span_used(), heap_only + all_slabs);
  for (void* p : objs) ObjectSet::free(p);
  EXPECT_LT(set.span_used() - heap_only, all_slabs);
  EXPECT_LE(set.span_used() - heap_only, ThreadHeap::SPARE_SPAN_BYTES_MAX);
  EXPECT_LE(empty_slab_carved(set), ThreadHeap::SPARE_BYTES_MAX);
  // The first classes' slabs are still current: cycling them takes no slow path.
  const ThreadHeap* heap = set.heap_for_this_thread();
  const uint64_t refills = heap->refills();
  for (int i = 0; i < 100; ++i) ObjectSet::free(set.alloc(16, 0));
  EXPECT_EQ(heap->refills(), refills);
}

// A lone object cycled in each class, as a thread handling values of many sizes does:
// every class keeps its slab current (one carving of each fits the budgets). When whole
// slabs were counted, the classes past the first 256 KiB of slabs parked their slab at
// each free and took one at each allocation; with a 256 KiB carved budget, the classes
// of one-slot slabs did.
TEST_F(ThreadHeapTest, ALoneObjectCycledInEveryClassTakesNoSlowPath) {
  ObjectSet set(source_);
  std::vector<int64_t> sizes;
  for (int sc = 0; sc < PLAIN_CLASS_COUNT; ++sc) {
    sizes.push_back(class_slot_size(sc) - AOBJECT_META_SIZE);
  }
  for (int64_t size : sizes) ObjectSet::free(set.alloc(size, 0));
  const ThreadHeap* heap = set.heap_for_this_thread();
  const uint64_t refills = heap->refills();
  for (int round = 0; round < 100; ++round) {
    for (int64_t size : sizes) ObjectSet::free(set.alloc(size, 0));
  }
  EXPECT_EQ(heap->refills(), refills);
  EXPECT_LE(empty_slab_carved(set), ThreadHeap::SPARE_BYTES_MAX);
}

// The budgets' static_assert sums first_carving_bytes, which mirrors ObjectSet::carve: a
// fresh slab of every class carves exactly that much.
TEST_F(ThreadHeapTest, FirstCarvingBytesIsWhatAFreshSlabCarves) {
  ObjectSet set(source_);
  std::vector<void*> objs;
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    void* p = set.alloc_in_class(sc, class_slot_size(sc) - AOBJECT_META_SIZE, 0);
    ASSERT_NE(p, nullptr);
    const Slab* slab = slab_of(BlockSet::ptr2block(header_of(p)));
    ASSERT_EQ(slab->sc_, sc);
    EXPECT_EQ(slab->carved_.load() * class_slot_size(sc), first_carving_bytes(sc)) << sc;
    objs.push_back(p);
  }
  for (void* p : objs) ObjectSet::free(p);
}

// A kept current slab whose carving passes the budget is kept no longer: its pages count
// as they are carved, so once emptied it goes back to the set.
TEST_F(ThreadHeapTest, AKeptSlabCarvedPastTheBudgetIsKeptNoLonger) {
  ObjectSet set(source_);
  // BIG 64 KiB slots kept first, one still live on the current slab of its class, the
  // others emptied into spares, and a 16-byte object's slab, a page carved: within 60
  // KiB of the budget.
  constexpr int BIG = static_cast<int>(ThreadHeap::SPARE_BYTES_MAX / 65536) - 1;
  ASSERT_GE(BIG, 2);
  std::vector<void*> big;
  for (int i = 0; i < BIG; ++i) big.push_back(set.alloc(60000, 0));
  for (int i = 0; i < BIG - 1; ++i) ObjectSet::free(big[i]);
  ObjectSet::free(set.alloc(16, 0));
  const int64_t before = set.span_used();
  // 8 KiB slots, one carved at a time, 8 to a 72 KiB slab: kept when taken (8 KiB
  // carved), no longer once the eighth carve passes the budget.
  const int64_t size = 8192 - AOBJECT_META_SIZE;
  ASSERT_EQ(slab_size(size_class_of(size)), 72 * 1024);
  ASSERT_LE(BIG * 65536 + 8192 + 4096, ThreadHeap::SPARE_BYTES_MAX);
  ASSERT_GT(BIG * 65536 + 8 * 8192 + 4000, ThreadHeap::SPARE_BYTES_MAX);
  void* objs[8];
  for (void*& p : objs) p = set.alloc(size, 0);
  EXPECT_EQ(set.span_used(), before + 72 * 1024);
  for (void* p : objs) ObjectSet::free(p);
  EXPECT_EQ(set.span_used(), before);
  EXPECT_LE(empty_slab_carved(set), ThreadHeap::SPARE_BYTES_MAX);
  ObjectSet::free(big[BIG - 1]);
}

// Without the barrier no look could take an emptied current slab from an idle heap, so it
// is parked as a spare at once, which a look can take.
TEST_F(ThreadHeapTest, WithoutTheBarrierAnEmptiedCurrentSlabIsParked) {
  os_.set_barrier(false);
  ObjectSet set(source_);
  IdleThread idle;
  const ThreadHeap* heap = nullptr;
  idle.run([&] {
    ObjectSet::free(set.alloc(64, 0));
    heap = set.heap_for_this_thread();
    const uint64_t refills = heap->refills();
    for (int i = 0; i < 100; ++i) ObjectSet::free(set.alloc(64, 0));
    EXPECT_EQ(heap->refills(), refills + 100);
  });
  set.reclaim_idle_spares();
  set.reclaim_idle_spares();
  EXPECT_EQ(set.spares_reclaimed(), SLAB);
  EXPECT_EQ(os_.barrier_calls(), 0);
}

// A look at an idle heap takes the current slabs emptied and only those: one holding a
// live object stays current, and its owner goes on using it without a refill.
TEST_F(ThreadHeapTest, TheLookTakesOnlyTheEmptiedCurrentSlabsOfAnIdleHeap) {
  ObjectSet set(source_);
  IdleThread idle;
  void* live = nullptr;
  const ThreadHeap* heap = nullptr;
  idle.run([&] {
    ObjectSet::free(set.alloc(64, 0));
    live = set.alloc(300, 0);
    heap = set.heap_for_this_thread();
  });
  set.reclaim_idle_spares();
  set.reclaim_idle_spares();
  EXPECT_EQ(set.spares_reclaimed(), slab_size(size_class_of(64)));
  idle.run([&] {
    const uint64_t refills = heap->refills();
    ObjectSet::free(live);
    ObjectSet::free(set.alloc(300, 0));  // still the current slab
    EXPECT_EQ(heap->refills(), refills);
    ObjectSet::free(set.alloc(64, 0));  // taken: a refill
    EXPECT_EQ(heap->refills(), refills + 1);
  });
}

// A server thread that goes idle after handing its objects to others: other threads free
// them all, remote frees into the slabs its heap keeps (the full ones, the current one)
// that only its next refill would have gathered. The look gives those slabs back, and
// the chunks they pinned with them; the thread's next allocation refills as usual.
TEST_F(ThreadHeapTest, TheLookGivesBackAnIdleHeapsSlabsThatOtherThreadsEmptied) {
  ObjectSet set(source_);
  IdleThread idle;
  constexpr int SLABS = ThreadHeap::FULL_SLABS_KEPT + 4;
  std::vector<std::vector<void*>> slabs;
  // One object of another class stays live: its slab is current and not emptied.
  void* live = nullptr;
  idle.run([&] {
    slabs = fill_slabs(set, SLABS);
    live = set.alloc(2000, 0);
  });
  // The first look only notes the heap's activity; the slabs are all in use still.
  set.reclaim_idle_spares();
  EXPECT_EQ(set.spares_reclaimed(), 0);
  const int64_t in_use = set.span_used();
  for (const auto& slab : slabs) {
    for (void* p : slab) ObjectSet::free(p);
  }
  // The slabs disowned when they filled come back through the ready stacks at once; the
  // heap's kept full slabs and its current slab hold their remote frees.
  set.settle_ready();
  const int64_t kept = set.span_used();
  EXPECT_LE(kept, in_use - (SLABS - ThreadHeap::FULL_SLABS_KEPT - 1) * SLAB);
  EXPECT_GE(kept, in_use - (SLABS - ThreadHeap::FULL_SLABS_KEPT) * SLAB);
  set.reclaim_idle_spares();
  EXPECT_EQ(set.spares_reclaimed(), kept - set.span_used());
  EXPECT_EQ(set.span_used(), in_use - SLABS * SLAB);
  idle.run([&] {
    // Refills, and the slab of the live object is still its own.
    for (auto& slab : slabs) {
      for (void*& p : slab) p = set.alloc(100, 0);
    }
    for (const auto& slab : slabs) {
      for (void* p : slab) ObjectSet::free(p);
    }
    ObjectSet::free(live);
  });
}

// The owner fills slabs and frees half of each batch itself, another thread the other
// half, before or after it, while a third keeps looking: the looks take slabs the other
// thread's frees emptied, never one the owner's own free is moving (it moves under the
// heap's lock), and no object is lost or handed out twice. TSan checks the ordering.
TEST_F(ThreadHeapTest, TakingFreedSlabsRacesSafelyWithTheOwnersFrees) {
  ObjectSet set(source_);
  std::atomic<bool> stop{false};
  std::thread looker([&] {
    while (!stop.load()) set.reclaim_idle_spares();
  });
  IdleThread other;
  std::vector<unsigned char*> batch(3 * PER_SLAB);
  for (int round = 0; round < 3'000 && set.spares_reclaimed() < 64 * SLAB; ++round) {
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i] = static_cast<unsigned char*>(set.alloc(100, 0));
      ASSERT_NE(batch[i], nullptr);
      std::memset(batch[i], static_cast<int>(i & 0xFF), 100);
    }
    auto free_half = [&](size_t first) {
      for (size_t i = first; i < batch.size(); i += 2) {
        ASSERT_EQ(batch[i][99], i & 0xFF);
        ObjectSet::free(batch[i]);
      }
    };
    // Whoever frees last empties the slabs: the other thread in even rounds, the owner
    // (moving its full slabs) in odd ones.
    if (round % 2 == 0) free_half(1);
    other.run([&] { free_half(0); });
    std::this_thread::yield();  // idle for a look or two
    if (round % 2 == 1) free_half(1);
  }
  stop.store(true);
  looker.join();
  EXPECT_GE(set.spares_reclaimed(), 64 * SLAB);
  set.flush_thread_heap();
  other.run([&] { set.flush_thread_heap(); });
  EXPECT_EQ(set.span_used(), 0);
}

// A pop the owner was preempted in the middle of: its flag is up after the barrier, so
// the look puts every unhooked slab back and takes none, however empty.
TEST_F(ThreadHeapTest, TheLookLeavesTheCurrentSlabsOfAHeapWhosePopIsUnderWay) {
  ObjectSet set(source_);
  IdleThread idle;
  ThreadHeap* heap = nullptr;
  idle.run([&] {
    ObjectSet::free(set.alloc(64, 0));
    heap = set.heap_for_this_thread();
  });
  ThreadHeapTestPeer::set_popping(heap, true);
  set.reclaim_idle_spares();
  const int64_t barriers = os_.barrier_calls();
  set.reclaim_idle_spares();
  EXPECT_EQ(os_.barrier_calls(), barriers + 1);
  EXPECT_EQ(set.spares_reclaimed(), 0);
  ThreadHeapTestPeer::set_popping(heap, false);
  idle.run([&] {
    const uint64_t refills = heap->refills();
    ObjectSet::free(set.alloc(64, 0));  // still its current slab
    EXPECT_EQ(heap->refills(), refills);
  });
  set.reclaim_idle_spares();
  EXPECT_EQ(set.spares_reclaimed(), slab_size(size_class_of(64)));
}

// An owner cycling lone objects, so its current slab keeps emptying, while another
// thread keeps looking: the looks take the slab many times, and never one a pop is using
// (the objects keep their bytes). TSan checks the handshake's ordering.
TEST_F(ThreadHeapTest, TakingEmptiedCurrentSlabsRacesSafelyWithTheirOwner) {
  ObjectSet set(source_);
  std::atomic<bool> stop{false};
  std::thread thief([&] {
    while (!stop.load()) set.reclaim_idle_spares();
  });
  const int64_t slab = slab_size(size_class_of(200));
  for (int64_t i = 0; i < 50'000'000 && set.spares_reclaimed() < 20 * slab; ++i) {
    auto* p = static_cast<unsigned char*>(set.alloc(200, 0));
    ASSERT_NE(p, nullptr);
    std::memset(p, static_cast<int>(i & 0xFF), 200);
    auto* q = static_cast<unsigned char*>(set.alloc(200, 0));
    ASSERT_NE(q, nullptr);
    std::memset(q, 0x5A, 200);
    ASSERT_EQ(p[0], i & 0xFF);
    ASSERT_EQ(p[199], i & 0xFF);
    ObjectSet::free(p);
    ASSERT_EQ(q[100], 0x5A);
    ObjectSet::free(q);
  }
  stop.store(true);
  thief.join();
  EXPECT_GE(set.spares_reclaimed(), 20 * slab);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// The opt-in release thread's visit (wash_stale_spans) looks too.
TEST_F(ThreadHeapTest, TheReleaseThreadsVisitGivesBackIdleHeapsSpares) {
  ObjectSet set(source_);
  IdleThread idle;
  idle.run([&] { ObjectSet::free(set.alloc(100, 0)); });
  set.wash_stale_spans(0);
  EXPECT_EQ(set.spares_reclaimed(), 0);
  set.wash_stale_spans(0);
  EXPECT_EQ(set.spares_reclaimed(), SLAB);
  set.wash_stale_spans(0);  // nothing left to take
  EXPECT_EQ(set.spares_reclaimed(), SLAB);
}

// Owners cycling objects through their slabs while another thread keeps taking spares:
// no object is lost or overwritten (and TSan sees the locking).
TEST_F(ThreadHeapTest, TakingSparesRacesSafelyWithTheirOwners) {
  ObjectSet set(source_);
  std::atomic<bool> stop{false};
  auto owner = [&](unsigned char mark) {
    std::vector<unsigned char*> live;
    for (int i = 0; i < 20'000; ++i) {
      const int64_t size = 16 + (i * 37) % 3000;
      auto* p = static_cast<unsigned char*>(set.alloc(size, 0));
      ASSERT_NE(p, nullptr);
      std::memset(p, mark, 16);
      live.push_back(p);
      // Mostly one object at a time, so slabs empty and park as spares again and again.
      if (live.size() > static_cast<size_t>(i % 3)) {
        for (unsigned char* q : live) {
          ASSERT_EQ(q[0], mark);
          ASSERT_EQ(q[15], mark);
          ObjectSet::free(q);
        }
        live.clear();
      }
    }
    for (unsigned char* q : live) ObjectSet::free(q);
  };
  std::thread a(owner, 0xA1);
  std::thread b(owner, 0xB2);
  std::thread thief([&] {
    while (!stop.load()) set.reclaim_idle_spares();
  });
  a.join();
  b.join();
  stop.store(true);
  thief.join();
  set.release_warm();
  EXPECT_EQ(set.span_used(), 0);  // the exited owners left nothing but warm slabs behind
}

}  // namespace
}  // namespace achunk::testing
