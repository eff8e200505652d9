// Wiring: ob_malloc and friends over the process-wide tenant directory.
// Every call charges (tenant, ctx, label) from the ObMemAttr; failures return nullptr
// with the reason in last_alloc_failure() (see ob_last_failure_message). Depends on
// malloc_allocator.h and the process-wide instance built in global.cc.
#pragma once

#include <cstdint>

#include "alloc/object/ob_mem_attr.h"

namespace achunk {

void* ob_malloc(int64_t size, const ObMemAttr& attr);
void ob_free(void* ptr);
void* ob_realloc(void* ptr, int64_t size, const ObMemAttr& attr);
void* ob_malloc_align(int64_t align, int64_t size, const ObMemAttr& attr);

bool ob_set_tenant_limit(uint64_t tenant_id, int64_t bytes);
bool ob_set_tenant_ctx_limit(uint64_t tenant_id, int ctx_id, int64_t bytes);
// Per-ctx and per-label usage, OceanBase's "[MEMORY]" lines (or JSON); never allocates.
int64_t ob_print_usage(char* buf, int64_t len, bool json = false);
// Returns the calling thread's cached slabs to the block layer (e.g. before it idles).
void ob_flush_thread_caches();

}  // namespace achunk
