// The queue of frees whose checks wait: a free into a slab the thread disowned reads
// nothing of its object and marks its header's top byte, and the free LEN frees later
// checks and frees it. What a check
// finds wrong is still reported, what is queued never stays, and a look takes an idle
// thread's queue.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "achunk/base/spin_lock.h"
#include "alloc/object/malloc_allocator.h"
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
constexpr int LEN = FreeQueue::LEN;

ObjectState state_of(void* p) {
  return header_state(load_header(p));
}
const void* owner_of(void* p) {
  return slab_of(BlockSet::ptr2block(header_of(p)))->owner_thread_.load();
}

class FreeQueueTest : public ChunkMgrTest {
 protected:
  void SetUp() override {
    // Without the barrier no look could take an idle thread's queue, so none opens.
    if (!os_.process_barrier_available()) GTEST_SKIP() << "no process barrier here";
    ErrorRecorder::calls = 0;
    previous_ = set_error_handler(&ErrorRecorder::handler);
  }
  void TearDown() override {
    if (previous_ != nullptr) set_error_handler(previous_);
  }
  // One more full slab than a heap keeps, then an object on the next: the first slab is
  // disowned, so frees of its objects are queued.
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

TEST_F(FreeQueueTest, AFreeIntoADisownedSlabIsCheckedLenFreesLater) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  void* first = objs[0];
  ASSERT_TRUE(ObjectSet::try_free_fast(first));
  // Marked, not checked: the header's top byte alone was written.
  EXPECT_EQ(state_of(first), ObjectState::QUEUED);
  EXPECT_EQ(header_size(load_header(first)), static_cast<uint32_t>(SIZE));
  for (int i = 1; i < LEN; ++i) ASSERT_TRUE(ObjectSet::try_free_fast(objs[i]));
  EXPECT_EQ(state_of(first), ObjectState::QUEUED);
  ASSERT_TRUE(ObjectSet::try_free_fast(objs[LEN]));
  EXPECT_EQ(state_of(first), ObjectState::FREE);
  EXPECT_EQ(state_of(objs[1]), ObjectState::QUEUED);
  ObjectSet::check_queued_frees();
  for (int i = 0; i <= LEN; ++i) EXPECT_EQ(state_of(objs[i]), ObjectState::FREE);
  for (int i = 0; i <= LEN; ++i) objs[i] = nullptr;
  EXPECT_EQ(ErrorRecorder::calls, 0);
  free_rest(set, objs);
}

TEST_F(FreeQueueTest, WithTheOptionOffEveryFreeIsCheckedAtOnce) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  ASSERT_TRUE(ObjectSet::try_free_fast(objs[0]));
  ObjectSet::set_free_checks_queued(false);
  ASSERT_TRUE(ObjectSet::try_free_fast(objs[1]));
  EXPECT_EQ(state_of(objs[1]), ObjectState::FREE);
  // A double free fails at once, to the caller's full path, which reports it with the
  // bad free's stack.
  EXPECT_FALSE(ObjectSet::try_free_fast(objs[1]));
  // What was queued before is still checked as before.
  EXPECT_EQ(state_of(objs[0]), ObjectState::QUEUED);
  ObjectSet::check_queued_frees();
  EXPECT_EQ(state_of(objs[0]), ObjectState::FREE);
  ObjectSet::set_free_checks_queued(true);
  objs[0] = objs[1] = nullptr;
  free_rest(set, objs);
}

// A slot above SLOT_MAX: its slab holds a few objects, and one waiting would keep it.
TEST_F(FreeQueueTest, ABigSlotsObjectIsFreedAtOnce) {
  ObjectSet set(source_);
  constexpr int64_t BIG_SIZE = 2000;
  const int sc = size_class_of(BIG_SIZE);
  ASSERT_GT(class_slot_size(sc), FreeQueue::SLOT_MAX);
  const int64_t per_slab = (slab_bytes(sc) - slab_lead(sc)) / class_slot_size(sc);
  std::vector<void*> objs;
  for (int64_t i = 0; i < (ThreadHeap::FULL_SLABS_KEPT + 2) * per_slab + 1; ++i) {
    objs.push_back(set.alloc(BIG_SIZE, 0));
  }
  ASSERT_EQ(owner_of(objs[0]), disowned_by_this_thread());
  ASSERT_TRUE(ObjectSet::try_free_fast(objs[0]));
  EXPECT_EQ(state_of(objs[0]), ObjectState::FREE);
  objs[0] = nullptr;
  free_rest(set, objs);
}

TEST_F(FreeQueueTest, ObjectsOfOwnedAndOfOtherThreadsSlabsAreFreedAtOnce) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  void* owned = objs.back();
  ASSERT_TRUE(ObjectSet::try_free_fast(owned));
  EXPECT_EQ(state_of(owned), ObjectState::FREE);
  objs.back() = nullptr;
  void* theirs = nullptr;
  std::thread([&] { theirs = set.alloc(SIZE, 0); }).join();
  ASSERT_TRUE(ObjectSet::try_free_fast(theirs));
  EXPECT_EQ(state_of(theirs), ObjectState::FREE);
  free_rest(set, objs);
}

TEST_F(FreeQueueTest, ASecondFreeOfAQueuedObjectIsReportedByItsCheckAndFreesNothing) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  void* p = objs[3];
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(ErrorRecorder::calls, 0);
  // The first check frees it, the second finds it free: the object is freed once.
  ObjectSet::check_queued_frees();
  EXPECT_EQ(state_of(p), ObjectState::FREE);
  EXPECT_EQ(ErrorRecorder::calls, 1);
  EXPECT_EQ(ErrorRecorder::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_EQ(ErrorRecorder::ptr, p);
  objs[3] = nullptr;
  free_rest(set, objs);
}

TEST_F(FreeQueueTest, AQueuedFreeOfAFreedObjectIsReportedByItsCheck) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  void* p = objs[5];
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  ObjectSet::check_queued_frees();
  ASSERT_EQ(state_of(p), ObjectState::FREE);
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(state_of(p), ObjectState::QUEUED_FREE);
  EXPECT_EQ(ErrorRecorder::calls, 0);
  ObjectSet::check_queued_frees();
  EXPECT_EQ(ErrorRecorder::calls, 1);
  EXPECT_EQ(ErrorRecorder::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_EQ(ErrorRecorder::ptr, p);
  EXPECT_NE(ErrorRecorder::line.find("found by a later free's check"), std::string::npos)
      << ErrorRecorder::line;
  EXPECT_EQ(state_of(p), ObjectState::FREE);  // the mark taken back
  objs[5] = nullptr;
  free_rest(set, objs);
}

// The mark reads as freed before the check: malloc_usable_size (and realloc, through the
// same header check) of a queued object is a use after its free.
TEST_F(FreeQueueTest, TheSizeOfAQueuedObjectIsAskedOfAFreedOne) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  void* p = objs[4];
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(ObMallocAllocator::usable_size(p), -1);
  EXPECT_EQ(ErrorRecorder::calls, 1);
  EXPECT_EQ(ErrorRecorder::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_EQ(ErrorRecorder::ptr, p);
  EXPECT_EQ(ObMallocAllocator::get_size(p), -1);
  EXPECT_EQ(ErrorRecorder::calls, 2);
  ObjectSet::check_queued_frees();
  EXPECT_EQ(state_of(p), ObjectState::FREE);
  EXPECT_EQ(ErrorRecorder::calls, 2);
  objs[4] = nullptr;
  free_rest(set, objs);
}

TEST_F(FreeQueueTest, AnOverrunFoundByTheCheckIsReportedAndTheObjectKept) {
  ObjectSet set(source_);
  std::vector<void*> objs = fill(set);
  auto* p = static_cast<unsigned char*>(objs[7]);
  p[SIZE] ^= 0xFF;  // the canary's first byte
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  ObjectSet::check_queued_frees();
  EXPECT_EQ(ErrorRecorder::calls, 1);
  EXPECT_EQ(ErrorRecorder::kind, ErrorKind::CORRUPTION);
  EXPECT_EQ(ErrorRecorder::ptr, p);
  EXPECT_EQ(state_of(p), ObjectState::IN_USE);
  p[SIZE] ^= 0xFF;  // repaired, it frees as any object
  free_rest(set, objs);
  EXPECT_EQ(ErrorRecorder::calls, 1);
}

TEST_F(FreeQueueTest, APointerInsideAnObjectIsNeverQueuedNorWritten) {
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

TEST_F(FreeQueueTest, TheLookTakesAnIdleThreadsQueue) {
  ObjectSet set(source_);
  IdleThread idle;
  std::vector<void*> objs;
  idle.run([&] {
    objs = fill(set);
    for (int i = 0; i < LEN / 2; ++i) ASSERT_TRUE(ObjectSet::try_free_fast(objs[i]));
  });
  for (int i = 0; i < LEN / 2; ++i) EXPECT_EQ(state_of(objs[i]), ObjectState::QUEUED);
  // The first look sees the heap, the second finds it idle since.
  set.reclaim_idle_spares();
  set.reclaim_idle_spares();
  for (int i = 0; i < LEN / 2; ++i) EXPECT_EQ(state_of(objs[i]), ObjectState::FREE);
  EXPECT_EQ(set.queue_reclaimed(), LEN / 2);
  for (int i = 0; i < LEN / 2; ++i) objs[i] = nullptr;
  EXPECT_EQ(ErrorRecorder::calls, 0);
  idle.run([&] { free_rest(set, objs); });
}

TEST_F(FreeQueueTest, TheLookReportsWhatItsChecksFind) {
  ObjectSet set(source_);
  IdleThread idle;
  std::vector<void*> objs;
  void* p = nullptr;
  idle.run([&] {
    objs = fill(set);
    p = objs[1];
    ASSERT_TRUE(ObjectSet::try_free_fast(p));
    ObjectSet::check_queued_frees();
    ASSERT_TRUE(ObjectSet::try_free_fast(p));  // a double free, queued
  });
  set.reclaim_idle_spares();
  set.reclaim_idle_spares();
  EXPECT_EQ(ErrorRecorder::calls, 1);
  EXPECT_EQ(ErrorRecorder::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_EQ(ErrorRecorder::ptr, p);
  objs[1] = nullptr;
  idle.run([&] { free_rest(set, objs); });
}

TEST_F(FreeQueueTest, AnExitingThreadChecksItsQueue) {
  ObjectSet set(source_);
  std::vector<void*> objs;
  void* freed_twice = nullptr;
  std::thread([&] {
    objs = fill(set);
    for (int i = 0; i < LEN / 2; ++i) ASSERT_TRUE(ObjectSet::try_free_fast(objs[i]));
    freed_twice = objs[LEN];
    ASSERT_TRUE(ObjectSet::try_free_fast(freed_twice));
    ObjectSet::check_queued_frees();
    ASSERT_TRUE(ObjectSet::try_free_fast(freed_twice));
  }).join();
  for (int i = 0; i < LEN / 2; ++i) EXPECT_EQ(state_of(objs[i]), ObjectState::FREE);
  EXPECT_EQ(ErrorRecorder::calls, 1);
  EXPECT_EQ(ErrorRecorder::ptr, freed_twice);
  for (int i = 0; i < LEN / 2; ++i) objs[i] = nullptr;
  objs[LEN] = nullptr;
  // The exited thread's slabs are settled: their objects take the full free.
  for (void* p : objs) {
    if (p != nullptr) ObjectSet::free(p);
  }
  set.reclaim_idle_spares();
  set.settle_ready();
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// A thread exiting while a look has its queue closed, the look then backing off (it sees
// a queue call under way): the exit waits the look out, so every queued free is still
// checked and done. Before, the exit's check found the queue closed and the frees went
// with the thread's state.
TEST_F(FreeQueueTest, AThreadExitingWhileALookHasItsQueueClosedStillChecksIt) {
  ObjectSet set(source_);
  std::vector<void*> objs;
  std::atomic<FreeQueue*> queue{nullptr};
  std::atomic<bool> exit_now{false};
  std::thread owner([&] {
    objs = fill(set);
    for (int i = 0; i < LEN / 2; ++i) ASSERT_TRUE(ObjectSet::try_free_fast(objs[i]));
    queue = &thread_state().free_queue;
    while (!exit_now.load()) std::this_thread::yield();
  });
  while (queue.load() == nullptr) std::this_thread::yield();
  set.reclaim_idle_spares();  // notes the heap's calls: the next look finds it idle
  bool looked = false;
  os_.set_barrier_hook([&] {
    // The queue is closed: the thread exits, and waits for the set's heap list, which
    // the look holds (now), or after its check met the closed queue (before).
    looked = true;
    const int64_t sleeps = SpinLock::sleeps();
    exit_now = true;
    while (SpinLock::sleeps() == sleeps) std::this_thread::yield();
    queue.load()->busy.store(true);  // the look backs off
  });
  set.reclaim_idle_spares();
  os_.set_barrier_hook(nullptr);
  owner.join();
  EXPECT_TRUE(looked);
  EXPECT_EQ(set.queue_reclaimed(), 0);
  for (int i = 0; i < LEN / 2; ++i) {
    EXPECT_EQ(state_of(objs[i]), ObjectState::FREE);
    objs[i] = nullptr;
  }
  EXPECT_EQ(ErrorRecorder::calls, 0);
  for (void* p : objs) {
    if (p != nullptr) ObjectSet::free(p);
  }
  set.settle_ready();
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// A thread replaces random objects of a class with more slabs than its heap keeps (most
// frees queued), pausing now and then for three looks, so that the last ones find
// its heap idle and take its queue, the last perhaps as it starts again; another looks
// without a pause. No object is freed twice or lost, and every span goes back. TSan
// checks the handshake.
TEST_F(FreeQueueTest, QueuedFreesRaceSafelyWithTheLook) {
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
  for (; step < 400'000 && set.queue_reclaimed() < 200; ++step) {
    if (step % 256 == 0) {
      const int64_t seen = looks.load();
      while (looks.load() < seen + 3) std::this_thread::yield();
    }
    const size_t i = rng() % live.size();
    ASSERT_EQ(live[i][0], i & 0xFF);
    ASSERT_EQ(live[i][15], i & 0xFF);
    ASSERT_TRUE(ObjectSet::try_free_fast(live[i]));
    fill_one(i);
  }
  stop.store(true);
  looker.join();
  EXPECT_GE(set.queue_reclaimed(), 200) << step;
  for (unsigned char* p : live) ASSERT_TRUE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(ErrorRecorder::calls, 0);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

}  // namespace
}  // namespace achunk::testing
