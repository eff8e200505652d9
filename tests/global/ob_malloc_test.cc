// ob_malloc and friends over the process-wide tenant directory: charging the attr's
// (tenant, ctx), the limits set through the API and their reasons, realloc, alignment,
// and the usage print. Tenants 3001 and 3002 are used by these tests only.
#include "global/ob_malloc.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "achunk/base/alloc_failure.h"
#include "global/global.h"

namespace achunk {
namespace {

constexpr uint64_t TENANT = 3001;
constexpr int64_t MB = int64_t{1} << 20;

int64_t ctx_hold(uint64_t tenant, int ctx) {
  ObTenantCtxAllocator* ta = global_malloc_allocator().get_tenant_ctx_allocator(tenant, ctx);
  return ta != nullptr ? ta->hold() : 0;
}

TEST(ObMallocApiTest, AllocationsAreChargedToTheAttrsTenantCtx) {
  const ObMemAttr attr(TENANT, "t_obm_charge", EXECUTE_CTX_ID);
  const int64_t before = ctx_hold(TENANT, EXECUTE_CTX_ID);
  const int64_t other = ctx_hold(TENANT, DEFAULT_CTX_ID);
  void* p = ob_malloc(3 * MB, attr);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 3 * MB);
  EXPECT_GE(ctx_hold(TENANT, EXECUTE_CTX_ID) - before, 3 * MB);
  EXPECT_EQ(ctx_hold(TENANT, DEFAULT_CTX_ID), other);  // only the attr's ctx is charged
  ob_free(p);
  EXPECT_EQ(ctx_hold(TENANT, EXECUTE_CTX_ID), before);
  ob_free(nullptr);
}

// The refusals, asked of a thread that never allocated and again once it has (its hit
// warm: ctest runs each test in a fresh process, whose first call takes the slow path).
void expect_ob_refusals(const ObMemAttr& attr, const char* when) {
  for (const int64_t size : {int64_t{-1}, INT64_MIN, INT64_MAX, OBJECT_MAX_SIZE + 1}) {
    EXPECT_EQ(ob_malloc(size, attr), nullptr) << when << " " << size;
    EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE) << when << " " << size;
  }
  for (const int64_t align : {int64_t{-64}, INT64_MIN, int64_t{48}, int64_t{1} << 62}) {
    EXPECT_EQ(ob_malloc_align(align, 16, attr), nullptr) << when << " " << align;
    EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_ARGUMENT) << when << " " << align;
  }
  EXPECT_EQ(ob_malloc_align(64, -1, attr), nullptr) << when;
  void* p = ob_malloc(100, attr);
  ASSERT_NE(p, nullptr) << when;
  std::memcpy(p, "kept", 5);
  EXPECT_EQ(ob_realloc(p, -1, attr), nullptr) << when;
  EXPECT_STREQ(static_cast<char*>(p), "kept") << when;  // untouched
  ob_free(p);
}

TEST(ObMallocApiTest, RefusalsHoldColdAndOnTheWarmHit) {
  std::thread([] {
    const ObMemAttr attr(TENANT, "t_obm_refuse");
    expect_ob_refusals(attr, "cold");
    for (int64_t size : {16, 100, 4000}) ob_free(ob_malloc(size, attr));
    ob_free(ob_malloc_align(64, 100, attr));
    expect_ob_refusals(attr, "warm");
  }).join();
}

TEST(ObMallocApiTest, CtxLimitSetThroughTheApiRefusesWithItsReason) {
  const ObMemAttr attr(TENANT, "t_obm_ctx_limit", PLAN_CACHE_CTX_ID);
  ASSERT_TRUE(ob_set_tenant_ctx_limit(TENANT, PLAN_CACHE_CTX_ID, 4 * MB));
  EXPECT_EQ(ob_malloc(8 * MB, attr), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::CTX_LIMIT);
  EXPECT_EQ(last_alloc_failure().limit, 4 * MB);
  void* p = ob_malloc(MB, attr);
  EXPECT_NE(p, nullptr);
  ob_free(p);
  ASSERT_TRUE(ob_set_tenant_ctx_limit(TENANT, PLAN_CACHE_CTX_ID, 0));
  p = ob_malloc(8 * MB, attr);
  EXPECT_NE(p, nullptr);
  ob_free(p);
  EXPECT_FALSE(ob_set_tenant_ctx_limit(TENANT, MAX_CTX_ID, MB));
}

TEST(ObMallocApiTest, TenantLimitSetThroughTheApiRefusesWithItsReason) {
  const uint64_t tenant = 3002;
  ASSERT_TRUE(ob_set_tenant_limit(tenant, 4 * MB));
  EXPECT_EQ(ob_malloc(8 * MB, ObMemAttr(tenant, "t_obm_tenant")), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::TENANT_LIMIT);
  EXPECT_EQ(last_alloc_failure().limit, 4 * MB);
  ASSERT_TRUE(ob_set_tenant_limit(tenant, 0));
  void* p = ob_malloc(8 * MB, ObMemAttr(tenant, "t_obm_tenant"));
  EXPECT_NE(p, nullptr);
  ob_free(p);
}

TEST(ObMallocApiTest, ReallocKeepsContentsAndAlignIsHonoured) {
  const ObMemAttr attr(TENANT, "t_obm_realloc");
  char* p = static_cast<char*>(ob_malloc(100, attr));
  ASSERT_NE(p, nullptr);
  std::memcpy(p, "achunk", 7);
  p = static_cast<char*>(ob_realloc(p, 100000, attr));
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(p, "achunk");
  ob_free(p);
  void* a = ob_malloc_align(4096, 100, attr);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 4096, 0u);
  ob_free(a);
}

TEST(ObMallocApiTest, UsagePrintListsTheLabelInTextAndJson) {
  void* p = ob_malloc(200, ObMemAttr(TENANT, "t_obm_usage"));
  ASSERT_NE(p, nullptr);
  static char buf[1 << 16];
  ob_print_usage(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find("mod=t_obm_usage"), std::string::npos);
  ob_print_usage(buf, sizeof(buf), true);
  EXPECT_NE(std::string(buf).find("\"t_obm_usage\""), std::string::npos);
  ob_free(p);
  ob_flush_thread_caches();
}

}  // namespace
}  // namespace achunk
