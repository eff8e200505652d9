// A parallel context's freeable allocator: threads spread over the ways, a free finds
// the way that owns the object from any thread, counters and label scans add up over
// the ways, and everything goes back when it is destroyed. Runs under TSan too.
#include "context/parallel_allocator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "achunk/base/error_report.h"
#include "alloc/object/label.h"
#include "context/memory_context.h"
#include "global/global.h"

namespace achunk {
namespace {

ObTenantCtxAllocator& work_area() {
  return *global_malloc_allocator().get_tenant_ctx_allocator(OB_SERVER_TENANT_ID, WORK_AREA);
}

TEST(ParallelAllocatorTest, ThreadsSpreadOverWaysAndFreesFindTheirWay) {
  const int64_t start_hold = work_area().hold();
  SharedBlockSource source(work_area().object_set());
  const uint16_t label = label_id("t_parallel");
  {
    ObParallelAllocator a(source, 8192, true, 4);
    ASSERT_EQ(a.ways(), 4);
    constexpr int THREADS = 4;
    constexpr int PER_THREAD = 400;
    std::vector<void*> objects[THREADS];
    std::vector<std::thread> threads;
    for (int t = 0; t < THREADS; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < PER_THREAD; ++i) {
          const int64_t size = 16 + (i * 37) % 600;
          void* p = a.alloc(size, label);
          ASSERT_NE(p, nullptr);
          std::memset(p, t + 1, static_cast<size_t>(size));
          objects[t].push_back(p);
        }
      });
    }
    for (std::thread& th : threads) th.join();
    std::set<ObAllocator*> owners;
    for (auto& list : objects) {
      for (void* p : list) owners.insert(ObAllocator::owner_of(p));
    }
    // Four new threads start on four ways and only move to a free one: they cannot all
    // have ended up on one.
    EXPECT_GE(owners.size(), 2u);
    EXPECT_LE(owners.size(), 4u);
    EXPECT_EQ(a.live_count(), THREADS * PER_THREAD);
    EXPECT_EQ(a.single_label(), label);

    // Every thread frees the objects of the next one (another way's), all but 1 in 5.
    threads.clear();
    for (int t = 0; t < THREADS; ++t) {
      threads.emplace_back([&, t] {
        const int victim = (t + 1) % THREADS;
        for (size_t i = 0; i < objects[victim].size(); ++i) {
          if (i % 5 == 0) continue;
          auto* bytes = static_cast<unsigned char*>(objects[victim][i]);
          EXPECT_EQ(bytes[0], victim + 1);
          EXPECT_TRUE(a.free(objects[victim][i]));
        }
      });
    }
    for (std::thread& th : threads) th.join();
    int64_t used = 0;
    for (int t = 0; t < THREADS; ++t) {
      for (int i = 0; i < PER_THREAD; i += 5) used += 16 + (i * 37) % 600;
    }
    EXPECT_EQ(a.live_count(), THREADS * PER_THREAD / 5);
    EXPECT_EQ(a.used(), used);
    LabelUsage labels[8];
    LabelUsage total;
    ASSERT_EQ(a.scan_usage(labels, 8, &total), 1);
    EXPECT_EQ(labels[0].label, label);
    EXPECT_EQ(labels[0].count, THREADS * PER_THREAD / 5);
    EXPECT_EQ(total.used, used);
    EXPECT_GT(a.hold(), 0);
  }  // the rest goes with the allocator
  EXPECT_EQ(work_area().hold(), start_hold);
}

TEST(ParallelAllocatorTest, AForeignPointerIsRefusedAndNothingChanges) {
  SharedBlockSource source(work_area().object_set());
  ObParallelAllocator a(source, 8192, true, 2);
  ObParallelAllocator b(source, 8192, true, 2);
  void* mine = a.alloc(64, 0);
  void* theirs = b.alloc(64, 0);
  int reports = 0;
  static int* counter;
  counter = &reports;
  const ErrorHandler previous =
      set_error_handler([](ErrorKind, const void*, const char*) { ++*counter; });
  EXPECT_FALSE(a.free(theirs));
  EXPECT_EQ(reports, 1);
  set_error_handler(previous);
  EXPECT_EQ(b.live_count(), 1);
  EXPECT_TRUE(a.free(mine));
  EXPECT_TRUE(b.free(theirs));
}

TEST(ParallelAllocatorTest, OneWayWithoutThreadSafety) {
  SharedBlockSource source(work_area().object_set());
  ObParallelAllocator a(source, 8192, false, 8);
  EXPECT_EQ(a.ways(), 1);
  ObParallelAllocator b(source, 8192, true, 64);
  EXPECT_EQ(b.ways(), ObParallelAllocator::MAX_WAYS);
}

TEST(ParallelAllocatorTest, AParallelContextCountsAndReportsOverAllWays) {
  static std::vector<LeakReport> reports;
  reports.clear();
  const LeakHandler previous = set_leak_handler([](const LeakReport& r) { reports.push_back(r); });
  const int64_t start_hold = work_area().hold();
  ContextParam param;
  param.set_mem_attr(OB_SERVER_TENANT_ID, "t_par_ctx", WORK_AREA)
      .set_properties(ALLOC_THREAD_SAFE)
      .set_parallel(3);
  auto ctx = MemoryContext::root().create_child(param);
  ASSERT_TRUE(ctx.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) ASSERT_NE(ctx->allocf(100), nullptr);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(ctx->used(), 300 * 100);
  EXPECT_TRUE(ctx->destroy().ok());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].count, 300);
  EXPECT_EQ(reports[0].bytes, 300 * 100);
  EXPECT_EQ(work_area().hold(), start_hold);
  set_leak_handler(previous);
}

}  // namespace
}  // namespace achunk
