// Object layer: ObTenantCtxAllocator serves one (tenant, ctx). It is the ChunkSource of
// its ObjectSet, charging every chunk to the ctx and the tenant under their limits
// before asking AChunkMgr (which applies the server limit), so limits nest
// server >= tenant >= ctx. Depends on the chunk layer and object_set.h.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/chunk/achunk_mgr.h"
#include "alloc/object/object_set.h"

namespace achunk {

class ObTenantMemory;

class ObTenantCtxAllocator final : public ChunkSource {
 public:
  // `span_idle_us`: the directory's span_idle_ms, read at each use.
  ObTenantCtxAllocator(AChunkMgr& chunk_mgr, ObTenantMemory& tenant, int ctx_id,
                       const std::atomic<int64_t>& span_idle_us);

  AChunk* alloc_chunk(int64_t size, int64_t head_align) override;
  void free_chunk(AChunk* chunk) override;
  AChunk* resize_chunk(AChunk* chunk, int64_t size) override;
  int64_t trim_chunk(AChunk* chunk) override { return chunk_mgr_.trim_chunk(chunk); }
  int release_pages(void* addr, int64_t size) override {
    return chunk_mgr_.release_pages(addr, size);
  }
  int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) override {
    return chunk_mgr_.resident_pages(addr, size, vec);
  }
  int64_t now_us() override { return chunk_mgr_.now_us(); }
  int64_t span_idle_us() override { return span_idle_us_.load(std::memory_order_relaxed); }
  bool process_barrier() override { return chunk_mgr_.process_barrier(); }
  bool process_barrier_available() override { return chunk_mgr_.process_barrier_available(); }

  ObjectSet& object_set() { return object_set_; }
  int ctx_id() const { return ctx_id_; }
  ObTenantMemory& tenant() { return tenant_; }
  int64_t hold() const { return hold_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  void set_limit(int64_t bytes) { limit_.store(bytes <= 0 ? INT64_MAX : bytes); }

 private:
  AChunkMgr& chunk_mgr_;
  ObTenantMemory& tenant_;
  const int ctx_id_;
  // Charges `bytes` to the ctx, then the tenant, or records why not (for `size`).
  bool charge(int64_t bytes, int64_t size);
  void uncharge(int64_t bytes);

  const std::atomic<int64_t>& span_idle_us_;
  std::atomic<int64_t> hold_{0};
  std::atomic<int64_t> limit_{INT64_MAX};
  ObjectSet object_set_;  // last: its chunks come through this object
};

// A tenant: its hold and limit over all its ctxs.
class ObTenantMemory {
 public:
  explicit ObTenantMemory(uint64_t tenant_id) : tenant_id_(tenant_id) {}
  uint64_t tenant_id() const { return tenant_id_; }
  int64_t hold() const { return hold_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  void set_limit(int64_t bytes) { limit_.store(bytes <= 0 ? INT64_MAX : bytes); }
  // Charges `bytes` unless that would pass the limit.
  bool try_charge(int64_t bytes);
  void uncharge(int64_t bytes) { hold_.fetch_sub(bytes, std::memory_order_relaxed); }

 private:
  const uint64_t tenant_id_;
  std::atomic<int64_t> hold_{0};
  std::atomic<int64_t> limit_{INT64_MAX};
};

// Charges `bytes` to `hold` unless that passes `limit`.
bool try_charge(std::atomic<int64_t>& hold, int64_t bytes, int64_t limit);

}  // namespace achunk
