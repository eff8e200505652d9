#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "achunk/base/spin_lock.h"
#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "alloc/object/thread_heap.h"
#include "support/chunk_mgr_fixture.h"
#include "support/idle_thread.h"
#include "support/thread_heap_peer.h"

namespace achunk::testing {
namespace {

constexpr int64_t SIZE = 100;  // 112-byte slots, 127 to a slab
constexpr int PER_SLAB = 127;
const int SC = size_class_of(SIZE);

ABlock* block_of_object(void* p) {
  return BlockSet::ptr2block(header_of(p));
}
uint64_t pending_frees(ABlock* block) {
  return slab_of(block)->remote_free_.load() >> Slab::REMOTE_COUNT_SHIFT;
}

class ThreadHeapStashTest : public ChunkMgrTest {
 protected:
  void SetUp() override {
    // Looks here take idle heaps' stashes, which needs the barrier.
    if (!os_.process_barrier_available()) GTEST_SKIP() << "no process barrier here";
  }
  // `slabs` full slabs of SIZE-byte objects, then one object on the next slab, so all of
  // them are on the heap's full_ list.
  static std::vector<std::vector<void*>> full_slabs(ObjectSet& set, int slabs, void** next) {
    std::vector<std::vector<void*>> out(slabs);
    for (auto& slab : out) {
      for (int i = 0; i < PER_SLAB; ++i) slab.push_back(set.alloc(SIZE, 0));
    }
    *next = set.alloc(SIZE, 0);
    return out;
  }
  // Frees one object of the test and forgets it (free_rest skips it).
  static void free_one(void*& p) {
    ObjectSet::free(p);
    p = nullptr;
  }
  // Frees what the test left of `slabs` and `next`; the set then holds no span once the
  // heap is flushed.
  static void free_rest(ObjectSet& set, std::vector<std::vector<void*>>& slabs, void* next) {
    for (auto& slab : slabs) {
      for (void*& p : slab) {
        if (p != nullptr) free_one(p);
      }
    }
    ObjectSet::free(next);
    set.flush_thread_heap();
    EXPECT_EQ(set.span_used(), 0);
  }
  DirectChunkSource source_{mgr_};
};

TEST_F(ThreadHeapStashTest, StashCapsHoldAtMostStashBytesPerClass) {
  int64_t total = 0;
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    const int64_t slot = class_slot_size(sc);
    const bool floored = is_page_class(sc) && slot <= ThreadHeap::PAGE_STASH_SLOT_MAX;
    if (!floored) {
      EXPECT_LE(ThreadHeap::stash_cap(sc) * slot, ThreadHeap::STASH_BYTES);
    }
    EXPECT_LE(ThreadHeap::stash_cap(sc), ThreadHeap::STASH_MAX_COUNT);
    // The table agrees with the rule it caches.
    int64_t want = ThreadHeap::STASH_BYTES / slot;
    if (floored && want < ThreadHeap::PAGE_STASH_FLOOR) want = ThreadHeap::PAGE_STASH_FLOOR;
    if (want > ThreadHeap::STASH_MAX_COUNT) want = ThreadHeap::STASH_MAX_COUNT;
    EXPECT_EQ(ThreadHeap::stash_cap(sc), want) << "class " << sc;
    total += ThreadHeap::stash_cap(sc) * slot;
  }
  EXPECT_LE(total, 509 * 1024);  // the bound DESIGN and TUNING give
  EXPECT_EQ(ThreadHeap::stash_cap(SC), ThreadHeap::STASH_MAX_COUNT);
  EXPECT_EQ(ThreadHeap::stash_cap(size_class_of(16000)), 0);
  // A 16 KiB page-aligned buffer (a 20 KiB slot) stashes two; a 20 KiB one none.
  EXPECT_EQ(ThreadHeap::stash_cap(page_size_class(16384)), 2);
  EXPECT_EQ(ThreadHeap::stash_cap(page_size_class(20480)), 0);
}

// A page class's slot is above the byte budget, and its slab holds a few: without a
// stash every free into a full slab, and the malloc after it, would be slab hand-offs.
TEST_F(ThreadHeapStashTest, APageAlignedBufferFreedIntoAFullSlabWaitsInTheStash) {
  ObjectSet set(source_);
  constexpr int64_t BUF = 16384;
  const int sc = page_size_class(BUF);
  const int per_slab = static_cast<int>((slab_size(sc) - slab_lead(sc)) / class_slot_size(sc));
  std::vector<void*> first;
  for (int i = 0; i < per_slab; ++i) first.push_back(set.alloc_in_class(sc, BUF, 0));
  std::vector<void*> second{set.alloc_in_class(sc, BUF, 0)};  // the first slab is full now
  ThreadHeap* heap = set.heap_for_this_thread();
  Slab* full = slab_of(block_of_object(first[0]));
  ASSERT_NE(full, slab_of(block_of_object(second[0])));
  ObjectSet::free(first[1]);
  EXPECT_EQ(heap->stash_count(sc), 1);
  EXPECT_EQ(full->used_.load(), per_slab);
  const uint64_t refills = heap->refills();
  EXPECT_EQ(set.alloc_in_class(sc, BUF, 0), first[1]);
  EXPECT_EQ(heap->refills(), refills);
  EXPECT_EQ(heap->stash_count(sc), 0);
  for (void* p : first) ObjectSet::free(p);
  for (void* p : second) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// The free leaves the full slab full and in no list; the next malloc of the class takes
// the object back before any slot of the current slab, without a refill.
TEST_F(ThreadHeapStashTest, AFreeIntoAFullSlabWaitsInTheStashForTheNextMallocOfItsClass) {
  ObjectSet set(source_);
  void* next = nullptr;
  auto slabs = full_slabs(set, 1, &next);
  ThreadHeap* heap = set.heap_for_this_thread();
  Slab* first = slab_of(block_of_object(slabs[0][5]));
  ObjectSet::free(slabs[0][5]);
  EXPECT_EQ(heap->stash_count(SC), 1);
  EXPECT_EQ(first->used_.load(), PER_SLAB);
  EXPECT_EQ(first->local_free_, nullptr);
  Slab* current = slab_of(block_of_object(next));
  ASSERT_NE(current->local_free_, nullptr);
  const uint64_t refills = heap->refills();
  EXPECT_EQ(set.alloc(SIZE, 0), slabs[0][5]);
  EXPECT_EQ(heap->refills(), refills);
  EXPECT_EQ(heap->stash_count(SC), 0);
  ObjectSet::free(next);
  for (void* p : slabs[0]) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// A full stash gives its older half back to the slabs, which so become partial again.
// The frees alternate between two slabs, as random frees land on different slabs.
TEST_F(ThreadHeapStashTest, AFullStashGivesItsOlderHalfBackToTheirSlabs) {
  ObjectSet set(source_);
  void* next = nullptr;
  auto slabs = full_slabs(set, 2, &next);
  ThreadHeap* heap = set.heap_for_this_thread();
  const int cap = ThreadHeap::stash_cap(SC);
  Slab* first = slab_of(block_of_object(slabs[0][0]));
  Slab* second = slab_of(block_of_object(slabs[1][0]));
  for (int i = 0; i < cap; ++i) free_one(slabs[i % 2][i / 2]);
  EXPECT_EQ(heap->stash_count(SC), cap);
  EXPECT_EQ(first->used_.load(), PER_SLAB);
  EXPECT_EQ(second->used_.load(), PER_SLAB);
  free_one(slabs[0][cap / 2]);
  EXPECT_EQ(heap->stash_count(SC), cap / 2 + 1);
  // The oldest ones, a quarter of the cap from each slab, went back.
  EXPECT_EQ(first->used_.load(), PER_SLAB - cap / 4);
  EXPECT_EQ(second->used_.load(), PER_SLAB - cap / 4);
  EXPECT_NE(first->local_free_, nullptr);
  free_rest(set, slabs, next);
}

// Frees into one full slab in a row (a batch freed together) stash the first only: the
// slab becomes partial and takes the others as plain local frees.
TEST_F(ThreadHeapStashTest, FreesIntoOneFullSlabInARowMakeItPartialAgain) {
  ObjectSet set(source_);
  void* next = nullptr;
  auto slabs = full_slabs(set, 1, &next);
  ThreadHeap* heap = set.heap_for_this_thread();
  Slab* first = slab_of(block_of_object(slabs[0][0]));
  for (int i = 0; i < 10; ++i) free_one(slabs[0][i]);
  EXPECT_EQ(heap->stash_count(SC), 1);
  EXPECT_EQ(first->used_.load(), PER_SLAB - 9);
  EXPECT_NE(first->local_free_, nullptr);
  free_rest(set, slabs, next);
}

// A free into a slab this thread disowned is stashed too: no take-back, no atomic.
TEST_F(ThreadHeapStashTest, AFreeIntoASlabThisThreadDisownedIsStashed) {
  ObjectSet set(source_);
  void* next = nullptr;
  auto slabs = full_slabs(set, ThreadHeap::FULL_SLABS_KEPT + 1, &next);
  ThreadHeap* heap = set.heap_for_this_thread();
  ABlock* oldest = block_of_object(slabs[0][0]);
  ASSERT_EQ(slab_of(oldest)->owner_thread_.load(), disowned_by_this_thread());
  free_one(slabs[0][0]);
  EXPECT_EQ(heap->stash_count(SC), 1);
  EXPECT_EQ(heap->taken_back(), 0u);
  EXPECT_EQ(slab_of(oldest)->owner_thread_.load(), disowned_by_this_thread());
  EXPECT_EQ(slab_of(oldest)->remote_free_.load(), Slab::REMOTE_NOTIFY);
  free_rest(set, slabs, next);
}

// A thread that allocates in the set stashes another thread's object rather than pushing
// it onto that slab's remote list (tcmalloc's per-CPU lists take any object): its next
// malloc of the class reuses it, and its exit gives the rest back as remote frees.
TEST_F(ThreadHeapStashTest, AFreeOfAnotherThreadsObjectWaitsInTheFreeingThreadsStash) {
  ObjectSet set(source_);
  std::vector<void*> mine;
  for (int i = 0; i < 3; ++i) mine.push_back(set.alloc(SIZE, 0));
  ABlock* block = block_of_object(mine[0]);
  const int32_t used = slab_of(block)->used_.load();
  std::thread([&] {
    // A whole slab of its own, so its current slab is dry and a malloc looks at the stash.
    std::vector<void*> own;
    for (int i = 0; i < PER_SLAB; ++i) own.push_back(set.alloc(SIZE, 0));
    ThreadHeap* heap = set.existing_heap();
    ASSERT_NE(heap, nullptr);
    ObjectSet::free(mine[0]);
    ObjectSet::free(mine[1]);
    EXPECT_EQ(heap->stash_count(SC), 2);
    EXPECT_EQ(pending_frees(block), 0u);
    // The owner's count is untouched: the objects are still out of its slab.
    EXPECT_EQ(slab_of(block)->used_.load(), used);
    EXPECT_EQ(set.alloc(SIZE, 0), mine[1]);
    EXPECT_EQ(heap->stash_count(SC), 1);
    ObjectSet::free(mine[1]);
    for (void* p : own) ObjectSet::free(p);
  }).join();
  // The exit gave both back to the owner's slab as remote frees.
  EXPECT_EQ(pending_frees(block), 2u);
  ObjectSet::free(mine[2]);
  set.flush_thread_heap();
  set.release_warm();  // the exited thread's own slabs
  EXPECT_EQ(set.span_used(), 0);
}

// A thread that only frees gets no heap for it: the free is a remote one.
TEST_F(ThreadHeapStashTest, AThreadThatOnlyFreesPushesOntoTheSlabsRemoteList) {
  ObjectSet set(source_);
  void* p = set.alloc(SIZE, 0);
  void* q = set.alloc(SIZE, 0);
  ABlock* block = block_of_object(p);
  std::thread([&] {
    ObjectSet::free(p);
    EXPECT_EQ(set.existing_heap(), nullptr);
  }).join();
  EXPECT_EQ(pending_frees(block), 1u);
  ObjectSet::free(q);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// A class no malloc takes from any more (a buffer grown by realloc left it) gives its
// stash back within two turns of the refills' cursor, and its emptied slab goes with it.
TEST_F(ThreadHeapStashTest, AStashNoMallocTakesFromGoesBackAtLaterRefills) {
  ObjectSet set(source_);
  void* next = nullptr;
  auto slabs = full_slabs(set, 1, &next);
  ThreadHeap* heap = set.heap_for_this_thread();
  for (void* p : slabs[0]) ObjectSet::free(p);
  ASSERT_GT(heap->stash_count(SC), 0);
  const uint64_t refills = heap->refills();
  std::vector<void*> others;
  while (heap->stash_count(SC) != 0 && heap->refills() - refills <= 2 * SIZE_CLASS_COUNT) {
    others.push_back(set.alloc(20000, 0));
  }
  EXPECT_EQ(heap->stash_count(SC), 0);
  EXPECT_EQ(slab_of(block_of_object(slabs[0][0]))->used_.load(), 0);
  for (void* p : others) ObjectSet::free(p);
  ObjectSet::free(next);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// The look takes an idle heap's stash back to the slabs (as other threads' frees), and
// leaves it while a stash call is under way.
TEST_F(ThreadHeapStashTest, TheLookTakesTheStashOfAnIdleHeapBackToItsSlabs) {
  ObjectSet set(source_);
  IdleThread idle;
  ThreadHeap* heap = nullptr;
  std::vector<std::vector<void*>> slabs;
  void* next = nullptr;
  idle.run([&] {
    slabs = full_slabs(set, 2, &next);
    for (int i = 0; i < 10; ++i) ObjectSet::free(slabs[i % 2][i / 2]);
    heap = set.heap_for_this_thread();
  });
  ASSERT_EQ(heap->stash_count(SC), 10);
  ThreadHeapTestPeer::set_popping(heap, true);
  set.reclaim_idle_spares();
  set.reclaim_idle_spares();
  EXPECT_EQ(heap->stash_count(SC), 10);
  ThreadHeapTestPeer::set_popping(heap, false);
  set.reclaim_idle_spares();
  EXPECT_EQ(heap->stash_count(SC), 0);
  EXPECT_EQ(set.stash_reclaimed(), 10);
  EXPECT_EQ(pending_frees(block_of_object(slabs[0][0])), 5u);
  EXPECT_EQ(pending_frees(block_of_object(slabs[1][0])), 5u);
  idle.run([&] {
    // The stash is open again, and the slabs' frees are found as any other thread's.
    ObjectSet::free(slabs[0][5]);
    EXPECT_EQ(heap->stash_count(SC), 1);
    for (int i = 6; i < PER_SLAB; ++i) ObjectSet::free(slabs[0][i]);
    for (int i = 5; i < PER_SLAB; ++i) ObjectSet::free(slabs[1][i]);
    ObjectSet::free(next);
  });
  idle.run([&] { set.flush_thread_heap(); });
  EXPECT_EQ(set.span_used(), 0);
}

// An exiting thread's stash goes back to its slabs before they are settled: nothing of
// a thread that freed everything stays.
TEST_F(ThreadHeapStashTest, AnExitingThreadGivesItsStashBack) {
  ObjectSet set(source_);
  std::thread([&] {
    void* next = nullptr;
    auto slabs = full_slabs(set, 3, &next);
    for (auto& slab : slabs) {
      for (void* p : slab) ObjectSet::free(p);
    }
    EXPECT_GT(set.heap_for_this_thread()->stash_count(SC), 0);
    ObjectSet::free(next);
  }).join();
  // Its slabs emptied, so they wait warm for the next thread, and nothing else stays.
  const int64_t warm = set.warm_bytes();
  EXPECT_GT(warm, 0);
  EXPECT_EQ(set.release_warm(), warm);
  EXPECT_EQ(set.span_used(), 0);
}

// A thread exiting while a look has its stash closed, the look then backing off (it sees
// a stash call under way): the exit waits the look out, so the stash still goes back and
// nothing of the thread stays. Before, the exit's unstash found the stash closed, gave
// nothing back, and the objects went with the heap.
TEST_F(ThreadHeapStashTest, AThreadExitingWhileALookHasItsStashClosedStillGivesItBack) {
  ObjectSet set(source_);
  std::atomic<ThreadHeap*> heap{nullptr};
  std::atomic<bool> exit_now{false};
  std::thread owner([&] {
    void* next = nullptr;
    auto slabs = full_slabs(set, 3, &next);
    for (auto& slab : slabs) {
      for (void* p : slab) ObjectSet::free(p);
    }
    ObjectSet::free(next);
    EXPECT_GT(set.heap_for_this_thread()->stash_count(SC), 0);
    heap = set.heap_for_this_thread();
    while (!exit_now.load()) std::this_thread::yield();
  });
  while (heap.load() == nullptr) std::this_thread::yield();
  set.reclaim_idle_spares();  // notes the heap's calls: the next look finds it idle
  bool looked = false;
  os_.set_barrier_hook([&] {
    // The stash is closed: the thread exits, and its first call meets the closed stash
    // (before) or waits for the look's lock (now).
    looked = true;
    const int64_t sleeps = SpinLock::sleeps();
    const uint64_t ops = ThreadHeapTestPeer::stash_ops(heap);
    exit_now = true;
    while (ThreadHeapTestPeer::stash_ops(heap) == ops && SpinLock::sleeps() == sleeps) {
      std::this_thread::yield();
    }
    ThreadHeapTestPeer::set_popping(heap, true);  // the look backs off
  });
  set.reclaim_idle_spares();
  os_.set_barrier_hook(nullptr);
  owner.join();
  EXPECT_TRUE(looked);
  EXPECT_EQ(set.stash_reclaimed(), 0);
  const int64_t warm = set.warm_bytes();
  EXPECT_EQ(set.release_warm(), warm);
  EXPECT_EQ(set.span_used(), 0);
}

// Random replacement over a live set spread over many slabs: the mallocs are served by
// the frees stashed before them, and refills stay rare however many slabs there are.
TEST_F(ThreadHeapStashTest, RandomReplacementIsServedFromTheStash) {
  ObjectSet set(source_);
  std::mt19937 rng(7);
  std::vector<void*> live(20'000);
  for (void*& p : live) p = set.alloc(SIZE, 0);
  ThreadHeap* heap = set.heap_for_this_thread();
  const uint64_t refills = heap->refills();
  constexpr int STEPS = 100'000;
  int reused = 0;
  for (int i = 0; i < STEPS; ++i) {
    void*& p = live[rng() % live.size()];
    void* freed = p;
    ObjectSet::free(p);
    p = set.alloc(SIZE, 0);
    reused += p == freed;
  }
  EXPECT_LT(heap->refills() - refills, static_cast<uint64_t>(STEPS / 20));
  EXPECT_GT(reused, STEPS / 2);
  for (void* p : live) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// An owner replacing random objects, stashing all the time and pausing now and then,
// while another thread keeps looking: the looks take stashes many times, and no object
// is handed out twice or loses its bytes. TSan checks the handshake's ordering.
TEST_F(ThreadHeapStashTest, TakingTheStashRacesSafelyWithItsOwner) {
  ObjectSet set(source_);
  std::atomic<bool> stop{false};
  std::thread thief([&] {
    while (!stop.load()) set.reclaim_idle_spares();
  });
  std::mt19937 rng(3);
  std::vector<unsigned char*> live(4'000);
  auto fill = [&](size_t i) {
    const int64_t size = 16 + static_cast<int64_t>(rng() % 1000);
    live[i] = static_cast<unsigned char*>(set.alloc(size, 0));
    ASSERT_NE(live[i], nullptr);
    std::memset(live[i], static_cast<int>(i & 0xFF), 16);
  };
  for (size_t i = 0; i < live.size(); ++i) fill(i);
  for (int64_t step = 0; step < 20'000'000 && set.stash_reclaimed() < 2'000; ++step) {
    const size_t i = rng() % live.size();
    ASSERT_EQ(live[i][0], i & 0xFF);
    ASSERT_EQ(live[i][15], i & 0xFF);
    ObjectSet::free(live[i]);
    fill(i);
    if (step % 1024 == 0) std::this_thread::yield();  // idle for a look or two
  }
  stop.store(true);
  thief.join();
  EXPECT_GE(set.stash_reclaimed(), 2'000);
  for (unsigned char* p : live) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// A drain gives other threads' objects back one compare-and-swap per slab, however many
// objects of it the stash held: 40 objects of one slab, then 20 of each of two.
TEST_F(ThreadHeapStashTest, ADrainTakesOneAtomicPerForeignSlab) {
  ObjectSet set(source_);
  void* mine = set.alloc(SIZE, 0);  // this thread's heap, with a current slab
  for (const int slabs : {1, 2}) {
    // Slabs from a thread that exits holding them (the first may be one it adopted).
    std::vector<void*> all;
    std::thread([&] {
      for (int i = 0; i < (slabs + 1) * PER_SLAB; ++i) all.push_back(set.alloc(SIZE, 0));
    }).join();
    // 40 / slabs objects of each of the first `slabs` slabs holding that many.
    const auto in_block = [](ABlock* block) {
      return [block](void* q) { return q != nullptr && block_of_object(q) == block; };
    };
    std::vector<ABlock*> blocks;
    for (void* p : all) {
      ABlock* block = block_of_object(p);
      if (static_cast<int>(blocks.size()) < slabs &&
          std::count(blocks.begin(), blocks.end(), block) == 0 &&
          std::count_if(all.begin(), all.end(), in_block(block)) >= 40 / slabs) {
        blocks.push_back(block);
      }
    }
    std::vector<void*> theirs;
    for (ABlock* block : blocks) {
      for (void*& p : all) {
        if (in_block(block)(p) &&
            std::count_if(theirs.begin(), theirs.end(), in_block(block)) < 40 / slabs) {
          theirs.push_back(p);
          p = nullptr;
        }
      }
    }
    ASSERT_EQ(static_cast<int>(theirs.size()), 40);
    ThreadHeap* heap = set.existing_heap();
    heap->unstash_all();  // the last round's frees
    for (void* p : theirs) ASSERT_TRUE(ObjectSet::try_free_fast(p));
    ASSERT_EQ(heap->stash_count(SC), 40);
    const int64_t pushes = object_set_tls::remote_pushes;
    heap->unstash_all();
    EXPECT_EQ(object_set_tls::remote_pushes - pushes, slabs);
    for (void* p : theirs) EXPECT_EQ(header_state(load_header(p)), ObjectState::FREE);
    for (void* p : all) {
      if (p != nullptr) ObjectSet::free(p);
    }
  }
  ObjectSet::free(mine);
  set.flush_thread_heap();
  set.reclaim_idle_spares();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), 0);
}

}  // namespace
}  // namespace achunk::testing
