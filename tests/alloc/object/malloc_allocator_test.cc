// ob_malloc's engine over a fake OS: sizes, accounting by ctx and label, limits and
// their reasons, bad frees, and cross-thread use (alignment: malloc_align_test.cc).
#include "alloc/object/malloc_allocator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "achunk/base/alloc_failure.h"
#include "achunk/base/error_report.h"
#include "alloc/object/label.h"
#include "alloc/object/ob_malloc_fixture.h"

namespace achunk::testing {
namespace {

TEST_F(ObMallocTest, SizesFromZeroToHugeAreAlignedAndHoldTheirBytes) {
  const ObMemAttr attr(TENANT, "t_sizes");
  std::set<void*> seen;
  std::vector<void*> ptrs;
  for (int64_t size :
       {int64_t{0}, int64_t{0}, int64_t{1}, int64_t{16}, int64_t{64}, int64_t{1000}, int64_t{4096},
        int64_t{16000}, int64_t{100000}, int64_t{3} << 20, int64_t{40} << 20}) {
    void* p = alloc_->alloc(size, attr);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_TRUE(seen.insert(p).second) << "pointer handed out twice";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
    EXPECT_EQ(ObMallocAllocator::get_size(p), size);
    std::memset(p, 0xab, static_cast<size_t>(size));
    ptrs.push_back(p);
  }
  for (void* p : ptrs) ObMallocAllocator::free(p);
}

TEST_F(ObMallocTest, AccountingByCtxAndLabelIsExact) {
  const ObMemAttr a(TENANT, "t_acct_a");
  const ObMemAttr b(TENANT, "t_acct_b", WORK_AREA);
  std::vector<void*> pa;
  std::vector<void*> pb;
  for (int i = 0; i < 100; ++i) pa.push_back(alloc_->alloc(64, a));
  for (int i = 0; i < 7; ++i) pb.push_back(alloc_->alloc(20000, b));
  EXPECT_EQ(usage_of("t_acct_a").count, 100);
  EXPECT_EQ(usage_of("t_acct_a").used, 6400);
  EXPECT_EQ(usage_of("t_acct_a").hold, 8000);  // 80-byte slots
  EXPECT_EQ(usage_of("t_acct_b", WORK_AREA).count, 7);
  EXPECT_EQ(usage_of("t_acct_b", WORK_AREA).used, 7 * 20000);
  EXPECT_EQ(usage_of("t_acct_b").count, 0);  // not in the default ctx
  ObMallocAllocator::free(pa[0]);
  EXPECT_EQ(usage_of("t_acct_a").count, 99);
  EXPECT_EQ(alloc_->get_tenant(TENANT)->hold(), ta().hold() + ta(WORK_AREA).hold());
  EXPECT_EQ(mgr_.get_used(), alloc_->get_tenant(TENANT)->hold());
  for (size_t i = 1; i < pa.size(); ++i) ObMallocAllocator::free(pa[i]);
  for (void* p : pb) ObMallocAllocator::free(p);
  alloc_->flush_thread_caches();
  EXPECT_EQ(ta().hold(), 0);
  EXPECT_EQ(ta(WORK_AREA).hold(), 0);
}

TEST_F(ObMallocTest, CtxLimitIsHitAtTheBoundaryWithItsReason) {
  const ObMemAttr attr(TENANT, "t_ctx_limit");
  ASSERT_TRUE(alloc_->set_tenant_ctx_limit(TENANT, DEFAULT_CTX_ID, 4 * MB));
  // Big objects of just under a chunk: each takes one 2 MiB chunk.
  const int64_t size = ACHUNK_SIZE - 64;
  void* a = alloc_->alloc(size, attr);
  void* b = alloc_->alloc(size, attr);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(ta().hold(), 4 * MB);
  EXPECT_EQ(alloc_->alloc(size, attr), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::CTX_LIMIT);
  EXPECT_EQ(last_alloc_failure().limit, 4 * MB);
  EXPECT_EQ(last_alloc_failure().hold, 4 * MB);
  EXPECT_EQ(ta().hold(), 4 * MB);  // nothing charged for the failure
  ObMallocAllocator::free(a);
  EXPECT_NE(a = alloc_->alloc(size, attr), nullptr);
  ObMallocAllocator::free(a);
  ObMallocAllocator::free(b);
}

// Warm slabs are a cache: an allocation they would keep under the ctx's limit takes them
// back first.
TEST_F(ObMallocTest, ALimitReachedGivesBackTheWarmSlabsOfExitedThreadsFirst) {
  const ObMemAttr attr(TENANT, "t_warm_limit");
  std::thread([&] {
    std::vector<void*> objs;
    for (int i = 0; i < 1000; ++i) objs.push_back(alloc_->alloc(100 + i % 200, attr));
    for (void* p : objs) ObMallocAllocator::free(p);
  }).join();
  ObjectSet& set = ta().object_set();
  EXPECT_GT(set.warm_bytes(), 0);
  EXPECT_EQ(ta().hold(), 2 * MB);  // the warm slabs hold one chunk
  ASSERT_TRUE(alloc_->set_tenant_ctx_limit(TENANT, DEFAULT_CTX_ID, 4 * MB));
  const int64_t size = ACHUNK_SIZE - 64;
  void* a = alloc_->alloc(size, attr);
  ASSERT_NE(a, nullptr);
  void* b = alloc_->alloc(size, attr);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(set.warm_bytes(), 0);
  EXPECT_EQ(ta().hold(), 4 * MB);
  ObMallocAllocator::free(a);
  ObMallocAllocator::free(b);
}

TEST_F(ObMallocTest, TenantAndServerLimits) {
  const ObMemAttr attr(TENANT, "t_limits");
  const ObMemAttr other(TENANT, "t_limits", EXECUTE_CTX_ID);
  ASSERT_TRUE(alloc_->set_tenant_limit(TENANT, 4 * MB));
  void* a = alloc_->alloc(3 * MB, attr);  // a 4 MiB-mapped chunk charging ~3 MiB
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(alloc_->alloc(2 * MB, other), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::TENANT_LIMIT);
  alloc_->set_tenant_limit(TENANT, 0);
  mgr_.set_memory_limit(6 * MB);
  EXPECT_EQ(alloc_->alloc(4 * MB, other), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::SERVER_LIMIT);
  EXPECT_EQ(ta(EXECUTE_CTX_ID).hold(), 0);
  char msg[256];
  format_alloc_failure(last_alloc_failure(), msg, sizeof(msg));
  EXPECT_NE(std::string(msg).find("SERVER_HOLD_REACH_LIMIT"), std::string::npos);
  ObMallocAllocator::free(a);
}

TEST_F(ObMallocTest, BadCtxIdIsAnInvalidArgument) {
  EXPECT_EQ(alloc_->alloc(10, ObMemAttr(TENANT, "x", MAX_CTX_ID)), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_ARGUMENT);
  EXPECT_EQ(alloc_->alloc(-1, ObMemAttr(TENANT, "x")), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE);
}

// A big object's span holds no distances past its first block (BlockSet::Lookup): a
// pointer deep inside it still finds the span, and is told apart from an object start.
TEST_F(ObMallocTest, APointerDeepInsideABigObjectIsNotAnObjectStart) {
  Captured::reports.clear();
  ErrorHandler previous = set_error_handler(&Captured::handler);
  const ObMemAttr attr(TENANT, "t_deepfree");
  char* big = static_cast<char*>(alloc_->alloc(300 << 10, attr));
  ASSERT_NE(big, nullptr);
  ObMallocAllocator::free(big + (200 << 10));
  set_error_handler(previous);
  ASSERT_EQ(Captured::reports.size(), 1u);
  EXPECT_EQ(Captured::reports[0].first, ErrorKind::INVALID_FREE);
  EXPECT_NE(Captured::reports[0].second.find("not the start of an object"), std::string::npos)
      << Captured::reports[0].second;
  EXPECT_EQ(usage_of("t_deepfree").count, 1);
  ObMallocAllocator::free(big);
}

TEST_F(ObMallocTest, BadFreesAreReportedAndChangeNothing) {
  Captured::reports.clear();
  ErrorHandler previous = set_error_handler(&Captured::handler);
  const ObMemAttr attr(TENANT, "t_badfree");
  char* p = static_cast<char*>(alloc_->alloc(64, attr));
  char* big = static_cast<char*>(alloc_->alloc(100000, attr));
  ObMallocAllocator::free(p + 8);     // misaligned
  ObMallocAllocator::free(big + 64);  // interior: no object header there
  p[64] = 'x';                        // one byte past the end
  ObMallocAllocator::free(p);
  ASSERT_EQ(Captured::reports.size(), 3u);
  EXPECT_EQ(Captured::reports[0].first, ErrorKind::INVALID_FREE);
  EXPECT_EQ(Captured::reports[1].first, ErrorKind::INVALID_FREE);
  EXPECT_EQ(Captured::reports[2].first, ErrorKind::CORRUPTION);
  EXPECT_NE(Captured::reports[2].second.find("size=64 label=t_badfree"), std::string::npos)
      << Captured::reports[2].second;
  EXPECT_EQ(usage_of("t_badfree").count, 2);  // nothing was freed
  p[64] = 0;  // repair, then free for real; a second free is a double free
  write_tail(p, 64);
  ObMallocAllocator::free(p);
  ObMallocAllocator::free(p);
  ASSERT_EQ(Captured::reports.size(), 4u);
  EXPECT_EQ(Captured::reports[3].first, ErrorKind::DOUBLE_FREE);
  EXPECT_NE(Captured::reports[3].second.find("size=64 label=t_badfree"), std::string::npos);
  ObMallocAllocator::free(big);
  set_error_handler(previous);
}

// An object freed into a full slab waits in the thread's stash, its header FREE: freeing
// it again is a double free, reported at that second free, and it counts as freed in the
// usage.
TEST_F(ObMallocTest, ASecondFreeOfAStashedObjectIsADoubleFree) {
  Captured::reports.clear();
  ErrorHandler previous = set_error_handler(&Captured::handler);
  const ObMemAttr attr(TENANT, "t_stashed");
  // More than a slab of 64-byte objects: the first slab is full, off the current one.
  std::vector<void*> objs;
  for (int i = 0; i < 400; ++i) objs.push_back(alloc_->alloc(64, attr));
  ObMallocAllocator::free(objs[0]);
  EXPECT_EQ(usage_of("t_stashed").count, 399);
  EXPECT_EQ(header_state(load_header(objs[0])), ObjectState::FREE);
  ObMallocAllocator::free(objs[0]);
  ASSERT_EQ(Captured::reports.size(), 1u);
  EXPECT_EQ(Captured::reports[0].first, ErrorKind::DOUBLE_FREE);
  EXPECT_NE(Captured::reports[0].second.find("size=64 label=t_stashed"), std::string::npos);
  set_error_handler(previous);
  for (size_t i = 1; i < objs.size(); ++i) ObMallocAllocator::free(objs[i]);
  EXPECT_EQ(usage_of("t_stashed").count, 0);
}

// malloc_trim's first step: the calling thread's stashed objects go back to their slabs,
// its heap kept; another thread's slab it held no longer waits on the stash to empty.
TEST_F(ObMallocTest, UnstashingGivesTheThreadsStashedObjectsBackAndKeepsItsHeap) {
  const ObMemAttr attr(TENANT, "t_unstash");
  void* mine = alloc_->alloc(64, attr);  // this thread's heap
  void* theirs = nullptr;
  std::thread([&] { theirs = alloc_->alloc(64, attr); }).join();
  ObjectSet& set = alloc_->get_tenant_ctx_allocator(TENANT, DEFAULT_CTX_ID)->object_set();
  ThreadHeap* heap = set.existing_heap();
  ASSERT_NE(heap, nullptr);
  const int sc = size_class_of(64);
  ObMallocAllocator::free(theirs);
  ASSERT_EQ(heap->stash_count(sc), 1);
  alloc_->unstash_thread_caches();
  EXPECT_EQ(heap->stash_count(sc), 0);
  EXPECT_EQ(set.existing_heap(), heap);
  EXPECT_EQ(usage_of("t_unstash").count, 1);
  ObMallocAllocator::free(mine);
}

TEST_F(ObMallocTest, RandomOperationsAgainstAModel) {
  std::mt19937 rng(5);
  const char* labels[] = {"t_rand_a", "t_rand_b", "t_rand_c"};
  struct Info {
    int64_t size;
    unsigned char fill;
    int label;
  };
  std::map<void*, Info> live;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 5 || live.empty()) {
      const int64_t size = rng() % 500 == 0  ? rng() % (64 * MB)
                           : rng() % 20 == 0 ? rng() % (1 * MB)
                                             : rng() % 2048;
      const int label = static_cast<int>(rng() % 3);
      void* p = rng() % 8 == 0 ? alloc_->alloc_align(int64_t{64} << (rng() % 6), size,
                                                     ObMemAttr(TENANT, labels[label]))
                               : alloc_->alloc(size, ObMemAttr(TENANT, labels[label]));
      ASSERT_NE(p, nullptr);
      const unsigned char fill = static_cast<unsigned char>(rng());
      std::memset(p, fill, static_cast<size_t>(size));
      live[p] = Info{size, fill, label};
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      void* p = it->first;
      const Info info = it->second;
      const unsigned char* c = static_cast<unsigned char*>(p);
      if (info.size > 0) {
        ASSERT_EQ(c[0], info.fill);
        ASSERT_EQ(c[info.size - 1], info.fill);
      }
      live.erase(it);
      if (op < 7) {
        const int64_t size = rng() % 4096;
        void* q = alloc_->realloc(p, size, ObMemAttr(TENANT, labels[info.label]));
        if (size == 0) continue;
        ASSERT_NE(q, nullptr);
        const int64_t keep = std::min(size, info.size);
        const unsigned char* d = static_cast<unsigned char*>(q);
        if (keep > 0) {
          ASSERT_EQ(d[keep - 1], info.fill);
        }
        std::memset(q, info.fill, static_cast<size_t>(size));
        live[q] = Info{size, info.fill, info.label};
      } else {
        ObMallocAllocator::free(p);
      }
    }
    if (step % 1000 == 0) {
      int64_t counts[3] = {};
      for (auto& [p, info] : live) ++counts[info.label];
      for (int l = 0; l < 3; ++l) ASSERT_EQ(usage_of(labels[l]).count, counts[l]) << step;
    }
  }
  for (auto& [p, info] : live) ObMallocAllocator::free(p);
}

TEST_F(ObMallocTest, ManyThreadsPassObjectsAround) {
  constexpr int THREADS = 4;
  std::atomic<void*> mailbox[THREADS] = {};
  std::vector<std::thread> workers;
  for (int t = 0; t < THREADS; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(t);
      const ObMemAttr attr(TENANT, "t_threads", t % 2 == 0 ? DEFAULT_CTX_ID : WORK_AREA);
      std::vector<void*> mine;
      for (int i = 0; i < 20000; ++i) {
        const int64_t size = rng() % 50 == 0 ? 40000 : 1 + rng() % 600;
        void* p = alloc_->alloc(size, attr);
        ASSERT_NE(p, nullptr);
        std::memset(p, t, static_cast<size_t>(size));
        // Hand some objects to a neighbour, free the rest here.
        if (rng() % 2 == 0) p = mailbox[(t + 1) % THREADS].exchange(p);
        if (p != nullptr) mine.push_back(p);
        if (mine.size() > 64) {
          ObMallocAllocator::free(mine.back());
          mine.pop_back();
        }
      }
      for (void* p : mine) ObMallocAllocator::free(p);
    });
  }
  for (auto& w : workers) w.join();
  for (auto& m : mailbox) ObMallocAllocator::free(m.exchange(nullptr));
  // The workers exited: their heaps were handed back; all objects are freed. Their empty
  // slabs wait warm for the next threads until a trim.
  alloc_->flush_thread_caches();
  alloc_->wash_stale_spans(0);
  EXPECT_EQ(ta().hold(), 0);
  EXPECT_EQ(ta(WORK_AREA).hold(), 0);
}

TEST(ObMallocDeathTest, DefaultHandlerAbortsOnDoubleFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        FakeOs os;
        FakeClock clock;
        AChunkMgr mgr(os, clock);
        auto a = std::make_unique<ObMallocAllocator>(mgr);
        void* p = a->alloc(48, ObMemAttr(TENANT, "t_death"));
        ObMallocAllocator::free(p);
        ObMallocAllocator::free(p);
      },
      "achunk: double free of 0x[0-9a-f]+: object is already free \\(size=48 label=t_death\\)");
}

TEST(ObMallocDeathTest, DefaultHandlerAbortsOnTailOverwrite) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        FakeOs os;
        FakeClock clock;
        AChunkMgr mgr(os, clock);
        auto a = std::make_unique<ObMallocAllocator>(mgr);
        char* p = static_cast<char*>(a->alloc(20, ObMemAttr(TENANT, "t_death")));
        std::memset(p, 0, 24);
        ObMallocAllocator::free(p);
      },
      "achunk: heap corruption of 0x[0-9a-f]+: tail canary overwritten \\(size=20 "
      "label=t_death\\)");
}

}  // namespace
}  // namespace achunk::testing

namespace achunk::testing {
namespace {

TEST_F(ObMallocTest, FailedMmapWashesFreeSpansAndTheCacheThenRetries) {
  const ObMemAttr attr(TENANT, "t_wash");
  void* keep = alloc_->alloc(100, attr);  // one chunk with free spans in it
  // A dirty free span of 13 blocks (too short to be washed as it forms) before another.
  void* dirty = alloc_->alloc(100 * 1024, attr);
  void* next = alloc_->alloc(100 * 1024, attr);
  std::memset(dirty, 1, 100 * 1024);
  ObMallocAllocator::free(dirty);
  mgr_.free_chunk(mgr_.alloc_chunk(ACHUNK_SIZE));  // and one cached chunk
  const int64_t released = os_.released_bytes();
  os_.fail_next_maps(2);  // AChunkMgr's own retry fails too
  void* big = alloc_->alloc(3 * MB, attr);
  EXPECT_NE(big, nullptr);  // the retry after the wash succeeded
  EXPECT_GT(os_.released_bytes(), released);
  EXPECT_EQ(mgr_.get_freelist_hold(), 0);
  ObMallocAllocator::free(big);
  ObMallocAllocator::free(next);
  ObMallocAllocator::free(keep);
}

}  // namespace
}  // namespace achunk::testing
