// Warm slabs: the empty slabs an exiting thread leaves for the next threads' refills,
// within their budget, and given back once threads stop coming and going.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class WarmSlabTest : public ChunkMgrTest {
 protected:
  // A thread that takes `n` objects of `size` bytes, frees them and exits.
  static void churn_one(ObjectSet& set, int n, int64_t size) {
    std::thread([&] {
      std::vector<void*> objs;
      for (int i = 0; i < n; ++i) objs.push_back(set.alloc(size, 0));
      for (void* p : objs) ObjectSet::free(p);
    }).join();
  }
  // `threads` threads alive at once, each taking `n` objects of `size` bytes and freeing
  // them; none exits before all have freed theirs, so none adopts another's slabs.
  static void churn_together(ObjectSet& set, int threads, int64_t n, int64_t size) {
    std::atomic<int> freed{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&] {
        std::vector<void*> objs;
        for (int64_t i = 0; i < n; ++i) objs.push_back(set.alloc(size, 0));
        for (void* p : objs) ObjectSet::free(p);
        freed.fetch_add(1);
        while (freed.load() < threads) std::this_thread::yield();
      });
    }
    for (std::thread& t : ts) t.join();
  }
  // Frees `objs`, flushes the thread's heap and gives the warm slabs back: nothing stays.
  static void expect_all_back(ObjectSet& set, const std::vector<void*>& objs) {
    for (void* p : objs) ObjectSet::free(p);
    set.flush_thread_heap();
    set.release_warm();
    EXPECT_EQ(set.span_used(), 0);
  }
  static ABlock* slab_at(void* p) { return BlockSet::ptr2block(static_cast<char*>(p) - 16); }
  DirectChunkSource source_{mgr_};
};

TEST_F(WarmSlabTest, TheNextThreadRefillsFromTheSlabAnExitedThreadEmptied) {
  ObjectSet set(source_);
  void* first = nullptr;
  std::thread([&] {
    first = set.alloc(100, 0);
    ObjectSet::free(first);
  }).join();
  EXPECT_EQ(set.warm_kept(), 1);
  EXPECT_GT(set.warm_bytes(), 0);
  std::thread([&] {
    ASSERT_NE(set.heap_for_this_thread(), nullptr);  // a span of its own
    const int64_t used = set.span_used();
    void* p = set.alloc(100, 0);
    // The same slab, its slots carved already: no new span, no new page.
    EXPECT_EQ(slab_at(p), slab_at(first));
    EXPECT_EQ(set.span_used(), used);
    ObjectSet::free(p);
  }).join();
  EXPECT_EQ(set.warm_adopted(), 1);
  EXPECT_EQ(set.warm_kept(), 2);  // and left warm again
  set.release_warm();
  EXPECT_EQ(set.warm_bytes(), 0);
  EXPECT_EQ(set.span_used(), 0);
}

TEST_F(WarmSlabTest, WarmSlabsStayWithinTheirBudgetTheRestGoBack) {
  ObjectSet set(source_);
  const int64_t settled_empty = set.slabs_settled_empty();
  // Each thread keeps its spares up to ThreadHeap::SPARE_BYTES_MAX, and all exit
  // together, so no thread adopts another's: together more than the budget.
  const int threads = static_cast<int>(ObjectSet::WARM_BYTES_MAX / ThreadHeap::SPARE_BYTES_MAX) + 8;
  churn_together(set, threads, ThreadHeap::SPARE_BYTES_MAX / 1000, 1000);
  EXPECT_LE(set.warm_bytes(), ObjectSet::WARM_BYTES_MAX);
  EXPECT_GT(set.warm_bytes(), ObjectSet::WARM_BYTES_MAX / 2);
  EXPECT_GT(set.slabs_settled_empty() - settled_empty, 0);
  set.release_warm();
  EXPECT_EQ(set.span_used(), 0);
}

// A pool's threads replaced all at once: the new ones refill from the slabs the old ones
// left, however many exited together, and carve nothing new. Before, all but 1 MiB of
// them went back as free spans, and the next threads' slabs landed on spans carved to
// other depths: each round touched new pages (400 threads: 50 MiB, then 114 by the 16th).
TEST_F(WarmSlabTest, ThreadsReplacedAllAtOnceRefillFromTheSlabsTheOldOnesLeft) {
  ObjectSet set(source_);
  // 32 threads of 64 KiB of 1000-byte objects (four slabs) each.
  auto round = [&] { churn_together(set, 32, 64, 1000); };
  round();
  const int64_t kept = set.warm_kept();
  EXPECT_GT(set.warm_bytes(), 1 << 20);     // more than one thread's worth of classes
  EXPECT_EQ(set.slabs_settled_empty(), 0);  // every emptied slab stayed warm
  const int64_t spans = set.span_used();
  round();
  EXPECT_EQ(set.warm_adopted(), kept);  // the second round's slabs are all the first's
  EXPECT_EQ(set.span_used(), spans);
  EXPECT_EQ(set.slabs_settled_empty(), 0);
  set.release_warm();
  EXPECT_EQ(set.span_used(), 0);
}

// Without a housekeeping thread: warm slabs that no thread kept or took for the span
// idle time go back at the next refill that carves a new slab, of any class.
TEST_F(WarmSlabTest, IdleWarmSlabsGoBackAtTheNextNewSlabWithoutAThread) {
  ObjectSet set(source_);
  churn_one(set, 500, 200);
  const int64_t warm = set.warm_bytes();
  ASSERT_GT(warm, 0);
  std::vector<void*> objs;
  clock_.advance_us(SPAN_IDLE_US - 1);
  objs.push_back(set.alloc(3000, 0));  // a new slab, before the idle time is up
  EXPECT_EQ(set.warm_bytes(), warm);
  clock_.advance_us(1);
  objs.push_back(set.alloc(5000, 0));  // another class's new slab, once it is
  EXPECT_EQ(set.warm_bytes(), 0);
  objs.push_back(set.alloc(5000, 0));  // the slab's own refills ask no more
  expect_all_back(set, objs);
}

// A negative span idle time (span_idle_ms:-1) keeps them until a look or a trim.
TEST_F(WarmSlabTest, IdleWarmSlabsStayWhenSpansNeverIdleOut) {
  source_.set_span_idle_ms(-1);
  ObjectSet set(source_);
  churn_one(set, 500, 200);
  const int64_t warm = set.warm_bytes();
  ASSERT_GT(warm, 0);
  clock_.advance_us(100 * SPAN_IDLE_US);
  const std::vector<void*> objs{set.alloc(5000, 0)};
  EXPECT_EQ(set.warm_bytes(), warm);
  expect_all_back(set, objs);
}

TEST_F(WarmSlabTest, WarmSlabsGoBackAtTheFirstLookWithNoThreadComingOrGoing) {
  ObjectSet set(source_);
  churn_one(set, 500, 200);
  const int64_t warm = set.warm_bytes();
  ASSERT_GT(warm, 0);
  // The look right after an exit: threads are still coming and going.
  set.wash_stale_spans(1'000'000);
  EXPECT_EQ(set.warm_bytes(), warm);
  churn_one(set, 500, 200);  // adopts and leaves them warm again
  set.wash_stale_spans(1'000'000);
  EXPECT_EQ(set.warm_bytes(), warm);
  // A whole interval with none: back to the shards, and the chunk with them.
  set.wash_stale_spans(1'000'000);
  EXPECT_EQ(set.warm_bytes(), 0);
  EXPECT_EQ(set.span_used(), 0);
}

TEST_F(WarmSlabTest, ATrimGivesWarmSlabsBackAtOnce) {
  ObjectSet set(source_);
  churn_one(set, 500, 200);
  ASSERT_GT(set.warm_bytes(), 0);
  set.wash_stale_spans(0);
  EXPECT_EQ(set.warm_bytes(), 0);
  EXPECT_EQ(set.span_used(), 0);
}

TEST_F(WarmSlabTest, AFlushFromALiveThreadKeepsNothingWarm) {
  ObjectSet set(source_);
  std::vector<void*> objs;
  for (int i = 0; i < 500; ++i) objs.push_back(set.alloc(200, 0));
  for (void* p : objs) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.warm_kept(), 0);
  EXPECT_EQ(set.span_used(), 0);
}

// Many threads exiting at once, each leaving warm slabs while others adopt them.
TEST_F(WarmSlabTest, ThreadsExitingAndRefillingAtOnceLoseNothing) {
  ObjectSet set(source_);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([&, t] {
        std::vector<void*> objs;
        for (int i = 0; i < 300; ++i) objs.push_back(set.alloc(16 + (i * 37 + t) % 1000, 0));
        for (void* p : objs) ObjectSet::free(p);
      });
    }
    for (std::thread& t : ts) t.join();
    EXPECT_LE(set.warm_bytes(), ObjectSet::WARM_BYTES_MAX);
  }
  EXPECT_GT(set.warm_adopted(), 0);
  set.release_warm();
  EXPECT_EQ(set.span_used(), 0);
}

}  // namespace
}  // namespace achunk::testing
