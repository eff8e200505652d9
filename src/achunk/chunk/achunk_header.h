// Chunk layer: the AChunk header that starts every chunk, and the size arithmetic of
// chunks (2 MiB alignment, header size, hold vs mapped size). Depends on nothing else.
#pragma once

#include <atomic>
#include <cstdint>

namespace achunk {

inline constexpr int64_t ACHUNK_ALIGN = int64_t{2} << 20;                  // INTACT_ACHUNK_SIZE
inline constexpr int64_t ACHUNK_HEADER_SIZE = int64_t{24} << 10;           // room for block headers
inline constexpr int64_t ACHUNK_SIZE = ACHUNK_ALIGN - ACHUNK_HEADER_SIZE;  // normal payload
inline constexpr int64_t ACHUNK_PAGE_SIZE = 4096;
// A ceiling far above any real machine that keeps every size computation from overflowing.
inline constexpr int64_t ACHUNK_MAX_ALLOC_SIZE = int64_t{1} << 46;  // 64 TiB

constexpr int64_t align_up(int64_t n, int64_t align) {
  return (n + align - 1) & ~(align - 1);
}

// Bytes mapped for a chunk whose payload is `size`.
constexpr int64_t chunk_aligned_size(int64_t size) {
  return align_up(size + ACHUNK_HEADER_SIZE, ACHUNK_ALIGN);
}

// Bytes charged for a chunk whose payload is `size`. A normal chunk charges its full
// 2 MiB; a larger one charges only the pages it can touch, so a 2.1 MiB request does not
// count as 4 MiB against the limit (the untouched tail is never faulted in).
constexpr int64_t chunk_hold_size(int64_t size) {
  const int64_t aligned = chunk_aligned_size(size);
  return aligned == ACHUNK_ALIGN ? aligned : align_up(size + ACHUNK_HEADER_SIZE, ACHUNK_PAGE_SIZE);
}

struct AChunk {
  static constexpr uint32_t MAGIC_CODE = 0xCEDEEC00;   // handed out to a caller
  static constexpr uint32_t CACHED_CODE = 0xCEDEEC01;  // resting in an AChunkMgr slot

  // Finds the chunk of any pointer into its first 2 MiB by masking.
  static AChunk* ptr2chunk(const void* ptr) {
    return reinterpret_cast<AChunk*>(reinterpret_cast<uintptr_t>(ptr) &
                                     ~static_cast<uintptr_t>(ACHUNK_ALIGN - 1));
  }

  void* data() { return reinterpret_cast<char*>(this) + ACHUNK_HEADER_SIZE; }
  // What the last request charged to its owner (chunk_hold_size of its payload).
  int64_t hold() const { return chunk_hold_size(alloc_bytes_); }
  // What the chunk layer charges for the chunk (see charged_).
  int64_t charged() const { return charged_; }
  int64_t aligned() const { return mapped_; }
  bool is_valid() const { return magic_.load(std::memory_order_relaxed) == MAGIC_CODE; }
  bool is_cached() const { return magic_.load(std::memory_order_relaxed) == CACHED_CODE; }
  // Whether a shrink left it a tail to give back (AChunkMgr::trim_chunk): whole 2 MiB
  // units past its request, or pages of its last unit past it written before.
  bool has_tail() const { return tail_kept_ || mapped_ > chunk_aligned_size(alloc_bytes_); }

  // Atomic so that a double free racing the first free is a bug report, not a data race.
  std::atomic<uint32_t> magic_{MAGIC_CODE};
  // Handed out straight from a new mapping: no byte of the payload was touched, so it
  // reads as zero and is not resident (calloc skips its memset). False for a chunk that
  // comes back from the cache, whatever it held.
  bool fresh_ = false;
  // Shrunk by resize_chunk since it was handed out or last trimmed: the pages past its
  // request may still be resident.
  bool tail_kept_ = false;
  int64_t alloc_bytes_ = 0;  // payload requested by the last alloc_chunk
  // Bytes mapped, fixed for the chunk's life: a cached large chunk may serve a smaller
  // request, and goes back to the slot of its mapping.
  int64_t mapped_ = 0;
  // Bytes the chunk layer charges (in AChunkMgr's hold): the most any request since the
  // chunk was mapped or resized charged, at least hold(). A smaller request keeps the
  // pages beyond its own, which go back with the chunk, not at each reuse: a loop that
  // alternates two sizes on one chunk neither madvises nor faults per round.
  int64_t charged_ = 0;
  int64_t cache_ts_ = 0;  // microseconds, stamped when the chunk entered the cache
  AChunk* prev_ = nullptr;
  AChunk* next_ = nullptr;
  // Bytes mapped before the chunk to place it (AChunkMgr::alloc_chunk's head_align),
  // unmapped when it is freed (it is then cached as any chunk). 0 for every other chunk.
  int64_t lead_ = 0;
};

static_assert(sizeof(AChunk) <= ACHUNK_HEADER_SIZE);

}  // namespace achunk
