// Wiring: the drop-in malloc's hit against the process-wide allocator, inline, for every
// entry point that allocates: achunk_malloc (c_api.cc) and, in libachunk_malloc.so,
// malloc and operator new themselves (malloc_override.cc), so neither pays a call or a
// jump into another function on a hit. Depends on global.h and the drop-in layer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "alloc/malloc/malloc_shim.h"
#include "global/global.h"

namespace achunk {

inline uint32_t malloc_allocator_id() {
  return global_detail::malloc_allocator_id.load(std::memory_order_relaxed);
}

// A small object from the calling thread's entry, or nullptr: then malloc_miss.
// `origin`: origin_bits of operator new's family, 0 for malloc's.
__attribute__((always_inline)) inline void* malloc_hit(size_t size, uint64_t origin = 0) {
  return MallocShim::malloc_fast(malloc_allocator_id(), size, origin);
}

// The same for an alignment that is a power of two (up to a page; nullptr above).
__attribute__((always_inline)) inline void* aligned_hit(size_t alignment, size_t size,
                                                        uint64_t origin = 0) {
  if (!MallocShim::power_of_two(alignment)) return nullptr;
  return MallocShim::aligned_fast(malloc_allocator_id(), alignment, size, origin);
}

// malloc() after malloc_hit() returned nullptr (c_api.cc): the whole request, errno set
// on failure.
void* malloc_miss(size_t size);

}  // namespace achunk
