// Context layer: ContextParam, how a memory context is made: its (tenant, ctx, label),
// properties, arena page size and parallelism. Depends on the object layer's ObMemAttr.
#pragma once

#include <cstdint>

#include "alloc/object/ob_mem_attr.h"

namespace achunk {

enum ContextProperties : int {
  ADD_CHILD_THREAD_SAFE = 1 << 0,  // children may be added or removed from any thread
  ALLOC_THREAD_SAFE = 1 << 1,      // allocf/free/allocp may be called concurrently
  USE_TL_PAGE_OPTIONAL = 1 << 2,   // take pages from the thread's page manager (use_pm)
  RETURN_MALLOC_DEFAULT = 1 << 3,  // alloc() is the freeable allocator, not the arena
  ALL_CONTEXT_PROPERTIES = (1 << 4) - 1,
};

inline constexpr int64_t DEFAULT_CONTEXT_PAGE_SIZE = 8192;

struct ContextParam {
  ContextParam& set_mem_attr(uint64_t tenant_id, const char* label, int ctx_id = DEFAULT_CTX_ID) {
    tenant_id_ = tenant_id;
    label_ = label;
    ctx_id_ = ctx_id;
    return *this;
  }
  ContextParam& set_label(const char* label) {
    label_ = label;
    return *this;
  }
  ContextParam& set_properties(int properties) {
    properties_ = properties;
    return *this;
  }
  ContextParam& set_page_size(int64_t bytes) {
    page_size_ = bytes;
    return *this;
  }
  ContextParam& set_parallel(int parallel) {
    parallel_ = parallel;
    return *this;
  }

  uint64_t tenant_id_ = OB_SERVER_TENANT_ID;
  const char* label_ = "MemoryContext";
  int ctx_id_ = DEFAULT_CTX_ID;
  int properties_ = 0;
  int64_t page_size_ = DEFAULT_CONTEXT_PAGE_SIZE;
  // With ALLOC_THREAD_SAFE: the freeable allocator's ways (locks), at most 8 are used.
  int parallel_ = 1;
};

}  // namespace achunk
