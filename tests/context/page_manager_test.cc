// The thread page manager's page cache and a context's growing pages: pages of a
// destroyed use_pm context serve the next one without the block set, the cache is
// bounded, and a thread's exit gives cached pages back with everything else. Each test
// runs on a thread of its own, so it starts with a fresh page manager.
#include "context/page_manager.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "context/memory_context.h"
#include "global/global.h"

namespace achunk {
namespace {

constexpr int CTX = WORK_AREA;

int64_t ctx_hold() {
  return global_malloc_allocator().get_tenant_ctx_allocator(OB_SERVER_TENANT_ID, CTX)->hold();
}

ContextParam pm_param() {
  ContextParam p;
  p.set_mem_attr(OB_SERVER_TENANT_ID, "t_pm_cache", CTX).set_properties(USE_TL_PAGE_OPTIONAL);
  return p;
}

// Allocates 2000-byte objects (2560-byte slots) until one lands on page `pages` + 1
// (that one is freed, its page stays); returns the others in allocation order.
std::vector<void*> fill_pages(const MemoryContext& ctx, int pages) {
  std::vector<void*> out;
  int seen = 0;
  ABlock* last = nullptr;
  for (;;) {
    void* p = ctx.allocf(2000);
    ABlock* block = BlockSet::ptr2block(p);
    if (block != last) {
      if (seen == pages) {
        EXPECT_TRUE(ctx.free(p).ok());
        return out;
      }
      ++seen;
      last = block;
    }
    out.push_back(p);
  }
}

void quiet_leaks(const LeakReport&) {}

class PageManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = set_leak_handler(&quiet_leaks);
    start_hold_ = ctx_hold();
  }
  void TearDown() override { set_leak_handler(previous_); }
  // Runs `body` on a thread of its own (a fresh page manager, handed back at its exit),
  // then checks that the ctx holds what it held before.
  template <typename F>
  void on_own_thread(F body) {
    std::thread t(body);
    t.join();
    EXPECT_EQ(ctx_hold(), start_hold_);
  }
  LeakHandler previous_ = nullptr;
  int64_t start_hold_ = 0;
};

TEST_F(PageManagerTest, PagesGrowFromThePageSizeTo64KiB) {
  on_own_thread([] {
    for (int round = 0; round < 2; ++round) {  // the second context starts small again
      auto ctx = MemoryContext::create_detached(pm_param());
      ASSERT_TRUE(ctx.ok());
      const std::vector<void*> objects = fill_pages(*ctx, 6);
      std::vector<int64_t> sizes;
      ABlock* last = nullptr;
      for (void* p : objects) {
        ABlock* block = BlockSet::ptr2block(p);
        if (block != last) sizes.push_back(BlockSet::span_bytes(block));
        last = block;
      }
      const std::vector<int64_t> want = {8192, 16384, 32768, 65536, 65536, 65536};
      EXPECT_EQ(sizes, want);
      ASSERT_TRUE(ctx->destroy().ok());
    }
  });
}

TEST_F(PageManagerTest, PagesOfADestroyedContextServeTheNext) {
  on_own_thread([] {
    auto first = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(first.ok());
    const std::vector<void*> objects = fill_pages(*first, 3);  // 8 + 16 + 32 (+ 64) KiB
    ObPageManager* pm = ObPageManager::current();
    ASSERT_NE(pm, nullptr);
    EXPECT_EQ(pm->used(), 15 * ABLOCK_SIZE);
    ASSERT_TRUE(first->destroy().ok());
    EXPECT_EQ(pm->cached_pages(), 4);
    EXPECT_EQ(pm->cached_blocks(), 15);
    EXPECT_EQ(pm->used(), 0);

    auto second = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(second.ok());
    void* p = second->allocf(2000);
    // Its first page is the first context's first page, from the cache.
    EXPECT_EQ(BlockSet::ptr2block(p), BlockSet::ptr2block(objects.front()));
    EXPECT_EQ(pm->cached_pages(), 3);
    EXPECT_EQ(pm->cached_blocks(), 14);
    EXPECT_EQ(pm->used(), ABLOCK_SIZE);
    ASSERT_TRUE(second->destroy().ok());
  });
}

TEST_F(PageManagerTest, TheCacheIsBoundedAndTheRestGoesBackToTheBlockSet) {
  on_own_thread([] {
    auto ctx = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(ctx.ok());
    fill_pages(*ctx, 12);  // 1 + 2 + 4 + 8 x 9 blocks: more than the cache takes
    ObPageManager* pm = ObPageManager::current();
    ASSERT_TRUE(ctx->destroy().ok());
    EXPECT_LE(pm->cached_blocks(), ObPageManager::PAGE_CACHE_BLOCKS);
    EXPECT_GT(pm->cached_blocks(), ObPageManager::PAGE_CACHE_BLOCKS - 8);
    EXPECT_LE(pm->cached_pages(), ObPageManager::PAGE_CACHE);
    EXPECT_EQ(pm->used(), 0);
  });
}

TEST_F(PageManagerTest, BigPagesAreNotCached) {
  on_own_thread([] {
    auto ctx = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(ctx.ok());
    void* big = ctx->allocf(100000);  // a multi-block page of its own
    ASSERT_NE(big, nullptr);
    ObPageManager* pm = ObPageManager::current();
    ASSERT_TRUE(ctx->free(big).ok());
    EXPECT_EQ(pm->cached_pages(), 0);
    ASSERT_TRUE(ctx->destroy().ok());
  });
}

}  // namespace
}  // namespace achunk
