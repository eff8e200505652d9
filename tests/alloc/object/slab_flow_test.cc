// How slabs move between heaps and the set: operation counts of refills, thread exits and
// ready-stack settling as the live set doubles, and a multi-thread stress run.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class SlabFlowTest : public ChunkMgrTest {
 protected:
  DirectChunkSource source_{mgr_};
};

// Slabs a refill looked at, on average, over `steps` random replacements in a live set
// of `live` objects of 8 B-1 KiB (one thread).
double visits_per_refill(ObjectSet& set, int live, int steps) {
  std::mt19937 rng(live);
  auto size = [&] { return static_cast<int64_t>(8 + rng() % 1017); };
  std::vector<void*> objs;
  for (int i = 0; i < live; ++i) objs.push_back(set.alloc(size(), 0));
  ThreadHeap* heap = set.heap_for_this_thread();
  const uint64_t refills = heap->refills();
  const uint64_t visits = heap->slabs_visited();
  for (int s = 0; s < steps; ++s) {
    void*& slot = objs[rng() % objs.size()];
    ObjectSet::free(slot);
    slot = set.alloc(size(), 0);
  }
  const double r = static_cast<double>(heap->slabs_visited() - visits) /
                   static_cast<double>(std::max<uint64_t>(1, heap->refills() - refills));
  for (void* p : objs) ObjectSet::free(p);
  return r;
}

TEST_F(SlabFlowTest, ARefillLooksAtAFewSlabsHoweverLargeTheLiveSet) {
  ObjectSet set(source_);
  const double small = visits_per_refill(set, 40'000, 40'000);
  const double large = visits_per_refill(set, 80'000, 40'000);
  RecordProperty("visits_per_refill_40k", std::to_string(small));
  RecordProperty("visits_per_refill_80k", std::to_string(large));
  EXPECT_LE(small, 4.0);  // 2.8 here; 184 and 358 when a refill walked every slab
  EXPECT_LE(large, 4.0);
  EXPECT_LE(large, small * 1.25 + 0.25);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// Slabs settled when a thread holding `live` objects of 100 B exits.
int64_t settled_at_exit(ObjectSet& set, int live, std::vector<void*>* out) {
  const int64_t before = set.slabs_settled();
  std::thread([&] {
    for (int i = 0; i < live; ++i) out->push_back(set.alloc(100, 0));
  }).join();
  return set.slabs_settled() - before;
}

TEST_F(SlabFlowTest, ThreadExitSettlesABoundedNumberOfSlabsHoweverManyItHolds) {
  ObjectSet set(source_);
  std::vector<void*> objs;
  const int64_t small = settled_at_exit(set, 20'000, &objs);
  const int64_t large = settled_at_exit(set, 40'000, &objs);
  // The current slab and the last full ones; the rest were disowned as they filled.
  EXPECT_LE(small, ThreadHeap::FULL_SLABS_KEPT + 1);
  EXPECT_LE(large, ThreadHeap::FULL_SLABS_KEPT + 1);
  std::thread([&] {
    for (void* p : objs) ObjectSet::free(p);
  }).join();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), 0);
}

// The objects of 100 B a thread allocated before it exited, by slab: 40 slabs' worth.
std::map<ABlock*, std::vector<void*>> fill_slabs_and_exit(ObjectSet& set) {
  std::map<ABlock*, std::vector<void*>> by_slab;
  std::thread([&] {
    for (int i = 0; i < 40 * 127; ++i) {
      void* p = set.alloc(100, 0);
      by_slab[BlockSet::ptr2block(header_of(p))].push_back(p);
    }
  }).join();
  return by_slab;
}

TEST_F(SlabFlowTest, SlabsOfAnExitedThreadEmptiedByOthersGoBackWithoutAScan) {
  ObjectSet set(source_);
  std::map<ABlock*, std::vector<void*>> by_slab = fill_slabs_and_exit(set);
  ASSERT_GE(by_slab.size(), 40u);
  const int64_t used = set.span_used();
  const int64_t settled = set.slabs_settled();
  // Another thread (one without a heap of the set) empties three slabs.
  auto it = by_slab.begin();
  std::thread([&] {
    for (int s = 0; s < 3; ++s, ++it) {
      for (void* p : it->second) ObjectSet::free(p);
    }
  }).join();
  // What the release thread does: only the three notified slabs are looked at.
  set.reclaim_idle_spares();
  EXPECT_EQ(set.slabs_settled() - settled, 3);
  EXPECT_EQ(set.span_used(), used - 3 * slab_bytes(size_class_of(100)));
  // A half-freed slab is disowned again and comes back once its last object is freed.
  std::vector<void*>& half = it->second;
  std::thread([&] {
    for (size_t i = 0; i < half.size() / 2; ++i) ObjectSet::free(half[i]);
  }).join();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), used - 3 * slab_bytes(size_class_of(100)));
  std::thread([&] {
    for (size_t i = half.size() / 2; i < half.size(); ++i) ObjectSet::free(half[i]);
    for (++it; it != by_slab.end(); ++it) {
      for (void* p : it->second) ObjectSet::free(p);
    }
  }).join();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), 0);
  EXPECT_EQ(set.slabs_settled_empty(), static_cast<int64_t>(by_slab.size()));
}

// A server's threads come and go: the slabs one leaves with room must serve every heap
// that refills after it, not only the first (which took the whole ready stack, so the
// others carved new slabs while it kept dozens of partial ones).
TEST_F(SlabFlowTest, SlabsAnExitedThreadLeftServeEveryHeapThatRefills) {
  ObjectSet set(source_);
  std::map<ABlock*, std::vector<void*>> by_slab = fill_slabs_and_exit(set);
  ASSERT_GE(by_slab.size(), 40u);
  // A thread without a heap frees one object in each slab: every one is ready.
  std::thread([&] {
    for (auto& [block, objs] : by_slab) {
      ObjectSet::free(objs.back());
      objs.pop_back();
    }
  }).join();
  // Four new threads refill one after another, each still alive (holding what it took)
  // when the next one asks.
  constexpr int THREADS = 4;
  std::mutex mu;
  std::condition_variable cv;
  int allocated = 0;
  bool done = false;
  void* got[THREADS] = {};
  std::vector<std::thread> ts;
  for (int t = 0; t < THREADS; ++t) {
    ts.emplace_back([&, t] {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return allocated == t; });
      got[t] = set.alloc(100, 0);
      ++allocated;
      cv.notify_all();
      cv.wait(lock, [&] { return done; });
      ObjectSet::free(got[t]);
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return allocated == THREADS; });
    for (int t = 0; t < THREADS; ++t) {
      EXPECT_EQ(by_slab.count(BlockSet::ptr2block(header_of(got[t]))), 1u) << "thread " << t;
    }
    done = true;
    cv.notify_all();
  }
  for (auto& t : ts) t.join();
  std::thread([&] {
    for (auto& [block, objs] : by_slab) {
      for (void* p : objs) ObjectSet::free(p);
    }
  }).join();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), 0);
}

TEST_F(SlabFlowTest, AnOwnerRefillsFromSlabsAnotherThreadFreedIntoWithoutNewSpans) {
  ObjectSet set(source_);
  std::vector<void*> objs;
  for (int i = 0; i < 100 * 127; ++i) objs.push_back(set.alloc(100, 0));
  const int64_t used = set.span_used();
  std::thread([&] {
    for (size_t i = 0; i < objs.size(); i += 2) ObjectSet::free(objs[i]);
  }).join();
  for (size_t i = 0; i < objs.size(); i += 2) objs[i] = set.alloc(100, 0);
  EXPECT_EQ(set.span_used(), used);
  for (void* p : objs) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

TEST_F(SlabFlowTest, AThreadFreeingIntoSlabsItDisownedTakesThemBack) {
  ObjectSet set(source_);
  // Far more full slabs than a heap keeps: most of them are disowned.
  std::vector<void*> objs;
  for (int i = 0; i < 100 * 127; ++i) objs.push_back(set.alloc(100, 0));
  std::set<ABlock*> mine;
  for (void* p : objs) mine.insert(BlockSet::ptr2block(header_of(p)));
  ASSERT_GT(mine.size(), static_cast<size_t>(ThreadHeap::FULL_SLABS_KEPT) * 4);
  ThreadHeap* heap = set.heap_for_this_thread();
  for (size_t i = 0; i < objs.size(); i += 2) ObjectSet::free(objs[i]);
  // Every disowned slab came back to this thread, none went to the ready stack.
  EXPECT_GE(heap->taken_back(), mine.size() - ThreadHeap::FULL_SLABS_KEPT - 2);
  // So another thread's refills find none of them and carve slabs of their own.
  std::vector<void*> theirs;
  std::thread([&] {
    for (size_t i = 0; i < objs.size() / 4; ++i) theirs.push_back(set.alloc(100, 0));
  }).join();
  for (void* p : theirs) EXPECT_EQ(mine.count(BlockSet::ptr2block(header_of(p))), 0u);
  // And this thread refills from them: no new span.
  const int64_t used = set.span_used();
  for (size_t i = 0; i < objs.size(); i += 2) objs[i] = set.alloc(100, 0);
  EXPECT_EQ(set.span_used(), used);
  for (void* p : objs) ObjectSet::free(p);
  for (void* p : theirs) ObjectSet::free(p);
  set.flush_thread_heap();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), 0);
}

TEST_F(SlabFlowTest, ASlabItsFormerOwnerEmptiesGoesBackAtOnce) {
  ObjectSet set(source_);
  // 40 KB slots: a slab or two per object, so most of the slabs are disowned when full.
  std::vector<void*> objs;
  for (int i = 0; i < 200; ++i) objs.push_back(set.alloc(40'000, 0));
  const int64_t slab = slab_bytes(size_class_of(40'000));
  ASSERT_GT(set.span_used(), 100 * slab);
  // Freed by their owner and never asked for again (as a growing buffer leaves its class
  // behind): the slabs go back now, not at a refill of the class that never comes.
  for (void* p : objs) ObjectSet::free(p);
  EXPECT_LE(set.span_used(), ThreadHeap::SPARE_BYTES_MAX + slab);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// Allocates objects of 100 B until one lands in a second slab: returns them, the first
// slab's objects first.
std::vector<void*> fill_one_slab(ObjectSet& set) {
  std::vector<void*> objs{set.alloc(100, 0)};
  ABlock* first = BlockSet::ptr2block(header_of(objs[0]));
  while (BlockSet::ptr2block(header_of(objs.back())) == first) objs.push_back(set.alloc(100, 0));
  return objs;
}
uint64_t pending_frees(ABlock* block) {
  return slab_of(block)->remote_free_.load() >> Slab::REMOTE_COUNT_SHIFT;
}

// Joining another thread's frees to the local ones would walk them, a cache miss each:
// they wait until the local slots are used, then are taken whole.
TEST_F(SlabFlowTest, OtherThreadsFreesWaitUntilTheLocalSlotsRunOut) {
  ObjectSet set(source_);
  // Eleven objects from the current slab, which has more slots carved.
  std::vector<void*> objs;
  for (int i = 0; i < 11; ++i) objs.push_back(set.alloc(100, 0));
  ABlock* first = BlockSet::ptr2block(header_of(objs[0]));
  ASSERT_EQ(BlockSet::ptr2block(header_of(objs[10])), first);
  ObjectSet::free(objs[0]);  // a local slot
  std::thread([&] {
    for (int i = 1; i <= 10; ++i) ObjectSet::free(objs[i]);
  }).join();
  ASSERT_EQ(pending_frees(first), 10u);
  const int64_t used = set.span_used();
  // The local slots go first, the freed one and the carved ones; the ten wait.
  while (slab_of(first)->local_free_ != nullptr) {
    objs.push_back(set.alloc(100, 0));
    ASSERT_EQ(BlockSet::ptr2block(header_of(objs.back())), first);
  }
  EXPECT_EQ(pending_frees(first), 10u);
  // The next allocations take the ten, not new pages or a new slab.
  for (int i = 0; i < 10; ++i) {
    objs.push_back(set.alloc(100, 0));
    EXPECT_EQ(BlockSet::ptr2block(header_of(objs.back())), first);
  }
  EXPECT_EQ(pending_frees(first), 0u);
  EXPECT_EQ(slab_of(first)->carved_.load(), slab_of(first)->used_.load());
  EXPECT_EQ(set.span_used(), used);
  for (size_t i = 11; i < objs.size(); ++i) ObjectSet::free(objs[i]);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// An exiting thread's slab with local slots keeps another thread's pending frees, counted
// as frees: it goes back if they empty it, else, having room, onto the ready stack at
// once (untagged, so no free pushes it twice), where the next refill finds it.
TEST_F(SlabFlowTest, SettlingCountsPendingFreesWithoutTakingThem) {
  ObjectSet set(source_);
  std::vector<void*> emptied, kept;
  ABlock* emptied_slab = nullptr;
  ABlock* kept_slab = nullptr;
  const int64_t settled_empty = set.slabs_settled_empty();
  const int64_t kept_warm = set.warm_kept();
  std::thread([&] {
    emptied = fill_one_slab(set);
    kept = fill_one_slab(set);
    emptied_slab = BlockSet::ptr2block(header_of(emptied[0]));
    kept_slab = BlockSet::ptr2block(header_of(kept[0]));
    ObjectSet::free(emptied[0]);
    ObjectSet::free(kept[0]);
    // While this thread still owns them: every other object of one, ten of the other.
    std::thread([&] {
      for (size_t i = 1; i + 1 < emptied.size(); ++i) ObjectSet::free(emptied[i]);
      for (int i = 1; i <= 10; ++i) ObjectSet::free(kept[i]);
    }).join();
  }).join();
  // The emptied slab stays warm for the class's next refills: not given back.
  EXPECT_EQ(set.slabs_settled_empty() - settled_empty, 0);
  EXPECT_EQ(set.warm_kept() - kept_warm, 1);
  EXPECT_NE(emptied_slab, kept_slab);
  EXPECT_EQ(pending_frees(kept_slab), 10u);
  EXPECT_EQ(slab_of(kept_slab)->remote_free_.load() & Slab::REMOTE_NOTIFY, 0u);
  ObjectSet::free(kept[11]);
  EXPECT_EQ(pending_frees(kept_slab), 11u);
  // This thread's refills adopt it and the exited thread's last slab (one object in it):
  // their free slots come before any new slab.
  ABlock* last_slab = BlockSet::ptr2block(header_of(kept.back()));
  const int free_slots = 12 + slab_of(last_slab)->capacity_ - 1;
  ASSERT_NE(set.heap_for_this_thread(), nullptr);  // a span of its own
  const int64_t used = set.span_used();
  std::vector<void*> mine;
  for (int i = 0; i < free_slots; ++i) {
    mine.push_back(set.alloc(100, 0));
    ABlock* block = BlockSet::ptr2block(header_of(mine.back()));
    EXPECT_TRUE(block == kept_slab || block == last_slab);
  }
  EXPECT_EQ(set.span_used(), used);
  EXPECT_EQ(pending_frees(kept_slab), 0u);
  for (void* p : mine) ObjectSet::free(p);
  ObjectSet::free(emptied.back());
  for (size_t i = 12; i < kept.size(); ++i) ObjectSet::free(kept[i]);
  set.flush_thread_heap();
  set.settle_ready();
  // Slabs with room came first: the warm one was never needed.
  EXPECT_EQ(set.warm_adopted(), 0);
  EXPECT_GT(set.release_warm(), 0);
  EXPECT_EQ(set.span_used(), 0);
}

// A heap with a partial slab of the class refills from it and leaves the ready stack to
// other heaps and to settling: taking the whole stack at every refill piled up slabs the
// heap would not reach for a while, which other threads' frees emptied meanwhile.
TEST_F(SlabFlowTest, AHeapWithAPartialSlabLeavesTheReadyStackToOthers) {
  ObjectSet set(source_);
  std::vector<void*> mine = fill_one_slab(set);  // a full slab, and one object in the next
  ABlock* partial = BlockSet::ptr2block(header_of(mine[0]));
  // Another thread's slabs, disowned at its exit; a free each makes two of them ready.
  std::vector<void*> theirs_a, theirs_b;
  std::thread([&] {
    theirs_a = fill_one_slab(set);
    theirs_b = fill_one_slab(set);
  }).join();
  std::thread([&] {
    ObjectSet::free(theirs_a[0]);
    ObjectSet::free(theirs_b[0]);
  }).join();
  // This thread's free into its full slab makes it partial; then its current slab runs out.
  ObjectSet::free(mine[0]);
  mine.erase(mine.begin());
  void* p = nullptr;
  for (int i = 0; i < 1000 && (p == nullptr || BlockSet::ptr2block(header_of(p)) != partial); ++i) {
    p = set.alloc(100, 0);
    mine.push_back(p);
    EXPECT_NE(BlockSet::ptr2block(header_of(p)), BlockSet::ptr2block(header_of(theirs_a[1])));
    EXPECT_NE(BlockSet::ptr2block(header_of(p)), BlockSet::ptr2block(header_of(theirs_b[1])));
    EXPECT_NE(BlockSet::ptr2block(header_of(p)), BlockSet::ptr2block(header_of(theirs_b.back())));
  }
  ASSERT_EQ(BlockSet::ptr2block(header_of(p)), partial);
  // The other thread's slabs are still there for settling (not empty: disowned again):
  // the two made ready and the one with room its exit put there.
  std::set<ABlock*> theirs;
  for (const auto* objs : {&theirs_a, &theirs_b}) {
    for (void* q : *objs) theirs.insert(BlockSet::ptr2block(header_of(q)));
  }
  ASSERT_EQ(theirs.size(), 3u);
  const int64_t settled = set.slabs_settled();
  set.settle_ready();
  EXPECT_EQ(set.slabs_settled() - settled, 3);
  std::thread([&] {
    for (size_t i = 1; i < theirs_a.size(); ++i) ObjectSet::free(theirs_a[i]);
    for (size_t i = 1; i < theirs_b.size(); ++i) ObjectSet::free(theirs_b[i]);
  }).join();
  for (void* q : mine) ObjectSet::free(q);
  set.flush_thread_heap();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), 0);
}

// Objects carry their size and a fill byte derived from their address, checked at free.
struct Obj {
  void* p;
  int64_t size;
};
unsigned char fill_of(const void* p) {
  return static_cast<unsigned char>(reinterpret_cast<uintptr_t>(p) >> 4);
}
Obj make(ObjectSet& set, std::mt19937& rng) {
  const int64_t size = rng() % 64 == 0 ? 20'000 + rng() % 200'000 : 1 + rng() % 1024;
  void* p = set.alloc(size, 0);
  EXPECT_NE(p, nullptr);
  std::memset(p, fill_of(p), static_cast<size_t>(size));
  return {p, size};
}
void check_and_free(const Obj& o) {
  const unsigned char* c = static_cast<const unsigned char*>(o.p);
  EXPECT_EQ(c[0], fill_of(o.p));
  EXPECT_EQ(c[o.size - 1], fill_of(o.p));
  EXPECT_TRUE(tail_intact(o.p, static_cast<uint32_t>(o.size)));
  ObjectSet::free(o.p);
}

// Producers that come and go hand objects to long-lived consumers; some objects outlive
// every producer and are freed at the end. Everything goes back.
TEST_F(SlabFlowTest, ChurningProducersConsumersAndLateFreesReturnEverything) {
  ObjectSet set(source_);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Obj> queue;
  std::vector<Obj> late;
  bool done = false;
  auto consumer = [&](int seed) {
    std::mt19937 rng(seed);
    std::vector<Obj> own;  // consumers allocate too, and free some of it elsewhere
    while (true) {
      Obj o;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return done || !queue.empty(); });
        if (queue.empty()) break;
        o = queue.front();
        queue.pop_front();
      }
      check_and_free(o);
      if (rng() % 4 == 0) own.push_back(make(set, rng));
      if (own.size() > 64) {
        std::lock_guard<std::mutex> lock(mu);
        late.push_back(own.back());
        own.pop_back();
        for (const Obj& x : own) check_and_free(x);
        own.clear();
      }
    }
    for (const Obj& x : own) check_and_free(x);
  };
  std::vector<std::thread> consumers;
  for (int c = 0; c < 2; ++c) consumers.emplace_back(consumer, 100 + c);
  for (int round = 0; round < 6; ++round) {
    std::vector<std::thread> producers;
    for (int t = 0; t < 3; ++t) {
      producers.emplace_back([&, seed = round * 10 + t] {
        std::mt19937 rng(seed);
        std::vector<Obj> mine;
        for (int i = 0; i < 3000; ++i) {
          mine.push_back(make(set, rng));
          if (rng() % 3 == 0) {  // a same-thread free in between
            check_and_free(mine.back());
            mine.pop_back();
          }
        }
        std::lock_guard<std::mutex> lock(mu);
        for (size_t i = 0; i < mine.size(); ++i) {
          if (i % 10 == 0) {
            late.push_back(mine[i]);
          } else {
            queue.push_back(mine[i]);
          }
        }
        cv.notify_all();
      });
    }
    for (auto& t : producers) t.join();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  }
  for (auto& t : consumers) t.join();
  // Freed by this thread, which has no heap of the set: every slab left is disowned.
  for (const Obj& o : late) check_and_free(o);
  set.settle_ready();
  set.release_warm();
  EXPECT_EQ(set.span_used(), 0);
}

}  // namespace
}  // namespace achunk::testing
