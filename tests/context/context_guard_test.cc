// WITH_CONTEXT and CREATE_WITH_TEMP_CONTEXT: the current context inside the scope, the
// previous one after it, and a temporary context destroyed (with its leak report) at exit.
#include <gtest/gtest.h>

#include "context/context_guard.h"
#include "context/memory_context_fixture.h"

namespace achunk {
namespace {

TEST_F(MemoryContextTest, WithContextAndTempContext) {
  auto ctx = MemoryContext::root().create_child(param("t_with"));
  EXPECT_EQ(CURRENT_CONTEXT, MemoryContext::root());
  WITH_CONTEXT(*ctx) {
    EXPECT_EQ(CURRENT_CONTEXT, *ctx);
    MemoryContext inner;
    CREATE_WITH_TEMP_CONTEXT(param("t_temp")) {
      inner = CURRENT_CONTEXT;
      EXPECT_STREQ(inner.label(), "t_temp");
      EXPECT_NE(inner.allocf(100), nullptr);  // a leak the destroy reports
    }
    EXPECT_FALSE(inner.check().ok());  // destroyed at scope exit
    EXPECT_EQ(CURRENT_CONTEXT, *ctx);
  }
  EXPECT_EQ(CURRENT_CONTEXT, MemoryContext::root());
  EXPECT_EQ(Leaks::reports.size(), 1u);
  EXPECT_TRUE(ctx->destroy().ok());
}

}  // namespace
}  // namespace achunk
