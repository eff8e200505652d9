// Chunk layer: the chunk registry, one state byte per 2 MiB unit of the address space,
// LIVE while a chunk starting at that unit is handed out (not while it rests in the cache).
// A pointer is checked against it before any chunk header is read, so a free of memory
// achunk never mapped (static data, a stack, a foreign mapping, a released chunk) is
// reported instead of faulting, and LIVE also proves the chunk live. RELEASED marks units
// whose chunk was freed and not handed out again, so a late free of a released chunk
// reads as "already freed". A byte, not a bit, per unit: marking is a plain store, where
// bits sharing a word would need two locked instructions per chunk alloc and free. The
// array is a zero-initialised static of 64 MiB of address space; a page of it covers
// 8 GiB, and only pages where chunks live are ever touched. Depends on achunk_header.h.
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

// LIVE_MARKED: live, and marked by the layer that took it (the block layer marks an
// object set's chunks), so the free fast path tells its chunks from a page manager's
// without reading the chunk header's line. Both live states have LIVE's bit.
enum : uint8_t { NEVER = 0, LIVE = 1, RELEASED = 2, LIVE_MARKED = 3 };
// Plain bytes in the bss, read and written through atomic_ref: no constructor to run or
// constant-evaluate for 2^26 elements.
extern uint8_t unit_state[UNITS];
inline uint8_t load_state(uint64_t unit) {
  return std::atomic_ref<uint8_t>(unit_state[unit]).load(std::memory_order_relaxed);
}

// The address bits above the covered range: an address with any of them set is no chunk.
inline constexpr uintptr_t OUT_OF_RANGE = ~((uintptr_t{1} << ADDRESS_BITS) - 1);

// is_chunk for an address the caller has checked against OUT_OF_RANGE (the free fast
// path folds that into its alignment test).
inline bool is_chunk_in_range(uintptr_t addr) {
  return (load_state(addr >> UNIT_SHIFT) & LIVE) != 0;
}
// The same for a marked chunk (see mark).
inline bool is_marked_in_range(uintptr_t addr) {
  return load_state(addr >> UNIT_SHIFT) == LIVE_MARKED;
}
// Whether a live chunk starts at the 2 MiB unit holding `addr`. One load, no lock; never
// reads memory outside the registry.
inline bool is_chunk(uintptr_t addr) {
  return (addr & OUT_OF_RANGE) == 0 && is_chunk_in_range(addr);
}
inline bool is_chunk(const void* p) {
  return is_chunk(reinterpret_cast<uintptr_t>(p));
}
// Whether the chunk that started at `addr`'s unit was freed and not handed out since.
bool was_released(const void* p);
// Whether a chunk at `chunk` can be registered (its address is in range).
bool covers(const void* chunk);
// AChunkMgr calls these when it hands a chunk out (mapped or from the cache), and when
// it takes one back (to the cache or to unmap), before anything else touches it.
void add(const void* chunk);
void remove(const void* chunk);
// The chunk's owner marks a live chunk (a unit in another state stays as it is: a chunk
// some other source mapped is never made to look live); remove and add clear the mark.
void mark(const void* chunk);
bool is_marked(const void* chunk);

}  // namespace chunk_registry

}  // namespace achunk
