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
  // `head_align`: see AChunkMgr::alloc_chunk (0 for any chunk).
  virtual AChunk* alloc_chunk(int64_t size, int64_t head_align) = 0;
  virtual void free_chunk(AChunk* chunk) = 0;
  // AChunkMgr::resize_chunk, with the source's own charges moved along: the chunk, maybe
  // moved, or nullptr with last_alloc_failure() set and the chunk as it was.
  virtual AChunk* resize_chunk(AChunk* chunk, int64_t size) = 0;
  // AChunkMgr::trim_chunk: the request's charge does not change.
  virtual int64_t trim_chunk(AChunk* chunk) = 0;
  // Returns the physical pages of a free range inside one of its chunks; 0 or errno.
  virtual int release_pages(void* addr, int64_t size) = 0;
  // AChunkMgr::resident_pages over a page-aligned range of its chunks (Os::resident_pages).
  virtual int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) = 0;
  // The chunk layer's clock, and the span idle time (span_idle_ms, the block layer's
  // option; negative: never): a BlockSet gives the pages of spans that stayed free that
  // long back on its own frees, as the chunk layer unmaps chunks that idled in its cache
  // on free_chunk.
  virtual int64_t now_us() = 0;
  virtual int64_t span_idle_us() = 0;
  // The chunk layer's Os::process_barrier and process_barrier_available.
  virtual bool process_barrier() = 0;
  virtual bool process_barrier_available() = 0;
};

// Straight to an AChunkMgr, no limits of its own.
// span_idle_ms's default, in microseconds.
inline constexpr int64_t SPAN_IDLE_US = 1'000'000;

// Microseconds from span_idle_ms (negative: never).
inline int64_t span_idle_ms_to_us(int64_t ms) {
  return ms < 0 ? -1 : ms * 1000;
}

class DirectChunkSource final : public ChunkSource {
 public:
  explicit DirectChunkSource(AChunkMgr& mgr) : mgr_(mgr) {}
  void set_span_idle_ms(int64_t ms) { span_idle_us_ = span_idle_ms_to_us(ms); }
  AChunk* alloc_chunk(int64_t size, int64_t head_align) override {
    return mgr_.alloc_chunk(size, head_align);
  }
  void free_chunk(AChunk* chunk) override { mgr_.free_chunk(chunk); }
  AChunk* resize_chunk(AChunk* chunk, int64_t size) override {
    return mgr_.resize_chunk(chunk, size);
  }
  int64_t trim_chunk(AChunk* chunk) override { return mgr_.trim_chunk(chunk); }
  int release_pages(void* addr, int64_t size) override { return mgr_.release_pages(addr, size); }
  int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) override {
    return mgr_.resident_pages(addr, size, vec);
  }
  int64_t now_us() override { return mgr_.now_us(); }
  int64_t span_idle_us() override { return span_idle_us_; }
  bool process_barrier() override { return mgr_.process_barrier(); }
  bool process_barrier_available() override { return mgr_.process_barrier_available(); }

 private:
  AChunkMgr& mgr_;
  int64_t span_idle_us_ = SPAN_IDLE_US;  // tests set it before any thread starts
};

}  // namespace achunk
