// Frees onto slabs the freeing thread does not own (a slab it let go when it filled, or
// another thread's): every one is checked at the free itself, its header written FREE,
// and then waits in the freeing thread's stash, its bin of the class. A second free or
// an overrun is refused at that free; what the stash holds goes back at thread exit, on
// a flush, and through another thread's look at an idle heap.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "alloc/object/thread_heap.h"
#include "support/chunk_mgr_fixture.h"
#include "support/error_recorder.h"
#include "support/idle_thread.h"

namespace achunk::testing {
namespace {

constexpr int64_t SIZE = 100;  // 112-byte slots, 127 to a slab
constexpr int PER_SLAB = 127;
const int SC = size_class_of(SIZE);

ObjectState state_of(void* p) {
  return header_state(load_header(p));
}
const void* owner_of(void* p) {
  return slab_of(BlockSet::ptr2block(header_of(p)))->owner_thread_.load();
}

class FreeForeignTest : public ChunkMgrTest {
 protected:
  void SetUp() override {
    ErrorRecorder::calls = 0;
    previous_ = set_error_handler(&ErrorRecorder::handler);
  }
  void TearDown() override {
    if (previous_ != nullptr) set_error_handler(previous_);
  }
  // One more full slab than a heap keeps, then an object on the next: the first slab is
  // disowned.
  std::vector<void*> fill(ObjectSet& set) {
    std::vector<void*> objs;
    for (int i = 0; i < (ThreadHeap::FULL_SLABS_KEPT + 2) * PER_SLAB + 1; ++i) {
      objs.push_back(set.alloc(SIZE, 0));
    }
    EXPECT_EQ(owner_of(objs[0]), disowned_by_this_thread());
    return objs;
  }
  // Frees what fill() gave and the test left, then the heap: the set holds no span.
  static void free_rest(ObjectSet& set, std::vector<void*>& objs) {
    for (void*& p : objs) {
      if (p != nullptr) {
        EXPECT_TRUE(ObjectSet::try_free_fast(p));
      }
      p = nullptr;
    }
    set.flush_thread_heap();
    EXPECT_EQ(set.span_used(), 0);
  }
  DirectChunkSource source_{mgr_};
  ErrorHandler previous_ = nullptr;
};

TEST_F(FreeForeignTest, AFreeIntoADisownedSlabIsCheckedAtTheFreeThenStashed) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  ThreadHeap* heap = set.existing_heap();
  ASSERT_NE(heap, nullptr);
  const int before = heap->stash_count(SC);
  ASSERT_TRUE(ObjectSet::try_free_fast(objs[0]));
  // Checked and written at once, with size and label kept for a later report.
  EXPECT_EQ(state_of(objs[0]), ObjectState::FREE);
  EXPECT_EQ(header_size(load_header(objs[0])), static_cast<uint32_t>(SIZE));
  EXPECT_EQ(heap->stash_count(SC), before + 1);
  // The slab is not touched: still let go, its object still counted out.
  EXPECT_EQ(owner_of(objs[0]), disowned_by_this_thread());
  objs[0] = nullptr;
  EXPECT_EQ(ErrorRecorder::calls, 0);
  free_rest(set, objs);
}

TEST_F(FreeForeignTest, ASecondFreeOfAStashedObjectIsRefusedAtThatFree) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  void* p = objs[1];
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  const int stashed = set.existing_heap()->stash_count(SC);
  // The fast path hands it to the caller's full path, which reports it with this stack.
  EXPECT_FALSE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(state_of(p), ObjectState::FREE);
  EXPECT_EQ(set.existing_heap()->stash_count(SC), stashed);
  objs[1] = nullptr;
  free_rest(set, objs);
}

TEST_F(FreeForeignTest, AnOverrunIsRefusedAtTheFreeAndTheObjectKept) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  auto* p = static_cast<unsigned char*>(objs[2]);
  std::memset(p, 0x5A, SIZE + 4);  // into the canary
  EXPECT_FALSE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(state_of(p), ObjectState::IN_USE);
  write_tail(p, SIZE);
  free_rest(set, objs);
}

TEST_F(FreeForeignTest, APointerInsideAnObjectIsRefusedAndNothingWritten) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  auto* p = static_cast<unsigned char*>(objs[2]);
  std::memset(p, 0x5A, SIZE);
  EXPECT_FALSE(ObjectSet::try_free_fast(p + 16));
  EXPECT_FALSE(ObjectSet::try_free_fast(p + 48));
  for (int i = 0; i < SIZE; ++i) ASSERT_EQ(p[i], 0x5A) << i;
  EXPECT_EQ(state_of(p), ObjectState::IN_USE);
  free_rest(set, objs);
}

TEST_F(FreeForeignTest, AnotherThreadsObjectWaitsInTheFreeingThreadsStash) {
  ObjectSet set(source_);
  void* mine = set.alloc(SIZE, 0);  // this thread's heap, with a current slab
  void* theirs = nullptr;
  std::thread([&] { theirs = set.alloc(SIZE, 0); }).join();
  ThreadHeap* heap = set.existing_heap();
  const int before = heap->stash_count(SC);
  ASSERT_TRUE(ObjectSet::try_free_fast(theirs));
  EXPECT_EQ(state_of(theirs), ObjectState::FREE);
  EXPECT_EQ(heap->stash_count(SC), before + 1);
  ASSERT_TRUE(ObjectSet::try_free_fast(mine));
  // The exited thread's slab is settled: the flush gives the stashed object back to it.
  set.flush_thread_heap();
  set.reclaim_idle_spares();
  set.settle_ready();
  EXPECT_EQ(set.span_used(), 0);
}

// Without the process barrier (a kernel without membarrier) no look can take an idle
// heap's stash, but the owner's stash works the same and goes back at its flush.
TEST_F(FreeForeignTest, WithoutTheBarrierTheStashStillTakesFrees) {
  os_.set_barrier(false);
  {
    ObjectSet set(source_);
    std::vector<void*> objs = fill(set);
    ThreadHeap* heap = set.existing_heap();
    const int before = heap->stash_count(SC);
    ASSERT_TRUE(ObjectSet::try_free_fast(objs[0]));
    EXPECT_EQ(heap->stash_count(SC), before + 1);
    objs[0] = nullptr;
    free_rest(set, objs);
  }
  os_.set_barrier(true);
}

TEST_F(FreeForeignTest, TheLookTakesAnIdleThreadsStash) {
  if (!os_.process_barrier_available()) GTEST_SKIP() << "no process barrier here";
  ObjectSet set(source_);
  IdleThread idle;
  std::vector<void*> objs;
  constexpr int N = 6;
  idle.run([&] {
    objs = fill(set);
    for (int i = 0; i < N; ++i) ASSERT_TRUE(ObjectSet::try_free_fast(objs[i]));
  });
  const int64_t before = set.stash_reclaimed();
  // The first look sees the heap, the second finds it idle since.
  set.reclaim_idle_spares();
  set.reclaim_idle_spares();
  EXPECT_GE(set.stash_reclaimed() - before, N);
  for (int i = 0; i < N; ++i) objs[i] = nullptr;
  EXPECT_EQ(ErrorRecorder::calls, 0);
  idle.run([&] { free_rest(set, objs); });
}

TEST_F(FreeForeignTest, AnExitingThreadGivesItsStashBack) {
  ObjectSet set(source_);
  const int N = 6;
  std::vector<void*> objs;
  std::thread([&] {
    objs = fill(set);
    for (int i = 0; i < N; ++i) ASSERT_TRUE(ObjectSet::try_free_fast(objs[i]));
  }).join();
  for (int i = 0; i < N; ++i) {
    EXPECT_EQ(state_of(objs[i]), ObjectState::FREE);
    objs[i] = nullptr;
  }
  // The exited thread's slabs are settled: their objects take the full free.
  for (void* p : objs) {
    if (p != nullptr) ObjectSet::free(p);
  }
  set.reclaim_idle_spares();
  set.settle_ready();
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
  EXPECT_EQ(ErrorRecorder::calls, 0);
}

// The inherit shape: a thread's live set (8 B-1 KiB) passes to a successor when it exits,
// which replaces random objects of it and exits in turn; the last one frees the rest.
// Every free of a predecessor's object is checked and stashed, and every object goes
// back: once all are freed and the idle heaps looked at, the set holds no span and no
// chunk.
TEST_F(FreeForeignTest, ADeadThreadsObjectsFreedByItsSuccessorsAllGoBack) {
  ObjectSet set(source_);
  std::vector<void*> live(2'000);
  std::mt19937 rng(9);
  auto size = [&] { return static_cast<int64_t>(8 + rng() % 1017); };
  std::thread([&] {
    for (void*& p : live) p = set.alloc(size(), 0);
  }).join();
  for (int generation = 0; generation < 4; ++generation) {
    std::thread([&] {
      for (int step = 0; step < 3'000; ++step) {
        void*& p = live[rng() % live.size()];
        ASSERT_TRUE(ObjectSet::try_free_fast(p));
        p = set.alloc(size(), 0);
        ASSERT_NE(p, nullptr);
      }
    }).join();
  }
  std::thread([&] {
    for (void*& p : live) {
      ASSERT_TRUE(ObjectSet::try_free_fast(p));
      p = nullptr;
    }
  }).join();
  EXPECT_EQ(ErrorRecorder::calls, 0);
  // The exited threads' warm and ready slabs, as the housekeeping thread's looks find them.
  set.reclaim_idle_spares();
  set.settle_ready();
  set.wash_stale_spans(0);
  EXPECT_EQ(set.span_used(), 0);
  EXPECT_EQ(set.hold(), 0);
}

// A thread replaces random objects of a class with more slabs than its heap keeps (most
// frees onto slabs it let go, so stashed), pausing now and then for three looks, so that
// the last ones find its heap idle and take its stash, the last perhaps as it starts
// again; another looks without a pause. No object is freed twice or lost, and every span
// goes back. TSan checks the handshake.
TEST_F(FreeForeignTest, StashedFreesRaceSafelyWithTheLook) {
  if (!os_.process_barrier_available()) GTEST_SKIP() << "no process barrier here";
  ObjectSet set(source_);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> looks{0};
  std::thread looker([&] {
    while (!stop.load()) {
      set.reclaim_idle_spares();
      looks.fetch_add(1);
    }
  });
  std::mt19937 rng(5);
  std::vector<unsigned char*> live(6'000);
  auto fill_one = [&](size_t i) {
    live[i] = static_cast<unsigned char*>(set.alloc(SIZE, 0));
    ASSERT_NE(live[i], nullptr);
    std::memset(live[i], static_cast<int>(i & 0xFF), 16);
  };
  for (size_t i = 0; i < live.size(); ++i) fill_one(i);
  int64_t step = 0;
  for (; step < 400'000 && set.stash_reclaimed() < 200; ++step) {
    if (step % 256 == 0) {
      const int64_t seen = looks.load();
      while (looks.load() < seen + 3) std::this_thread::yield();
    }
    const size_t i = rng() % live.size();
    ASSERT_EQ(live[i][0], i & 0xFF);
    ASSERT_EQ(live[i][15], i & 0xFF);
    // The replacement first: a malloc takes from the stash before the slabs, so the stash
    // holds the last free at each pause.
    unsigned char* old = live[i];
    fill_one(i);
    ASSERT_TRUE(ObjectSet::try_free_fast(old));
  }
  stop.store(true);
  looker.join();
  EXPECT_GE(set.stash_reclaimed(), 200) << step;
  for (unsigned char* p : live) ASSERT_TRUE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(ErrorRecorder::calls, 0);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

}  // namespace
}  // namespace achunk::testing
