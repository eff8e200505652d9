#include "alloc/object/thread_heap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

constexpr int64_t SLAB = 16 * 1024;  // the slab of every class up to 1 KiB

// A thread that runs what it is given and waits, idle, between: its heaps stay alive
// without a call, like a server thread waiting for work.
class IdleThread {
 public:
  IdleThread() : thread_([this] { loop(); }) {}
  ~IdleThread() {
    run(nullptr);
    thread_.join();
  }
  // Runs f on the thread and waits for it; nullptr ends the thread.
  void run(std::function<void()> f) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = std::move(f);
    quit_ = !job_;
    pending_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !pending_ || quit_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return pending_; });
      if (quit_) return;
      job_();
      pending_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool pending_ = false;
  bool quit_ = false;
  std::thread thread_;
};

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

TEST_F(ThreadHeapTest, ARunOfEmptiedSlabsGivesBackEveryEmptySlabTheHeapKeeps) {
  ObjectSet set(source_);
  ASSERT_EQ(slab_size(size_class_of(100)), SLAB);
  ASSERT_EQ(slab_size(size_class_of(300)), SLAB);
  ASSERT_EQ(slab_size(size_class_of(400)), SLAB);
  // A 400-byte slab whose objects another thread frees (its owner has not looked since),
  // beside a current 400-byte slab that keeps one object.
  std::vector<void*> remote;
  void* kept = nullptr;
  while (true) {
    void* p = set.alloc(400, 0);
    if (!remote.empty() && BlockSet::ptr2block(p) != BlockSet::ptr2block(remote[0])) {
      kept = p;
      break;
    }
    remote.push_back(p);
  }
  std::thread([&] {
    for (void* p : remote) ObjectSet::free(p);
  }).join();
  // An empty current 300-byte slab.
  ObjectSet::free(set.alloc(300, 0));
  auto slabs = fill_slabs(set, ThreadHeap::TRIM_RUN + 1);
  const int64_t full = set.span_used();

  // Slab 0 empties first and stays as the spare; the next six go back as they empty.
  // (Each fill refilled, which ended the run the 300-byte slab started.)
  for (int s = 0; s < ThreadHeap::TRIM_RUN - 1; ++s) {
    for (void* p : slabs[s]) ObjectSet::free(p);
  }
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN - 2) * SLAB);
  EXPECT_EQ(set.heap_trims(), 0);
  // The eighth in the run: the slab, the spare, the empty current 300-byte slab and the
  // 400-byte slab emptied remotely all go back.
  for (void* p : slabs[ThreadHeap::TRIM_RUN - 1]) ObjectSet::free(p);
  EXPECT_EQ(set.heap_trims(), 1);
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN + 2) * SLAB);
  // Until the next refill even the current slab goes back as it empties.
  for (void* p : slabs[ThreadHeap::TRIM_RUN]) ObjectSet::free(p);
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN + 3) * SLAB);
  // A refill ends that: a current slab that empties is kept again.
  ObjectSet::free(set.alloc(100, 0));
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN + 2) * SLAB);
  EXPECT_EQ(set.heap_trims(), 1);
  ObjectSet::free(kept);
}

TEST_F(ThreadHeapTest, AThreadThatFillsAndEmptiesSlabsInASteadyStateNeverTrims) {
  ObjectSet set(source_);
  // An object that cycles on its current slab empties it at every free.
  for (int i = 0; i < 10 * ThreadHeap::TRIM_RUN; ++i) ObjectSet::free(set.alloc(100, 0));
  // Rounds that fill three slabs and empty them: each round refills from its spare, so
  // no run reaches TRIM_RUN, over many more empties than that in total.
  for (int round = 0; round < 10 * ThreadHeap::TRIM_RUN; ++round) {
    for (auto& slab : fill_slabs(set, 3)) {
      for (void* p : slab) ObjectSet::free(p);
    }
  }
  EXPECT_EQ(set.heap_trims(), 0);
  // So the heap keeps its current slab and the spare, and refills without the block layer.
  const int64_t steady = set.span_used();
  for (auto& slab : fill_slabs(set, 2)) {
    for (void* p : slab) ObjectSet::free(p);
  }
  EXPECT_EQ(set.span_used(), steady);
}

TEST_F(ThreadHeapTest, CurrentSlabsEmptiedInARunAreGivenBackWashed) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  // One object per class, each slab followed by a live big object, so a slab given back
  // stays a 16 KiB free span of its own: too short for any wash as spans form.
  std::vector<void*> objs;
  std::vector<void*> big;
  int last_sc = -1;
  for (int64_t size = 16; static_cast<int>(objs.size()) < ThreadHeap::TRIM_RUN; size += 16) {
    if (size_class_of(size) == last_sc) continue;
    last_sc = size_class_of(size);
    objs.push_back(set.alloc(size, 0));
    big.push_back(set.alloc(SMALL_OBJECT_MAX + 1, 0));
  }
  const int64_t with_slabs = set.span_used();
  const int64_t releases = os_.release_calls();
  // A thread whose objects each sat alone on their class's current slab (the usual
  // state of a mostly idle thread): the last free is the eighth slab emptied in the run.
  for (int i = 0; i + 1 < ThreadHeap::TRIM_RUN; ++i) ObjectSet::free(objs[i]);
  EXPECT_EQ(set.heap_trims(), 0);
  EXPECT_EQ(set.span_used(), with_slabs);
  ObjectSet::free(objs.back());
  EXPECT_EQ(set.heap_trims(), 1);
  EXPECT_EQ(set.span_used(), with_slabs - ThreadHeap::TRIM_RUN * SLAB);
  // Each went back washed, not a span idle time later.
  EXPECT_EQ(os_.release_calls() - releases, ThreadHeap::TRIM_RUN);
  int64_t washed = 0;
  set.free_span_bytes(&washed);
  EXPECT_GE(washed, ThreadHeap::TRIM_RUN * SLAB);
  for (void* p : big) ObjectSet::free(p);
}

// A trim is the last a thread does before it waits, often the last call the process
// makes before going quiet: it also washes what other frees left dirty in the set.
TEST_F(ThreadHeapTest, ATrimAlsoWashesTheSetsDirtyFreeSpans) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  std::vector<void*> objs = one_per_class(set, ThreadHeap::TRIM_RUN);
  // A big object's 13 blocks between two live ones, away from the slabs: too short to
  // be washed as it forms, and no slab given back merges with it.
  void* before = set.alloc(100 * 1024, 0);
  void* dirty = set.alloc(100 * 1024, 0);
  void* after = set.alloc(100 * 1024, 0);
  std::memset(dirty, 1, 100 * 1024);
  ObjectSet::free(dirty);
  int64_t washed = 0;
  set.free_span_bytes(&washed);
  const int64_t washed_before = washed;
  const int64_t released = os_.released_bytes();
  for (void* p : objs) ObjectSet::free(p);
  ASSERT_EQ(set.heap_trims(), 1);
  washed = 0;
  set.free_span_bytes(&washed);
  EXPECT_GE(washed - washed_before, 13 * ABLOCK_SIZE);
  EXPECT_GE(os_.released_bytes() - released, 13 * ABLOCK_SIZE + ThreadHeap::TRIM_RUN * SLAB);
  ObjectSet::free(after);
  ObjectSet::free(before);
}

TEST_F(ThreadHeapTest, ATrimFollowedByARefillWithinTheSpanIdleTimeDoublesTheRun) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  auto cycle = [&](int n) {
    std::vector<void*> objs = one_per_class(set, n);
    for (void* p : objs) ObjectSet::free(p);
  };
  cycle(ThreadHeap::TRIM_RUN);
  EXPECT_EQ(set.heap_trims(), 1);
  clock_.advance_ms(1'000);
  // The refill came a second later: the trim was early, so this heap now needs twice the
  // run.
  cycle(2 * ThreadHeap::TRIM_RUN - 1);
  EXPECT_EQ(set.heap_trims(), 1);
  cycle(2 * ThreadHeap::TRIM_RUN);
  EXPECT_EQ(set.heap_trims(), 2);
  // A refill a whole span idle time after the trim halves it again.
  clock_.advance_ms(30'000);
  cycle(ThreadHeap::TRIM_RUN);
  EXPECT_EQ(set.heap_trims(), 3);
}

TEST_F(ThreadHeapTest, NoTrimWhenSpanWashingIsOff) {
  source_.set_span_idle_ms(-1);
  ObjectSet set(source_);
  std::vector<void*> objs = one_per_class(set, 2 * ThreadHeap::TRIM_RUN);
  const int64_t with_slabs = set.span_used();
  for (void* p : objs) ObjectSet::free(p);
  EXPECT_EQ(set.heap_trims(), 0);
  EXPECT_EQ(set.span_used(), with_slabs);  // every class keeps its current slab
}

// An idle thread makes no call, so it cannot give back the slabs its last frees emptied;
// another heap's trim takes them once a look finds the heap idle since the one before.
TEST_F(ThreadHeapTest, ATrimGivesBackTheSparesOfHeapsIdleSinceTheLastLook) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  IdleThread idle;
  // Two objects, each alone on its class's current slab, freed: their slabs are parked
  // as the classes' spares.
  idle.run([&] {
    ObjectSet::free(set.alloc(100, 0));
    ObjectSet::free(set.alloc(2000, 0));
  });
  const int64_t spares = slab_size(size_class_of(100)) + slab_size(size_class_of(2000));
  auto trim_here = [&] {
    clock_.advance_ms(30'000);  // each trim on time, so each run stays TRIM_RUN
    for (void* p : one_per_class(set, ThreadHeap::TRIM_RUN)) ObjectSet::free(p);
  };
  trim_here();  // the first look only notes the idle heap's activity
  ASSERT_EQ(set.heap_trims(), 1);
  EXPECT_EQ(set.spares_reclaimed(), 0);
  // A slow-path call since: busy, so it keeps them.
  idle.run([&] { ObjectSet::free(set.alloc(100, 0)); });
  trim_here();
  ASSERT_EQ(set.heap_trims(), 2);
  EXPECT_EQ(set.spares_reclaimed(), 0);
  const int64_t before = set.span_used();
  trim_here();
  ASSERT_EQ(set.heap_trims(), 3);
  EXPECT_EQ(set.spares_reclaimed(), spares);
  EXPECT_EQ(set.span_used(), before - spares);
  // Given back washed: the trim washes the free spans they became.
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
    while (!stop.load()) set.reclaim_idle_spares(nullptr);
  });
  a.join();
  b.join();
  stop.store(true);
  thief.join();
  EXPECT_EQ(set.span_used(), 0);  // the exited owners left nothing behind
}

}  // namespace
}  // namespace achunk::testing
