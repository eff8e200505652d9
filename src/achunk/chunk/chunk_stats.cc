#include "achunk/chunk/chunk_stats.h"

#include "achunk/base/buf_writer.h"

namespace achunk {

namespace {

// Order of the reference's [chunk_mgr] line, with achunk's additions after it.
constexpr ChunkStatField MGR_FIELDS[] = {
    {"limit", &ChunkMgrStats::limit},
    {"hold", &ChunkMgrStats::hold},
    {"total_hold", &ChunkMgrStats::total_hold},
    {"used", &ChunkMgrStats::used},
    {"freelists_hold", &ChunkMgrStats::freelists_hold},
    {"total_maps", &ChunkMgrStats::total_maps},
    {"total_unmaps", &ChunkMgrStats::total_unmaps},
    {"large_maps", &ChunkMgrStats::large_maps},
    {"large_unmaps", &ChunkMgrStats::large_unmaps},
    {"huge_maps", &ChunkMgrStats::huge_maps},
    {"huge_unmaps", &ChunkMgrStats::huge_unmaps},
    {"expired_unmaps", &ChunkMgrStats::expired_unmaps},
    {"resident_size", &ChunkMgrStats::resident_size},
    {"virtual_memory_used", &ChunkMgrStats::virtual_memory_used},
    {"large_freelists_hold", &ChunkMgrStats::large_freelists_hold},
    {"cache_hits", &ChunkMgrStats::cache_hits},
    {"cache_misses", &ChunkMgrStats::cache_misses},
    {"max_chunk_cache_size", &ChunkMgrStats::max_chunk_cache_size},
    {"chunk_cache_ttl_ms", &ChunkMgrStats::chunk_cache_ttl_ms},
    {"cache_resident", &ChunkMgrStats::cache_resident},
    {"cache_resizes", &ChunkMgrStats::cache_resizes},
    {"live_resizes", &ChunkMgrStats::live_resizes},
    {"slack_trims", &ChunkMgrStats::slack_trims},
};
// The count is exact: a shorter list would leave null members to print.
static_assert(sizeof(MGR_FIELDS) / sizeof(MGR_FIELDS[0]) == CHUNK_STAT_FIELD_COUNT);

}  // namespace

const ChunkStatField (&CHUNK_STAT_FIELDS)[CHUNK_STAT_FIELD_COUNT] = MGR_FIELDS;

const ChunkSlotField CHUNK_SLOT_FIELDS[CHUNK_SLOT_FIELD_COUNT] = {
    {"hold", &ChunkSlotStats::hold},     {"count", &ChunkSlotStats::count},
    {"pushes", &ChunkSlotStats::pushes}, {"pops", &ChunkSlotStats::pops},
    {"maps", &ChunkSlotStats::maps},     {"unmaps", &ChunkSlotStats::unmaps},
};

namespace {

// The reference prints numbers with "%'15ld": grouped, right-aligned in 15 columns.
constexpr int NUM_WIDTH = 15;

}  // namespace

int64_t print_chunk_stats(const ChunkMgrStats& s, char* buf, int64_t len) {
  BufWriter w(buf, len);
  w.str("[chunk_mgr]");
  for (const ChunkStatField& f : CHUNK_STAT_FIELDS)
    w.ch(' ').str(f.name).ch('=').num(s.*f.member, NUM_WIDTH, true);
  w.str(" [OS_PARAMS] vm.max_map_count=").num(s.max_map_count);
  w.str(" transparent_hugepages=").str(s.thp_mode).ch('\n');
  for (const ChunkSlotStats& slot : s.slots) {
    w.str("[CHUNK_MGR] ");
    if (slot.size_mb == ChunkSlotStats::HUGE_LINE_MB) {
      w.str(">20");
    } else {
      w.num(slot.size_mb, 2);
    }
    w.str(" MB_CACHE:");
    for (const ChunkSlotField& f : CHUNK_SLOT_FIELDS) {
      w.ch(' ').str(f.name).ch('=').num(slot.*f.member, NUM_WIDTH, true);
    }
    w.ch('\n');
  }
  return w.length();
}

int64_t print_chunk_stats_json(const ChunkMgrStats& s, char* buf, int64_t len) {
  BufWriter w(buf, len);
  w.str("{\"chunk_mgr\":{");
  for (const ChunkStatField& f : CHUNK_STAT_FIELDS)
    w.quoted(f.name).ch(':').num(s.*f.member).ch(',');
  w.str("\"max_map_count\":").num(s.max_map_count);
  w.str(",\"transparent_hugepages\":").quoted(s.thp_mode).str("},\"caches\":[");
  for (int i = 0; i < ChunkMgrStats::SLOT_LINES; ++i) {
    const ChunkSlotStats& slot = s.slots[i];
    w.str(i == 0 ? "{" : ",{").str("\"size_mb\":").num(slot.size_mb);
    for (const ChunkSlotField& f : CHUNK_SLOT_FIELDS)
      w.ch(',').quoted(f.name).ch(':').num(slot.*f.member);
    w.ch('}');
  }
  w.str("]}\n");
  return w.length();
}

}  // namespace achunk
