// Test support for the object layer: ObMallocTest, an ObMallocAllocator over the fake
// chunk manager, shared by the allocator's tests and the usage print's tests.
// Depends on malloc_allocator.h, label.h, the base layer's error_report.h and
// support/chunk_mgr_fixture.h.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "achunk/base/error_report.h"
#include "alloc/object/label.h"
#include "alloc/object/malloc_allocator.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {

inline std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

inline constexpr uint64_t TENANT = 1001;

// An error handler that keeps every report (kind and message) instead of aborting.
struct Captured {
  static inline std::vector<std::pair<ErrorKind, std::string>> reports;
  static void handler(ErrorKind kind, const void*, const char* message) {
    reports.emplace_back(kind, message);
  }
};

class ObMallocTest : public ChunkMgrTest {
 protected:
  void TearDown() override {
    alloc_->flush_thread_caches();
    EXPECT_EQ(mgr_.get_used(), 0) << "objects or slabs were left behind";
  }
  ObTenantCtxAllocator& ta(int ctx = DEFAULT_CTX_ID) {
    return *alloc_->get_tenant_ctx_allocator(TENANT, ctx);
  }
  LabelUsage usage_of(const char* label, int ctx = DEFAULT_CTX_ID) {
    LabelUsage out[64];
    LabelUsage total;
    const int n = ta(ctx).object_set().scan_usage(out, 64, &total);
    for (int i = 0; i < n; ++i) {
      if (out[i].label == label_id(label)) return out[i];
    }
    return LabelUsage{};
  }

  std::unique_ptr<ObMallocAllocator> alloc_ = std::make_unique<ObMallocAllocator>(mgr_);
};

}  // namespace achunk::testing
