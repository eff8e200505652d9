// AChunkMgr's statistics snapshot and dump.
#include <algorithm>

#include "achunk/chunk/achunk_mgr.h"

namespace achunk {

ChunkMgrStats AChunkMgr::get_stats(bool with_os) const {
  ChunkMgrStats s;
  s.limit = get_limit();
  s.hold = get_hold();
  s.total_hold = get_total_hold();
  s.freelists_hold = get_freelist_hold();
  s.used = s.hold - s.freelists_hold;
  s.large_freelists_hold = get_large_freelist_hold();
  s.expired_unmaps = get_expired_unmaps();
  s.max_chunk_cache_size = get_max_chunk_cache_size();
  s.chunk_cache_ttl_ms = get_chunk_cache_ttl_ms();
  s.cache_resizes = resizes_.load(std::memory_order_relaxed);
  s.live_resizes = live_resizes_.load(std::memory_order_relaxed);
  s.slack_trims = slack_trims_.load(std::memory_order_relaxed);
  for (int idx = 0; idx < SLOT_COUNT; ++idx) {
    const Slot& slot = slots_[idx];
    const int64_t maps = slot.maps_.load(std::memory_order_relaxed);
    const int64_t unmaps = slot.unmaps_.load(std::memory_order_relaxed);
    s.total_maps += maps;
    s.total_unmaps += unmaps;
    s.cache_hits += slot.free_list_.reuses() - slot.failed_reuses_.load(std::memory_order_relaxed);
    s.cache_misses += slot.misses_.load(std::memory_order_relaxed);
    if (idx == HUGE_SLOT) {
      s.huge_maps = maps;
      s.huge_unmaps = unmaps;
    }
    if (is_large(idx)) {
      s.large_maps += maps;
      s.large_unmaps += unmaps;
    }
    // Line 0 sums the 8 normal ways; line k>0 is the (2k+2) MiB slot; the last, the huge one.
    const int line = idx < NORMAL_ACHUNK_NWAY ? 0 : idx - NORMAL_ACHUNK_NWAY + 1;
    ChunkSlotStats& out = s.slots[line];
    out.size_mb = idx == HUGE_SLOT ? ChunkSlotStats::HUGE_LINE_MB : 2 * (line + 1);
    out.hold += slot.free_list_.hold();
    out.count += slot.free_list_.count();
    out.pushes += slot.free_list_.pushes();
    out.pops += slot.free_list_.pops();
    out.maps += maps;
    out.unmaps += unmaps;
  }
  if (with_os) {
    const OsMemoryInfo info = os_.memory_info();
    s.resident_size = info.resident_size;
    s.virtual_memory_used = info.virtual_memory_used;
    s.max_map_count = info.max_map_count;
    static_assert(sizeof(s.thp_mode) == sizeof(info.thp_mode));
    for (size_t i = 0; i < sizeof(s.thp_mode); ++i) s.thp_mode[i] = info.thp_mode[i];
    // What unmapping the cache would give back now: the pages the chunks kept, not their
    // size. A mincore per chunk, made without the slot's lock, so a housekeeping tick
    // never holds up an allocation: up to RESIDENT_SAMPLE chunks per slot are copied
    // under the lock and looked at after it; any more count whole. A chunk taken from the
    // cache meanwhile is still counted, as it was cached when copied.
    AChunk* chunks[RESIDENT_SAMPLE];
    int64_t sizes[RESIDENT_SAMPLE];
    for (int idx = 0; idx < CACHEABLE_SLOTS && s.cache_resident >= 0; ++idx) {
      const AChunkList& list = slots_[idx].free_list_;
      int64_t sampled_hold = 0;
      const int n = list.snapshot(chunks, sizes, RESIDENT_SAMPLE, &sampled_hold);
      for (int i = 0; i < n && s.cache_resident >= 0; ++i) {
        const int64_t r = os_.resident_bytes(chunks[i], sizes[i]);
        s.cache_resident = r < 0 ? -1 : s.cache_resident + r;
      }
      if (n == RESIDENT_SAMPLE && s.cache_resident >= 0) {
        s.cache_resident += std::max<int64_t>(0, list.hold() - sampled_hold);
      }
    }
  }
  return s;
}

int64_t AChunkMgr::mapped_chunks() const {
  int64_t n = 0;
  for (const Slot& slot : slots_) {
    n += slot.maps_.load(std::memory_order_relaxed) - slot.unmaps_.load(std::memory_order_relaxed);
  }
  return n;
}

int64_t AChunkMgr::print(char* buf, int64_t len) const {
  return print_chunk_stats(get_stats(), buf, len);
}

int64_t AChunkMgr::print_json(char* buf, int64_t len) const {
  return print_chunk_stats_json(get_stats(), buf, len);
}

}  // namespace achunk
