#include "alloc/object/tenant_ctx_allocator.h"

#include "achunk/base/alloc_failure.h"

namespace achunk {

bool try_charge(std::atomic<int64_t>& hold, int64_t bytes, int64_t limit) {
  if (hold.load(std::memory_order_relaxed) + bytes > limit) return false;
  if (hold.fetch_add(bytes, std::memory_order_relaxed) + bytes > limit) {
    hold.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool ObTenantMemory::try_charge(int64_t bytes) {
  return achunk::try_charge(hold_, bytes, limit());
}

ObTenantCtxAllocator::ObTenantCtxAllocator(AChunkMgr& chunk_mgr, ObTenantMemory& tenant, int ctx_id,
                                           const std::atomic<int64_t>& span_idle_us)
    : chunk_mgr_(chunk_mgr),
      tenant_(tenant),
      ctx_id_(ctx_id),
      span_idle_us_(span_idle_us),
      object_set_(*this) {}

AChunk* ObTenantCtxAllocator::alloc_chunk(int64_t size, int64_t head_align) {
  if (size <= 0 || size > ACHUNK_MAX_ALLOC_SIZE) {
    set_alloc_failure(AllocFailure{AllocFailKind::INVALID_SIZE, 0, size, hold(), limit()});
    return nullptr;
  }
  const int64_t hold = chunk_hold_size(size);
  if (!charge(hold, size)) return nullptr;
  AChunk* chunk = chunk_mgr_.alloc_chunk(size, head_align);
  if (chunk == nullptr) uncharge(hold);  // the server limit or mmap: AChunkMgr recorded why
  return chunk;
}

void ObTenantCtxAllocator::free_chunk(AChunk* chunk) {
  const int64_t hold = chunk->hold();
  chunk_mgr_.free_chunk(chunk);
  uncharge(hold);
}

AChunk* ObTenantCtxAllocator::resize_chunk(AChunk* chunk, int64_t size) {
  if (size <= 0 || size > ACHUNK_MAX_ALLOC_SIZE) {
    set_alloc_failure(AllocFailure{AllocFailKind::INVALID_SIZE, 0, size, hold(), limit()});
    return nullptr;
  }
  const int64_t delta = chunk_hold_size(size) - chunk->hold();
  if (delta > 0 && !charge(delta, size)) return nullptr;
  AChunk* resized = chunk_mgr_.resize_chunk(chunk, size);
  if (resized == nullptr) {
    if (delta > 0) uncharge(delta);
    return nullptr;
  }
  if (delta < 0) uncharge(-delta);
  return resized;
}

void ObTenantCtxAllocator::uncharge(int64_t bytes) {
  tenant_.uncharge(bytes);
  hold_.fetch_sub(bytes, std::memory_order_relaxed);
}

bool ObTenantCtxAllocator::charge(int64_t bytes, int64_t size) {
  if (!achunk::try_charge(hold_, bytes, limit())) {
    set_alloc_failure(AllocFailure{AllocFailKind::CTX_LIMIT, 0, size, hold(), limit()});
    return false;
  }
  if (!tenant_.try_charge(bytes)) {
    hold_.fetch_sub(bytes, std::memory_order_relaxed);
    set_alloc_failure(
        AllocFailure{AllocFailKind::TENANT_LIMIT, 0, size, tenant_.hold(), tenant_.limit()});
    return false;
  }
  return true;
}

}  // namespace achunk
