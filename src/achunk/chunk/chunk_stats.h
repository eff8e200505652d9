// Chunk layer: a snapshot of AChunkMgr's counters and the one printer that renders it,
// as OceanBase-compatible "[chunk_mgr]" / "[CHUNK_MGR]" lines or as JSON. Both forms
// come from the same field list, so they cannot drift apart. Printing never allocates.
// Depends on os.h (for OsMemoryInfo) only.
#pragma once

#include <cstdint>

#include "achunk/platform/os.h"

namespace achunk {

// One cache line of the dump: the 8 normal ways summed as "2 MB", one large size, or the
// huge slot (size_mb HUGE_LINE_MB, printed ">20").
struct ChunkSlotStats {
  static constexpr int64_t HUGE_LINE_MB = 0;
  int64_t size_mb = 0;
  int64_t hold = 0;
  int64_t count = 0;
  int64_t pushes = 0;
  int64_t pops = 0;
  int64_t maps = 0;
  int64_t unmaps = 0;
};

struct ChunkMgrStats {
  static constexpr int SLOT_LINES = 11;  // 2 MB, then 4, 6, ... 20 MB, then huge

  int64_t limit = 0;
  int64_t hold = 0;
  int64_t total_hold = 0;
  int64_t used = 0;
  int64_t freelists_hold = 0;
  int64_t total_maps = 0;
  int64_t total_unmaps = 0;
  int64_t large_maps = 0;
  int64_t large_unmaps = 0;
  int64_t huge_maps = 0;
  int64_t huge_unmaps = 0;
  int64_t expired_unmaps = 0;
  int64_t resident_size = 0;
  int64_t virtual_memory_used = 0;
  int64_t large_freelists_hold = 0;
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  int64_t max_chunk_cache_size = 0;
  int64_t chunk_cache_ttl_ms = 0;
  int64_t cache_resident = 0;  // bytes of cached chunks in RAM; -1: unknown
  int64_t cache_resizes = 0;   // cached large chunks resized to serve another size
  int64_t live_resizes = 0;    // chunks handed out resized for a realloc (resize_chunk)
  int64_t slack_trims = 0;     // tails kept by a shrink, unmapped once idle (trim_chunk)
  int64_t max_map_count = 0;
  char thp_mode[16] = "unknown";
  ChunkSlotStats slots[SLOT_LINES];
};

// The fields of the [chunk_mgr] line and of each [CHUNK_MGR] line, in print order (the
// stats region publishes the same list).
struct ChunkStatField {
  const char* name;
  int64_t ChunkMgrStats::*member;
};
struct ChunkSlotField {
  const char* name;
  int64_t ChunkSlotStats::*member;
};
inline constexpr int CHUNK_STAT_FIELD_COUNT = 23;
inline constexpr int CHUNK_SLOT_FIELD_COUNT = 6;
extern const ChunkStatField (&CHUNK_STAT_FIELDS)[CHUNK_STAT_FIELD_COUNT];
extern const ChunkSlotField CHUNK_SLOT_FIELDS[CHUNK_SLOT_FIELD_COUNT];

// The text dump: one [chunk_mgr] line, then one [CHUNK_MGR] line per cache size.
// Returns the length it needed (like snprintf); the output is always NUL-terminated.
int64_t print_chunk_stats(const ChunkMgrStats& stats, char* buf, int64_t len);
// The same fields as one JSON object.
int64_t print_chunk_stats_json(const ChunkMgrStats& stats, char* buf, int64_t len);

}  // namespace achunk
