// AChunkMgr's resizing of a chunk's mapping (Os::resize_aligned: munmap of the tail, or
// mremap, in place or moving the pages): a cached chunk resized to serve a request of
// another size, a chunk handed out resized for its owner's realloc, and the tail such a
// chunk kept when it shrank, trimmed once its owner found it idle.
#include <algorithm>

#include "achunk/chunk/achunk_mgr.h"
#include "achunk/chunk/chunk_registry.h"

namespace achunk {

AChunk* AChunkMgr::remap(AChunk* chunk, int64_t aligned, int* err) {
  const int64_t old = chunk->aligned();
  void* p = os_.resize_aligned(chunk, old, aligned, ACHUNK_ALIGN, err);
  if (p == nullptr) return nullptr;
  total_hold_.fetch_add(aligned - old, std::memory_order_relaxed);
  live_huge_.fetch_add(int{aligned > MAX_LARGE_ACHUNK_SIZE} - int{old > MAX_LARGE_ACHUNK_SIZE},
                       std::memory_order_relaxed);
  AChunk* resized = static_cast<AChunk*>(p);
  resized->mapped_ = aligned;
  return resized;
}

AChunk* AChunkMgr::resize_cached(AChunk* chunk, int from, int64_t aligned) {
  const int64_t old_hold = chunk->charged();
  int err = 0;
  AChunk* resized = remap(chunk, aligned, &err);
  if (resized == nullptr) {
    slots_[from].failed_reuses_.fetch_add(1, std::memory_order_relaxed);
    unmap_chunk(chunk, from);
    return nullptr;
  }
  resizes_.fetch_add(1, std::memory_order_relaxed);
  if (old_hold > aligned) {
    // The shrink unmapped pages the chunk still charged: it now charges its whole mapping.
    dec_hold(old_hold - aligned);
    resized->charged_ = aligned;
  }
  return resized;
}

AChunk* AChunkMgr::resize_chunk(AChunk* chunk, int64_t size) {
  if (size <= 0 || size > ACHUNK_MAX_ALLOC_SIZE) {
    return fail(AllocFailKind::INVALID_SIZE, size, 0);
  }
  if (chunk->lead_ > 0) return fail(AllocFailKind::INVALID_ARGUMENT, size, 0);
  // A shrink keeps the mapping and the pages it charges: a buffer shrunk and grown again
  // (a packet buffer) would pay an munmap, an mremap and a fault each round. trim_chunk
  // gives the tail back once the owner has seen it idle.
  const int64_t aligned = std::max(chunk_aligned_size(size), chunk->aligned());
  const int64_t charged = chunk->charged();
  // What it did charge, and at least the new request's pages.
  const int64_t to_charge = std::max(chunk_hold_size(size), std::min(charged, aligned));
  if (to_charge > charged && !charge_or_flush(to_charge - charged)) {
    return fail(AllocFailKind::SERVER_LIMIT, size, 0);
  }
  AChunk* resized = chunk;
  if (aligned != chunk->aligned()) {
    // Out of the registry first: once the pages move, another thread may map a chunk at
    // the old address and register it.
    const bool marked = chunk_registry::is_marked(chunk);
    chunk_registry::remove(chunk);
    int err = 0;
    resized = remap(chunk, aligned, &err);
    if (resized == nullptr) {
      chunk_registry::add(chunk);
      if (marked) chunk_registry::mark(chunk);
      if (to_charge > charged) dec_hold(to_charge - charged);
      return fail(AllocFailKind::PHYSICAL_MEMORY_EXHAUST, size, err);
    }
    // A moved mapping lands in a window mapped without a hint, below 2^47 as every such
    // mapping is: inside the registry's range.
    chunk_registry::add(resized);
    if (marked) chunk_registry::mark(resized);
  }
  if (to_charge < charged) dec_hold(charged - to_charge);
  resized->charged_ = to_charge;
  if (size < resized->alloc_bytes_) resized->tail_kept_ = true;
  resized->alloc_bytes_ = size;
  resized->fresh_ = false;
  live_resizes_.fetch_add(1, std::memory_order_relaxed);
  return resized;
}

int64_t AChunkMgr::trim_chunk(AChunk* chunk) {
  if (chunk->lead_ > 0 || !chunk->has_tail()) return 0;
  const int64_t aligned = chunk_aligned_size(chunk->alloc_bytes_);
  const int64_t old = chunk->aligned();
  // The pages of the last 2 MiB unit past the request: a buffer shrunk to a few KiB would
  // otherwise keep the rest of its first unit resident as long as it lives.
  const int64_t request_end = align_up(chunk->alloc_bytes_ + ACHUNK_HEADER_SIZE, ACHUNK_PAGE_SIZE);
  // A shrink stays in place (Os::resize_aligned), so the registry, which marks only the
  // chunk's first unit, is left alone: the owner may free or resize its object meanwhile.
  int err = 0;
  if (aligned < old && remap(chunk, aligned, &err) == nullptr) return -1;
  const bool washed =
      request_end >= aligned ||
      os_.release_pages(reinterpret_cast<char*>(chunk) + request_end, aligned - request_end) == 0;
  if (!washed && aligned >= old) return -1;
  chunk->tail_kept_ = !washed;
  const int64_t to_charge =
      washed ? chunk->hold() : std::max(chunk->hold(), std::min(chunk->charged(), aligned));
  dec_hold(chunk->charged() - to_charge);
  chunk->charged_ = to_charge;
  slack_trims_.fetch_add(1, std::memory_order_relaxed);
  return old - aligned + (washed ? aligned - request_end : 0);
}

}  // namespace achunk
