// Chunk layer: the chunk registry, one bit per 2 MiB unit of the address space, set
// while a chunk starting at that unit is mapped. A pointer is checked against it before
// any chunk header is read, so a free of memory achunk never mapped (static data, a
// stack, a foreign mapping, a released chunk) is reported instead of faulting. A second
// bit marks units whose chunk was unmapped and not mapped again, so a late free of a
// released chunk reads as "already freed". Both arrays are zero-initialised statics:
// their pages are touched only where chunks live. Depends on achunk_header.h.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/chunk/achunk_header.h"

namespace achunk {

namespace chunk_registry {

// User addresses below 2^47 (x86-64) or 2^48 (elsewhere); a mapping above is refused.
#if defined(__x86_64__)
inline constexpr int ADDRESS_BITS = 47;
#else
inline constexpr int ADDRESS_BITS = 48;
#endif
inline constexpr int UNIT_SHIFT = 21;
static_assert((int64_t{1} << UNIT_SHIFT) == ACHUNK_ALIGN);
inline constexpr uint64_t UNITS = uint64_t{1} << (ADDRESS_BITS - UNIT_SHIFT);
inline constexpr uint64_t WORDS = UNITS / 64;

extern std::atomic<uint64_t> live_bits[WORDS];
extern std::atomic<uint64_t> released_bits[WORDS];

// Whether a chunk is mapped at the 2 MiB unit holding `addr`. One load, no lock; never
// reads memory outside the registry.
inline bool is_chunk(uintptr_t addr) {
  const uint64_t unit = addr >> UNIT_SHIFT;
  if (unit >= UNITS) return false;
  return ((live_bits[unit / 64].load(std::memory_order_relaxed) >> (unit % 64)) & 1) != 0;
}
inline bool is_chunk(const void* p) {
  return is_chunk(reinterpret_cast<uintptr_t>(p));
}
// Whether the chunk that started at `addr`'s unit was unmapped and nothing mapped since.
bool was_released(const void* p);
// Whether a chunk at `chunk` can be registered (its address is in range).
bool covers(const void* chunk);
// AChunkMgr calls these right after mapping and right before unmapping a chunk.
void add(const void* chunk);
void remove(const void* chunk);

}  // namespace chunk_registry

}  // namespace achunk
