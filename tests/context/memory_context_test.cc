// Memory contexts on the process-wide allocator: the tree, accounting, arena, leak
// reports, stale handles, use_pm and its thread rules, scope guards, concurrency.
#include "context/memory_context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "achunk/base/alloc_failure.h"
#include "achunk/base/error_report.h"
#include "context/context_guard.h"
#include "context/memory_context_fixture.h"
#include "context/page_manager.h"
#include "global/global.h"

namespace achunk {
namespace {

TEST_F(MemoryContextTest, TreeCreateDestroyInEveryOrder) {
  MemoryContext root = MemoryContext::root();
  ASSERT_TRUE(root.check().ok());
  auto a = root.create_child(param("t_a"));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = a->create_child(param("t_b"));
  auto c = a->create_child(param("t_c"));
  auto d = b->create_child(param("t_d"));
  ASSERT_TRUE(b.ok() && c.ok() && d.ok());
  for (auto* ctx : {&*a, &*b, &*c, &*d}) ASSERT_NE(ctx->allocf(100), nullptr);
  // A leaf first, then a middle node (takes its child along), then the top.
  EXPECT_TRUE(c->destroy().ok());
  EXPECT_TRUE(b->destroy().ok());
  EXPECT_FALSE(d->check().ok());  // destroyed with its parent
  EXPECT_TRUE(a->destroy().ok());
  EXPECT_EQ(ctx_hold(), start_hold_);
  EXPECT_EQ(Leaks::reports.size(), 4u);  // each context left its object behind
}

TEST_F(MemoryContextTest, SubtreeHoldAndDestroyReturnsEverything) {
  auto top = MemoryContext::root().create_child(param("t_top"));
  auto kid = top->create_child(param("t_kid"));
  void* p = top->allocf(1000);
  void* q = kid->allocf(50000);  // a page of its own
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_GT(top->hold(), 0);
  EXPECT_GE(kid->hold(), 50000);
  EXPECT_EQ(top->tree_hold(), top->hold() + kid->hold());
  EXPECT_EQ(top->used(), 1000);
  EXPECT_TRUE(kid->free(q).ok());
  EXPECT_EQ(kid->used(), 0);
  EXPECT_TRUE(top->free(p).ok());
  EXPECT_TRUE(top->destroy().ok());
  EXPECT_TRUE(Leaks::reports.empty());
  EXPECT_EQ(ctx_hold(), start_hold_);
}

TEST_F(MemoryContextTest, LeakReportNamesLabelCountBytesAndSite) {
  auto ctx = MemoryContext::root().create_child(param("t_leaky"));
  const int line = __LINE__ - 1;
  ctx->allocf(10, "LeakA");
  ctx->allocf(20, "LeakA");
  ctx->allocf(300, "LeakB");
  EXPECT_TRUE(ctx->destroy().ok());
  ASSERT_EQ(Leaks::reports.size(), 2u);
  for (const LeakReport& r : Leaks::reports) {
    EXPECT_STREQ(r.context_label, "t_leaky");
    EXPECT_NE(std::string(r.file).find("memory_context_test.cc"), std::string::npos);
    EXPECT_EQ(r.line, line);
    if (std::string(r.label) == "LeakA") {
      EXPECT_EQ(r.count, 2);
      EXPECT_EQ(r.bytes, 30);
    } else {
      EXPECT_STREQ(r.label, "LeakB");
      EXPECT_EQ(r.count, 1);
      EXPECT_EQ(r.bytes, 300);
    }
  }
  EXPECT_EQ(ctx_hold(), start_hold_);  // everything freed anyway
}

TEST_F(MemoryContextTest, StaleHandleIsRefused) {
  auto ctx = MemoryContext::root().create_child(param("t_stale"));
  MemoryContext copy = *ctx;
  EXPECT_TRUE(ctx->destroy().ok());
  EXPECT_EQ(copy.check().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(copy.allocf(10), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_ARGUMENT);
  EXPECT_FALSE(copy.destroy().ok());
  EXPECT_FALSE(copy.create_child(param("t_x")).ok());
  // A new context in the same slot does not revive the old handle.
  auto again = MemoryContext::root().create_child(param("t_stale2"));
  EXPECT_FALSE(copy.check().ok());
  EXPECT_TRUE(again->destroy().ok());
  EXPECT_FALSE(MemoryContext().check().ok());
  EXPECT_FALSE(MemoryContext::root().destroy().ok());
}

TEST_F(MemoryContextTest, InvalidParametersAreInvalidArgument) {
  MemoryContext root = MemoryContext::root();
  ContextParam p = param("t_bad");
  EXPECT_EQ(root.create_child(ContextParam(p).set_page_size(10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root.create_child(ContextParam(p).set_label("")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root.create_child(ContextParam(p).set_mem_attr(500, "x", MAX_CTX_ID)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root.create_child(ContextParam(p).set_properties(1 << 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(MemoryContextTest, UsePmContextUsesTheThreadsPageManager) {
  std::thread t([&] {
    auto ctx = MemoryContext::root().create_child(param("t_pm", USE_TL_PAGE_OPTIONAL));
    ASSERT_TRUE(ctx.ok());
    EXPECT_TRUE(ctx->uses_pm());
    ASSERT_NE(ObPageManager::current(), nullptr);
    void* p = ctx->allocf(100);
    ASSERT_NE(p, nullptr);
    EXPECT_GT(ObPageManager::current()->used(), 0);
    EXPECT_TRUE(ctx->free(p).ok());
    EXPECT_TRUE(ctx->destroy().ok());
    EXPECT_EQ(ObPageManager::current()->used(), 0);
  });
  t.join();  // the thread's page manager gave everything back at exit
  EXPECT_EQ(ctx_hold(), start_hold_);
}

TEST_F(MemoryContextTest, UsePmContextRefusesOtherThreads) {
  ErrorHandler prev = set_error_handler([](ErrorKind, const void*, const char*) {});
  auto ctx = MemoryContext::root().create_child(param("t_pm_x", USE_TL_PAGE_OPTIONAL));
  ASSERT_TRUE(ctx->uses_pm());
  void* p = ctx->allocf(100);
  std::thread t([&] {
    EXPECT_EQ(ctx->allocf(10), nullptr);
    EXPECT_EQ(ctx->free(p).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(ctx->destroy().code(), absl::StatusCode::kFailedPrecondition);
  });
  t.join();
  EXPECT_TRUE(ctx->free(p).ok());
  EXPECT_TRUE(ctx->destroy().ok());
  set_error_handler(prev);
}

TEST_F(MemoryContextTest, ThreadSafeAllocAndChildren) {
  auto shared = MemoryContext::root().create_child(
      param("t_shared", ALLOC_THREAD_SAFE | ADD_CHILD_THREAD_SAFE));
  ASSERT_TRUE(shared.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<void*> mine;
      for (int i = 0; i < 2000; ++i) {
        void* p = shared->allocf(16 + (i * 7 + t) % 500);
        if (p == nullptr) ++failures;
        mine.push_back(p);
        if (i % 3 == 0 && !shared->free(mine[i / 2]).ok()) ++failures;
        if (i % 3 == 0) mine[i / 2] = nullptr;
        if (i % 100 == 0) {
          auto child = shared->create_child(param("t_child"));
          void* obj = child.ok() ? child->allocf(64) : nullptr;
          if (obj == nullptr || !child->free(obj).ok() || !child->destroy().ok()) ++failures;
        }
        if (i % 50 == 0 && shared->allocp(100) == nullptr) ++failures;
      }
      for (void* p : mine) {
        if (p != nullptr && !shared->free(p).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(shared->used(), 4 * 40 * 100);  // every object freed: only the arena's bytes
  EXPECT_TRUE(shared->destroy().ok());
  EXPECT_EQ(ctx_hold(), start_hold_);
}

}  // namespace
}  // namespace achunk
