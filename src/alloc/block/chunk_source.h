// Block layer: where a BlockSet gets its chunks. The tenant-ctx allocator implements it
// to charge ctx and tenant limits before asking AChunkMgr; tests pass AChunkMgr through.
// Depends on the chunk layer.
#pragma once

#include "achunk/chunk/achunk_header.h"
#include "achunk/chunk/achunk_mgr.h"

namespace achunk {

class ChunkSource {
 public:
  virtual ~ChunkSource() = default;
  // A chunk with room for `size` payload bytes, or nullptr with last_alloc_failure() set.
  virtual AChunk* alloc_chunk(int64_t size) = 0;
  virtual void free_chunk(AChunk* chunk) = 0;
  // Returns the physical pages of a free range inside one of its chunks; 0 or errno.
  virtual int release_pages(void* addr, int64_t size) = 0;
  // The chunk layer's clock and span idle time (span_idle_ms; negative: never): a
  // BlockSet gives the pages of spans that stayed free that long back on its own frees,
  // as the chunk layer unmaps chunks that idled in its cache on free_chunk.
  virtual int64_t now_us() = 0;
  virtual int64_t span_idle_us() = 0;
};

// Straight to an AChunkMgr, no limits of its own.
class DirectChunkSource final : public ChunkSource {
 public:
  explicit DirectChunkSource(AChunkMgr& mgr) : mgr_(mgr) {}
  AChunk* alloc_chunk(int64_t size) override { return mgr_.alloc_chunk(size); }
  void free_chunk(AChunk* chunk) override { mgr_.free_chunk(chunk); }
  int release_pages(void* addr, int64_t size) override { return mgr_.release_pages(addr, size); }
  int64_t now_us() override { return mgr_.now_us(); }
  int64_t span_idle_us() override { return mgr_.span_idle_us(); }

 private:
  AChunkMgr& mgr_;
};

}  // namespace achunk
