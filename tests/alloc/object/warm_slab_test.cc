// Warm slabs: the empty slabs an exiting thread leaves for the next threads' refills,
// within their budget, and given back once threads stop coming and going.
#include <gtest/gtest.h>

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
  // Each thread keeps its spares up to ThreadHeap::SPARE_BYTES_MAX, of a class the others
  // do not take: together more than the budget.
  for (int64_t size : {1000, 800, 600, 400}) {
    churn_one(set, static_cast<int>(ObjectSet::WARM_BYTES_MAX / size), size);
  }
  EXPECT_LE(set.warm_bytes(), ObjectSet::WARM_BYTES_MAX);
  EXPECT_GT(set.warm_bytes(), ObjectSet::WARM_BYTES_MAX / 2);
  EXPECT_GT(set.slabs_settled_empty() - settled_empty, 0);
  set.release_warm();
  EXPECT_EQ(set.span_used(), 0);
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
