// Object layer: ObMallocAllocator, the tenant directory and the ob_malloc engine. It maps
// (tenant, ctx) to an ObTenantCtxAllocator (created on first use in fixed storage, never
// freed), applies tenant and ctx limits, retries a failed allocation once after giving
// memory back, validates every free (magic, state, tail canary), and prints per-ctx and
// per-label usage. Never calls malloc. Depends on tenant_ctx_allocator.h, ob_mem_attr.h.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/spin_lock.h"
#include "alloc/ob_mem_attr.h"
#include "alloc/tenant_ctx_allocator.h"

namespace achunk {

class ObMallocAllocator {
 public:
  static constexpr int MAX_TENANTS = 16;

  explicit ObMallocAllocator(AChunkMgr& chunk_mgr);
  ~ObMallocAllocator();
  ObMallocAllocator(const ObMallocAllocator&) = delete;
  ObMallocAllocator& operator=(const ObMallocAllocator&) = delete;

  // nullptr with last_alloc_failure() set on failure; size 0 gives a unique pointer.
  void* alloc(int64_t size, const ObMemAttr& attr);
  // Grows or shrinks in place when the slot allows, else moves. size 0 frees and returns
  // nullptr. On failure returns nullptr and leaves `ptr` untouched.
  void* realloc(void* ptr, int64_t size, const ObMemAttr& attr);
  // `align` must be a power of two (up to 1 MiB).
  void* alloc_align(int64_t align, int64_t size, const ObMemAttr& attr);
  // Frees an object from any ObMallocAllocator. A pointer achunk never returned, a double
  // free or an overwritten tail canary is reported through report_error().
  static void free(void* ptr);
  // Requested size of a live object; -1 (and a report) for an invalid pointer.
  static int64_t get_size(void* ptr);
  // Bytes the caller may use (at least the requested size): the object is grown in place
  // to fill its slot or span first. -1 (and a report) for an invalid pointer.
  static int64_t usable_size(void* ptr);

  ObTenantCtxAllocator* get_tenant_ctx_allocator(uint64_t tenant_id, int ctx_id);
  ObTenantMemory* get_tenant(uint64_t tenant_id);
  bool set_tenant_limit(uint64_t tenant_id, int64_t bytes);
  bool set_tenant_ctx_limit(uint64_t tenant_id, int ctx_id, int64_t bytes);
  // Returns the calling thread's cached slabs of every ctx to the block layer.
  void flush_thread_caches();
  AChunkMgr& chunk_mgr() { return chunk_mgr_; }
  // fork(): the directory's, every object set's and the chunk manager's locks.
  void fork_lock();
  void fork_unlock();

  // "[MEMORY] tenant_id= ctx_id= hold= used= limit= free=" per ctx, then one line per
  // label sorted by hold. Returns the length needed, like snprintf; never allocates.
  int64_t print_usage(char* buf, int64_t len);
  int64_t print_usage_json(char* buf, int64_t len);

 private:
  struct Tenant {
    std::atomic<bool> ready{false};
    ObTenantMemory* memory = nullptr;
    std::atomic<ObTenantCtxAllocator*> ctx[MAX_CTX_ID] = {};
  };

  Tenant* find_tenant(uint64_t tenant_id, bool create);
  template <typename F>
  void for_each_ctx(F f);

  AChunkMgr& chunk_mgr_;
  SpinLock lock_;  // creation of tenants and ctx allocators
  Tenant tenants_[MAX_TENANTS];
  alignas(ObTenantMemory) unsigned char tenant_storage_[MAX_TENANTS][sizeof(ObTenantMemory)];
  alignas(ObTenantCtxAllocator) unsigned char ctx_storage_[MAX_TENANTS][MAX_CTX_ID]
                                                          [sizeof(ObTenantCtxAllocator)];
};

template <typename F>
void ObMallocAllocator::for_each_ctx(F f) {
  for (Tenant& t : tenants_) {
    if (!t.ready.load(std::memory_order_acquire)) continue;
    for (auto& slot : t.ctx) {
      if (ObTenantCtxAllocator* ta = slot.load(std::memory_order_acquire)) f(*t.memory, *ta);
    }
  }
}

}  // namespace achunk
