// Object layer: AllocatorOverhead, the bytes the allocator holds for itself rather than
// for any caller's object, as the usage dump and the live region report them. Depends
// on nothing.
#pragma once

#include <cstdint>

namespace achunk {

struct AllocatorOverhead {
  int64_t thread_states = 0;  // per-thread states in use, and free ones not washed
  int64_t thread_heaps = 0;   // spans holding the threads' heaps, over every object set
  int64_t chunk_headers = 0;  // chunk and block headers of every mapped chunk, cached ones too
  int64_t stats_region = 0;   // the live stats region, when the process publishes one

  int64_t total() const { return thread_states + thread_heaps + chunk_headers + stats_region; }
};

}  // namespace achunk
