// The freeable allocator (ObAllocator) of a memory context over the process-wide tenant
// directory: reuse of freed objects, and frees of foreign or freed objects refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "achunk/base/alloc_failure.h"
#include "achunk/base/error_report.h"
#include "context/memory_context_fixture.h"

namespace achunk {
namespace {

TEST_F(MemoryContextTest, FreedObjectsAreReusedAndContentsKept) {
  auto ctx = MemoryContext::root().create_child(param("t_reuse"));
  char* a = static_cast<char*>(ctx->allocf(64));
  std::memcpy(a, "hello", 6);
  void* b = ctx->allocf(64);
  EXPECT_STREQ(a, "hello");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 16, 0u);
  EXPECT_TRUE(ctx->free(a).ok());
  EXPECT_EQ(ctx->allocf(60), a);  // same size class
  EXPECT_TRUE(ctx->free(a).ok());
  EXPECT_TRUE(ctx->free(b).ok());
  EXPECT_TRUE(ctx->destroy().ok());
}

// A size no object can have is refused with its reason, on the slow path and once the
// context's free lists and current page are warm (the inline path compares unsigned).
TEST_F(MemoryContextTest, ImpossibleSizesAreRefusedColdAndWarm) {
  auto ctx = MemoryContext::root().create_child(param("t_refuse"));
  for (const char* when : {"cold", "warm"}) {
    for (const int64_t size : {int64_t{-1}, INT64_MIN, INT64_MAX}) {
      EXPECT_EQ(ctx->allocf(size), nullptr) << when << " " << size;
      EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE) << when << " " << size;
    }
    void* a = ctx->allocf(64);
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(ctx->free(a).ok());  // on the free list for the warm round
    void* b = ctx->allocf(64);
    EXPECT_EQ(b, a) << when;
    EXPECT_TRUE(ctx->free(b).ok());
  }
  EXPECT_TRUE(ctx->destroy().ok());
}

TEST_F(MemoryContextTest, ForeignAndDoubleFreesAreRefused) {
  ErrorHandler prev = set_error_handler([](ErrorKind, const void*, const char*) {});
  auto a = MemoryContext::root().create_child(param("t_fa"));
  auto b = MemoryContext::root().create_child(param("t_fb"));
  void* p = a->allocf(32);
  EXPECT_FALSE(b->free(p).ok());  // not b's
  EXPECT_TRUE(a->free(p).ok());
  EXPECT_FALSE(a->free(p).ok());  // double free
  EXPECT_TRUE(a->destroy().ok());
  EXPECT_TRUE(b->destroy().ok());
  set_error_handler(prev);
}

}  // namespace
}  // namespace achunk
