// ObTenantCtxAllocator over the fake chunk manager: every chunk charged to the ctx and
// its tenant, limits that nest (server >= tenant >= ctx), and refusals with the reason
// of the limit that was hit, leaving every hold as it was.
#include "alloc/object/tenant_ctx_allocator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include "achunk/base/alloc_failure.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class TenantCtxAllocatorTest : public ChunkMgrTest {
 protected:
  void TearDown() override { EXPECT_EQ(mgr_.get_used(), 0); }
  // A chunk of exactly 2 MiB held.
  AChunk* take(ObTenantCtxAllocator& a) { return a.alloc_chunk(payload_for_mb(2), 0); }

  std::atomic<int64_t> idle_{-1};
  ObTenantMemory tenant_{1001};
  ObTenantCtxAllocator ctx_a_{mgr_, tenant_, 0, idle_};
  ObTenantCtxAllocator ctx_b_{mgr_, tenant_, 1, idle_};
};

TEST_F(TenantCtxAllocatorTest, ChunksAreChargedToTheCtxAndTheTenant) {
  AChunk* c = take(ctx_a_);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(ctx_a_.hold(), 2 * MB);
  EXPECT_EQ(ctx_b_.hold(), 0);
  EXPECT_EQ(tenant_.hold(), 2 * MB);
  AChunk* d = take(ctx_b_);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(tenant_.hold(), 4 * MB);
  ctx_a_.free_chunk(c);
  EXPECT_EQ(ctx_a_.hold(), 0);
  EXPECT_EQ(tenant_.hold(), 2 * MB);
  ctx_b_.free_chunk(d);
  EXPECT_EQ(tenant_.hold(), 0);
}

TEST_F(TenantCtxAllocatorTest, CtxLimitRefusesWithItsReason) {
  ctx_a_.set_limit(2 * MB);
  AChunk* c = take(ctx_a_);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(take(ctx_a_), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::CTX_LIMIT);
  EXPECT_EQ(last_alloc_failure().hold, 2 * MB);
  EXPECT_EQ(last_alloc_failure().limit, 2 * MB);
  EXPECT_EQ(ctx_a_.hold(), 2 * MB);
  EXPECT_EQ(tenant_.hold(), 2 * MB);
  AChunk* d = take(ctx_b_);  // the other ctx of the tenant is not bound by it
  EXPECT_NE(d, nullptr);
  ctx_b_.free_chunk(d);
  ctx_a_.free_chunk(c);
  ctx_a_.set_limit(0);  // no limit
  EXPECT_EQ(ctx_a_.limit(), INT64_MAX);
}

TEST_F(TenantCtxAllocatorTest, TenantLimitBindsAllItsCtxsAndUnchargesTheCtx) {
  tenant_.set_limit(4 * MB);
  AChunk* c = take(ctx_a_);
  AChunk* d = take(ctx_b_);
  ASSERT_NE(c, nullptr);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(take(ctx_a_), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::TENANT_LIMIT);
  EXPECT_EQ(last_alloc_failure().hold, 4 * MB);
  EXPECT_EQ(last_alloc_failure().limit, 4 * MB);
  EXPECT_EQ(ctx_a_.hold(), 2 * MB);  // the ctx charge of the refused chunk was undone
  EXPECT_EQ(tenant_.hold(), 4 * MB);
  ctx_b_.free_chunk(d);
  AChunk* e = take(ctx_a_);
  EXPECT_NE(e, nullptr);
  ctx_a_.free_chunk(e);
  ctx_a_.free_chunk(c);
}

TEST_F(TenantCtxAllocatorTest, ServerLimitRefusalUnchargesCtxAndTenant) {
  mgr_.set_memory_limit(2 * MB);
  AChunk* c = take(ctx_a_);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(take(ctx_b_), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::SERVER_LIMIT);
  EXPECT_EQ(ctx_b_.hold(), 0);
  EXPECT_EQ(tenant_.hold(), 2 * MB);
  ctx_a_.free_chunk(c);
  mgr_.set_memory_limit(0);
}

TEST_F(TenantCtxAllocatorTest, BadSizesAreRefusedWithoutACharge) {
  EXPECT_EQ(ctx_a_.alloc_chunk(0, 0), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE);
  EXPECT_EQ(ctx_a_.alloc_chunk(ACHUNK_MAX_ALLOC_SIZE + 1, 0), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE);
  EXPECT_EQ(ctx_a_.hold(), 0);
  EXPECT_EQ(tenant_.hold(), 0);
}

TEST(TryChargeTest, ChargesUpToTheLimitAndNotBeyond) {
  std::atomic<int64_t> hold{0};
  EXPECT_TRUE(try_charge(hold, 6, 10));
  EXPECT_FALSE(try_charge(hold, 5, 10));
  EXPECT_EQ(hold.load(), 6);
  EXPECT_TRUE(try_charge(hold, 4, 10));
  EXPECT_EQ(hold.load(), 10);
  EXPECT_FALSE(try_charge(hold, 1, 10));
  EXPECT_EQ(hold.load(), 10);
  ObTenantMemory t(7);
  t.set_limit(3);
  EXPECT_TRUE(t.try_charge(3));
  EXPECT_FALSE(t.try_charge(1));
  t.uncharge(3);
  EXPECT_EQ(t.hold(), 0);
  t.set_limit(-1);
  EXPECT_EQ(t.limit(), INT64_MAX);
}

}  // namespace
}  // namespace achunk::testing
