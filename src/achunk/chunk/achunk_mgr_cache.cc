// AChunkMgr's cache policy: caps, limits, the idle TTL and the eviction that runs at the
// end of free_chunk.
#include <algorithm>
#include <mutex>

#include "achunk/chunk/achunk_mgr.h"

namespace achunk {

void AChunkMgr::set_memory_limit(int64_t bytes) {
  const int64_t limit = bytes <= 0 ? INT64_MAX : bytes;
  limit_.store(limit, std::memory_order_relaxed);
  // An adaptive cache follows the limit.
  set_max_chunk_cache_size(memory_chunk_cache_size_.load(std::memory_order_relaxed),
                           use_large_chunk_cache_.load(std::memory_order_relaxed));
  release_cached_until([&] { return get_hold() <= limit; });
}

void AChunkMgr::set_max_chunk_cache_size(int64_t bytes, bool use_large_chunk_cache) {
  const int64_t configured = std::max<int64_t>(bytes, 0);
  const int64_t cap = configured == 0 ? get_limit() : configured;
  memory_chunk_cache_size_.store(configured, std::memory_order_relaxed);
  max_chunk_cache_size_.store(cap, std::memory_order_relaxed);
  use_large_chunk_cache_.store(use_large_chunk_cache, std::memory_order_relaxed);
  // Wait out frees that are checking against the old cap right now.
  { std::lock_guard<SpinLock> barrier(cap_lock_); }
  for (int idx = NORMAL_ACHUNK_NWAY; idx <= HUGE_SLOT; ++idx) {
    slots_[idx].free_list_.set_max_hold(use_large_chunk_cache ? INT64_MAX : 0);
    if (use_large_chunk_cache) continue;
    while (AChunk* chunk = slots_[idx].free_list_.pop_oldest()) {
      uncache(chunk, idx);
      unmap_chunk(chunk, idx);
    }
  }
  release_cached_until([&] { return get_freelist_hold() <= cap; });
}

void AChunkMgr::set_chunk_cache_ttl_ms(int64_t ms) {
  ttl_us_.store(ms < 0 ? -1 : ms * 1000, std::memory_order_relaxed);
}

int64_t AChunkMgr::get_chunk_cache_ttl_ms() const {
  const int64_t ttl = ttl_us_.load(std::memory_order_relaxed);
  return ttl < 0 ? -1 : ttl / 1000;
}

void AChunkMgr::apply_options(const Options& opts) {
  set_chunk_cache_ttl_ms(opts[OPT_CHUNK_CACHE_TTL_MS]);
  memory_chunk_cache_size_.store(opts[OPT_MEMORY_CHUNK_CACHE_SIZE], std::memory_order_relaxed);
  use_large_chunk_cache_.store(opts[OPT_LARGE_CHUNK_CACHE] != 0, std::memory_order_relaxed);
  // Applies the cache settings just stored against the new limit.
  set_memory_limit(opts[OPT_MEMORY_LIMIT]);
}

void AChunkMgr::apply_option(OptionId id, const Options& opts) {
  switch (id) {
    case OPT_MEMORY_LIMIT:
      set_memory_limit(opts[OPT_MEMORY_LIMIT]);
      break;
    case OPT_MEMORY_CHUNK_CACHE_SIZE:
    case OPT_LARGE_CHUNK_CACHE:
      set_max_chunk_cache_size(opts[OPT_MEMORY_CHUNK_CACHE_SIZE], opts[OPT_LARGE_CHUNK_CACHE] != 0);
      break;
    case OPT_CHUNK_CACHE_TTL_MS:
      set_chunk_cache_ttl_ms(opts[OPT_CHUNK_CACHE_TTL_MS]);
      break;
    default:
      break;
  }
}

void AChunkMgr::maybe_evict_one(int64_t now_us) {
  const int64_t ttl = ttl_us_.load(std::memory_order_relaxed);
  // The common case: nothing can have expired yet; one load, no lock, no write.
  if (ttl < 0 || now_us - earliest_cache_ts_.load(std::memory_order_relaxed) < ttl) return;
  // Another thread is evicting: skip rather than wait; the next free will look again.
  if (!evicting_.try_lock()) return;
  evict_one_expired(now_us, ttl);
  evicting_.unlock();
}

int64_t AChunkMgr::release_expired() {
  const int64_t ttl = ttl_us_.load(std::memory_order_relaxed);
  if (ttl < 0) return 0;
  if (!evicting_.try_lock()) return 0;
  const int64_t now = clock_.now_us();
  int64_t released = 0;
  while (evict_one_expired(now, ttl)) ++released;
  evicting_.unlock();
  return released;
}

bool AChunkMgr::evict_one_expired(int64_t now_us, int64_t ttl_us) {
  int64_t earliest = AChunkList::EMPTY_TS;
  for (int k = 0; k < CACHEABLE_SLOTS; ++k) {
    const int idx = (cursor_ + k) % CACHEABLE_SLOTS;
    AChunkList& list = slots_[idx].free_list_;
    if (now_us - list.oldest_ts() >= ttl_us) {
      if (AChunk* chunk = list.pop_expired(now_us, ttl_us)) {
        // Resume after this slot, so one busy slot cannot starve the others.
        cursor_ = (idx + 1) % CACHEABLE_SLOTS;
        uncache(chunk, idx);
        unmap_chunk(chunk, idx);
        expired_unmaps_.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
    earliest = std::min(earliest, list.oldest_ts());
  }
  // A full rotation found nothing expired: raise the hint to the true minimum. A chunk
  // pushed while we scanned was stamped no earlier than shortly before now_us, so
  // capping at now_us keeps the hint a lower bound up to that scan's duration.
  earliest_cache_ts_.store(std::min(earliest, now_us), std::memory_order_relaxed);
  return false;
}

}  // namespace achunk

namespace achunk {

void AChunkMgr::visit_fork_locks(ForkLockVisitor& v) {
  // The evicting thread takes free-list locks under evicting_, never the other way round.
  v.visit(evicting_, "chunk_mgr.evicting");
  v.visit(cap_lock_, "chunk_mgr.cap");
  for (Slot& slot : slots_) slot.free_list_.visit_fork_locks(v);
}

}  // namespace achunk
