// The arena (ObArenaAllocator) of a memory context over the process-wide tenant directory:
// reuse keeps one page, destroy gives every page back.
#include <gtest/gtest.h>

#include "context/memory_context_fixture.h"

namespace achunk {
namespace {

TEST_F(MemoryContextTest, ArenaReuseKeepsOnePageAndDestroyFreesIt) {
  auto ctx = MemoryContext::root().create_child(param("t_arena"));
  for (int i = 0; i < 100; ++i) ASSERT_NE(ctx->allocp(1000), nullptr);  // several pages
  const int64_t many = ctx->hold();
  EXPECT_GT(many, 3 * DEFAULT_CONTEXT_PAGE_SIZE);
  EXPECT_TRUE(ctx->reuse_arena().ok());
  EXPECT_EQ(ctx->hold(), DEFAULT_CONTEXT_PAGE_SIZE);
  EXPECT_EQ(ctx->used(), 0);
  void* p = ctx->allocp(10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
  EXPECT_TRUE(ctx->destroy().ok());
  EXPECT_EQ(ctx_hold(), start_hold_);
}

}  // namespace
}  // namespace achunk
