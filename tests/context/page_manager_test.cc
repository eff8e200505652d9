// The thread page manager's page cache: pages of a destroyed use_pm context serve the
// next one without the block set, the page touched last comes back first, the cache is
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

// Fills `pages` pages of a context with objects (each 2000-byte object takes a 2560-byte
// slot, three to a page); returns the objects in allocation order.
std::vector<void*> fill_pages(const MemoryContext& ctx, int pages) {
  std::vector<void*> out;
  for (int i = 0; i < pages * 3; ++i) out.push_back(ctx.allocf(2000));
  return out;
}

void quiet_leaks(const LeakReport&) {}

class PageManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = set_leak_handler(&quiet_leaks);
    start_hold_ = ctx_hold();
  }
  void TearDown() override { set_leak_handler(previous_); }
  LeakHandler previous_ = nullptr;
  int64_t start_hold_ = 0;
};

TEST_F(PageManagerTest, PagesOfADestroyedContextServeTheNextNewestFirst) {
  std::thread t([] {
    auto first = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(first.ok());
    const std::vector<void*> objects = fill_pages(*first, 3);
    ObPageManager* pm = ObPageManager::current();
    ASSERT_NE(pm, nullptr);
    const int64_t used = pm->used();
    EXPECT_EQ(used, 3 * ABLOCK_SIZE);
    ASSERT_TRUE(first->destroy().ok());
    EXPECT_EQ(pm->cached_pages(), 3);
    EXPECT_EQ(pm->used(), 0);

    auto second = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(second.ok());
    void* p = second->allocf(2000);
    // The first context's last page (where its last object lives) comes back first.
    EXPECT_EQ(BlockSet::ptr2block(p), BlockSet::ptr2block(objects.back()));
    EXPECT_EQ(pm->cached_pages(), 2);
    EXPECT_EQ(pm->used(), ABLOCK_SIZE);
    ASSERT_TRUE(second->destroy().ok());
  });
  t.join();
  EXPECT_EQ(ctx_hold(), start_hold_);
}

TEST_F(PageManagerTest, TheCacheIsBoundedAndTheRestGoesBackToTheBlockSet) {
  std::thread t([] {
    auto ctx = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(ctx.ok());
    fill_pages(*ctx, ObPageManager::PAGE_CACHE + 8);
    ObPageManager* pm = ObPageManager::current();
    ASSERT_TRUE(ctx->destroy().ok());
    EXPECT_EQ(pm->cached_pages(), ObPageManager::PAGE_CACHE);
    EXPECT_EQ(pm->used(), 0);
  });
  t.join();
  EXPECT_EQ(ctx_hold(), start_hold_);
}

TEST_F(PageManagerTest, BigPagesAreNotCached) {
  std::thread t([] {
    auto ctx = MemoryContext::create_detached(pm_param());
    ASSERT_TRUE(ctx.ok());
    void* big = ctx->allocf(100000);  // a multi-block page of its own
    ASSERT_NE(big, nullptr);
    ObPageManager* pm = ObPageManager::current();
    ASSERT_TRUE(ctx->free(big).ok());
    EXPECT_EQ(pm->cached_pages(), 0);
    ASSERT_TRUE(ctx->destroy().ok());
  });
  t.join();
  EXPECT_EQ(ctx_hold(), start_hold_);
}

}  // namespace
}  // namespace achunk
