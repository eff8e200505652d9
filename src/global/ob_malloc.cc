#include "global/ob_malloc.h"

#include "global/global.h"

namespace achunk {

namespace {
// Out of line, so the common path makes tail calls only and saves no registers.
__attribute__((noinline)) void* ob_malloc_first(int64_t size, const ObMemAttr& attr) {
  return global_malloc_allocator().alloc(size, attr);
}
}  // namespace

void* ob_malloc(int64_t size, const ObMemAttr& attr) {
  if (ObMallocAllocator* a = global_detail::malloc_allocator.load(std::memory_order_acquire)) {
    return a->alloc(size, attr);
  }
  return ob_malloc_first(size, attr);
}

void ob_free(void* ptr) {
  ObMallocAllocator::free(ptr);
}

void* ob_realloc(void* ptr, int64_t size, const ObMemAttr& attr) {
  return global_malloc_allocator().realloc(ptr, size, attr);
}

void* ob_malloc_align(int64_t align, int64_t size, const ObMemAttr& attr) {
  return global_malloc_allocator().alloc_align(align, size, attr);
}

bool ob_set_tenant_limit(uint64_t tenant_id, int64_t bytes) {
  return global_malloc_allocator().set_tenant_limit(tenant_id, bytes);
}

bool ob_set_tenant_ctx_limit(uint64_t tenant_id, int ctx_id, int64_t bytes) {
  return global_malloc_allocator().set_tenant_ctx_limit(tenant_id, ctx_id, bytes);
}

int64_t ob_print_usage(char* buf, int64_t len, bool json) {
  ObMallocAllocator& a = global_malloc_allocator();
  const AllocatorOverhead overhead = global_overhead();
  return json ? a.print_usage_json(buf, len, &overhead) : a.print_usage(buf, len, &overhead);
}

void ob_flush_thread_caches() {
  global_malloc_allocator().flush_thread_caches();
}

}  // namespace achunk
