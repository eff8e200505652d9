// Test support for the context layer: MemoryContextTest, which records leak reports and
// the test ctx's hold, shared by the tests of memory contexts, arenas and guards.
// Depends on memory_context.h and the process-wide instance in global.h.
#pragma once

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "context/memory_context.h"
#include "global/global.h"

namespace achunk {

inline constexpr int CTX = WORK_AREA;  // test contexts only: nothing else charges this ctx

inline int64_t ctx_hold() {
  return global_malloc_allocator().get_tenant_ctx_allocator(OB_SERVER_TENANT_ID, CTX)->hold();
}

inline ContextParam param(const char* label, int properties = 0) {
  ContextParam p;
  p.set_mem_attr(OB_SERVER_TENANT_ID, label, CTX).set_properties(properties);
  return p;
}

struct Leaks {
  static inline std::mutex mu;  // contexts may be destroyed on several threads at once
  static inline std::vector<LeakReport> reports;
  static inline std::vector<std::string> labels;
  static void handler(const LeakReport& r) {
    std::lock_guard<std::mutex> g(mu);
    reports.push_back(r);
    labels.emplace_back(r.label);
  }
};

class MemoryContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Leaks::reports.clear();
    Leaks::labels.clear();
    previous_ = set_leak_handler(&Leaks::handler);
    start_hold_ = ctx_hold();
  }
  void TearDown() override { set_leak_handler(previous_); }
  LeakHandler previous_ = nullptr;
  int64_t start_hold_ = 0;
};

}  // namespace achunk
