#include "achunk/chunk/achunk_mgr.h"

#include <errno.h>

#include <algorithm>
#include <mutex>
#include <new>

#include "achunk/base/error_report.h"
#include "achunk/base/tls.h"
#include "achunk/chunk/chunk_registry.h"

namespace achunk {

namespace {

ACHUNK_TLS int tl_way = -1;
std::atomic<int> g_next_way{0};

void bump(std::atomic<int64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

int AChunkMgr::thread_way() {
  if (tl_way < 0) {
    tl_way = g_next_way.fetch_add(1, std::memory_order_relaxed) % NORMAL_ACHUNK_NWAY;
  }
  return tl_way;
}

int AChunkMgr::slot_index(int64_t aligned, int way) {
  if (aligned <= ACHUNK_ALIGN) return way;
  if (aligned > MAX_LARGE_ACHUNK_SIZE) return HUGE_SLOT;
  return static_cast<int>((aligned - 1) / ACHUNK_ALIGN) - 1 + NORMAL_ACHUNK_NWAY;
}

AChunkMgr::AChunkMgr(Os& os, const Clock& clock) : os_(os), clock_(clock) {
  slots_[HUGE_SLOT].free_list_.set_max_count(HUGE_CACHE_MAX);
}

AChunkMgr::~AChunkMgr() {
  sync_wash();
}

bool AChunkMgr::try_inc_hold(int64_t bytes) {
  const int64_t limit = limit_.load(std::memory_order_relaxed);
  // Pre-check without writing, so a request that cannot fit does not disturb others.
  if (hold_.load(std::memory_order_relaxed) + bytes > limit) return false;
  if (hold_.fetch_add(bytes, std::memory_order_relaxed) + bytes > limit) {
    dec_hold(bytes);
    return false;
  }
  return true;
}

bool AChunkMgr::charge_or_flush(int64_t bytes) {
  if (try_inc_hold(bytes)) return true;
  // Over the soft limit: sacrifice the cache, largest chunks first, before failing.
  bool charged = false;
  release_cached_until([&] { return charged || (charged = try_inc_hold(bytes)); });
  return charged;
}

AChunk* AChunkMgr::fail(AllocFailKind kind, int64_t size, int sys_errno) {
  set_alloc_failure(AllocFailure{kind, sys_errno, size, get_hold(), get_limit()});
  return nullptr;
}

AChunk* AChunkMgr::alloc_chunk(int64_t size, int64_t head_align) {
  if (size <= 0 || size > ACHUNK_MAX_ALLOC_SIZE) {
    return fail(AllocFailKind::INVALID_SIZE, size, 0);
  }
  const int64_t aligned = chunk_aligned_size(size);
  const int64_t hold = chunk_hold_size(size);
  if (head_align > ACHUNK_ALIGN &&
      ((head_align & (head_align - 1)) != 0 || head_align > ACHUNK_MAX_ALLOC_SIZE)) {
    return fail(AllocFailKind::INVALID_ARGUMENT, size, 0);
  }
  const int idx = slot_index(aligned, thread_way());
  if (above_normal(idx)) {
    const int64_t n = large_requests_.fetch_add(1, std::memory_order_relaxed) + 1;
    slots_[idx].asked_at_.store(n, std::memory_order_relaxed);
    slots_[idx].asked_us_.store(clock_.now_us(), std::memory_order_relaxed);
  }
  if (head_align > ACHUNK_ALIGN) return alloc_placed(size, aligned, hold, idx, head_align);
  int from = idx;
  AChunk* cached = idx == HUGE_SLOT ? nullptr : pop_chunk_with_size(idx);
  // Best fit: a large or huge request may take a bigger cached chunk as it is (the tail's
  // pages stay with it: see charged_): one of the next large size up to a quarter bigger,
  // else the smallest huge one up to twice its size. Twice only for huge chunks: a
  // stationary mix of large sizes would see its small requests take its big chunks.
  if (cached == nullptr && above_normal(idx)) {
    if (idx + 1 < HUGE_SLOT && 4 * slot_bytes(idx + 1) <= 5 * aligned) {
      from = idx + 1;
      cached = pop_chunk_with_size(from);
    }
    if (cached == nullptr && (cached = pop_huge(aligned, 2 * aligned, false, 0)) != nullptr) {
      from = HUGE_SLOT;
    }
  }
  if (cached != nullptr) {
    if (AChunk* chunk = reuse_cached(cached, from, size, hold)) return chunk;
    return map_new_chunk(size, aligned, hold, idx);
  }
  // No chunk of about this size: a cached large or huge chunk of another size is resized
  // to it, its pages kept, rather than a new mapping faulted in beside it (a shrink gives
  // the tail back at once).
  if (aligned > ACHUNK_ALIGN) {
    if (AChunk* cached = pop_nearest_large(idx, aligned, &from)) {
      if (AChunk* resized = resize_cached(cached, from, aligned)) {
        if (AChunk* chunk = reuse_cached(resized, from, size, hold)) return chunk;
      }
      return map_new_chunk(size, aligned, hold, idx);
    }
  }
  bump(slots_[idx].misses_);
  return map_new_chunk(size, aligned, hold, idx);
}

AChunk* AChunkMgr::alloc_placed(int64_t size, int64_t aligned, int64_t hold, int idx,
                                int64_t head_align) {
  // A cached chunk that happens to sit where the request must (one placed for this
  // alignment or a larger one, freed), among the newest few of its size, as the plain
  // path's best fit would take it: of this size or the next large one up to a quarter
  // bigger, or a huge one up to twice the size.
  int from = idx;
  AChunk* cached = nullptr;
  if (idx == HUGE_SLOT) {
    cached = slots_[idx].free_list_.pop_placed(aligned, 2 * aligned, head_align, PLACED_LOOK);
  } else {
    cached = slots_[idx].free_list_.pop_placed(0, INT64_MAX, head_align, PLACED_LOOK);
    if (cached == nullptr && is_large(idx) && idx + 1 < HUGE_SLOT &&
        4 * slot_bytes(idx + 1) <= 5 * aligned) {
      from = idx + 1;
      cached = slots_[from].free_list_.pop_placed(0, INT64_MAX, head_align, PLACED_LOOK);
    }
  }
  if (cached != nullptr) {
    uncache(cached, from);
    if (AChunk* chunk = reuse_cached(cached, from, size, hold)) return chunk;
  } else {
    bump(slots_[idx].misses_);
  }
  return map_new_chunk(size, aligned, hold, idx, head_align - ACHUNK_ALIGN);
}

bool AChunkMgr::drop_lead(AChunk* chunk) {
  const int64_t lead = chunk->lead_;
  if (os_.unmap_head(reinterpret_cast<char*>(chunk) - lead, lead, chunk->aligned()) != 0) {
    return false;
  }
  total_hold_.fetch_sub(lead, std::memory_order_relaxed);
  chunk->lead_ = 0;
  return true;
}

AChunk* AChunkMgr::pop_huge(int64_t min_bytes, int64_t max_bytes, bool largest,
                            int64_t min_age_us) {
  AChunk* chunk = slots_[HUGE_SLOT].free_list_.pop_sized(min_bytes, max_bytes, largest,
                                                         clock_.now_us(), min_age_us);
  if (chunk != nullptr) uncache(chunk, HUGE_SLOT);
  return chunk;
}

AChunk* AChunkMgr::pop_nearest_large(int idx, int64_t aligned, int* from) {
  // For a large request, only a chunk idle for RESIZE_MIN_IDLE_US, or any chunk of an
  // unasked size (see RESIZE_UNASKED_REQUESTS): a size the workload still asks for is
  // reused as it is, never converted back and forth (each conversion faults pages in),
  // while the sizes a drifting mix left behind serve the new ones at once. A huge request
  // has no size of its own in the cache: any will do.
  const int64_t now = clock_.now_us();
  const int64_t asks = large_requests_.load(std::memory_order_relaxed);
  auto min_age = [&](int i) {
    const bool unasked =
        idx == HUGE_SLOT ||
        (asks - slots_[i].asked_at_.load(std::memory_order_relaxed) >= RESIZE_UNASKED_REQUESTS &&
         now - slots_[i].asked_us_.load(std::memory_order_relaxed) >= RESIZE_UNASKED_US);
    return unasked ? 0 : RESIZE_MIN_IDLE_US;
  };
  auto pop_idle = [&](int i) {
    AChunk* chunk = slots_[i].free_list_.pop_idle(now, min_age(i));
    if (chunk != nullptr) uncache(chunk, i);
    return chunk;
  };
  // The smallest bigger chunk (the shrink unmaps the least), else the biggest smaller one.
  for (int i = idx + 1; i < HUGE_SLOT; ++i) {
    if (AChunk* chunk = pop_idle(i)) {
      *from = i;
      return chunk;
    }
  }
  *from = HUGE_SLOT;
  if (AChunk* chunk = pop_huge(aligned + 1, INT64_MAX, false, min_age(HUGE_SLOT))) return chunk;
  if (idx == HUGE_SLOT) {
    if (AChunk* chunk = pop_huge(0, aligned - 1, true, 0)) return chunk;
  }
  for (int i = std::min(idx, HUGE_SLOT) - 1; i >= NORMAL_ACHUNK_NWAY; --i) {
    if (AChunk* chunk = pop_idle(i)) {
      *from = i;
      return chunk;
    }
  }
  return nullptr;
}

AChunk* AChunkMgr::pop_chunk_with_size(int idx) {
  if (is_large(idx)) {
    AChunk* chunk = slots_[idx].free_list_.pop();
    if (chunk != nullptr) uncache(chunk, idx);
    return chunk;
  }
  // A normal chunk prefers the thread's own way, then any other.
  for (int k = 0; k < NORMAL_ACHUNK_NWAY; ++k) {
    const int way = (idx + k) % NORMAL_ACHUNK_NWAY;
    if (AChunk* chunk = slots_[way].free_list_.pop()) {
      uncache(chunk, way);
      return chunk;
    }
  }
  return nullptr;
}

AChunk* AChunkMgr::reuse_cached(AChunk* chunk, int idx, int64_t size, int64_t hold) {
  // A large chunk keeps its mapping size but may have charged fewer pages than this
  // request needs (more it keeps charged: see charged_).
  const int64_t charged = chunk->charged();
  if (hold > charged && !try_inc_hold(hold - charged)) {
    bump(slots_[idx].failed_reuses_);
    unmap_chunk(chunk, idx);
    return nullptr;
  }
  chunk->charged_ = std::max(hold, charged);
  chunk->alloc_bytes_ = size;
  chunk->fresh_ = false;
  chunk->tail_kept_ = false;
  chunk->magic_.store(AChunk::MAGIC_CODE, std::memory_order_relaxed);
  chunk_registry::add(chunk);
  return chunk;
}

AChunk* AChunkMgr::map_new_chunk(int64_t size, int64_t aligned, int64_t hold, int idx,
                                 int64_t lead) {
  if (!charge_or_flush(hold)) return fail(AllocFailKind::SERVER_LIMIT, size, 0);
  int err = 0;
  // With a lead, the mapping starts at a multiple of lead + 2 MiB and the chunk `lead`
  // bytes into it, so the chunk's second 2 MiB unit starts at that multiple.
  const int64_t map_bytes = aligned + lead;
  const int64_t map_align = lead > 0 ? lead + ACHUNK_ALIGN : ACHUNK_ALIGN;
  void* p = os_.map_aligned(map_bytes, map_align, &err);
  if (p == nullptr) {
    // Physical memory or map count ran out: flush the cache once and retry.
    dec_hold(hold);
    sync_wash();
    if (!try_inc_hold(hold)) return fail(AllocFailKind::SERVER_LIMIT, size, 0);
    p = os_.map_aligned(map_bytes, map_align, &err);
    if (p == nullptr) {
      dec_hold(hold);
      return fail(AllocFailKind::PHYSICAL_MEMORY_EXHAUST, size, err);
    }
  }
  if (!chunk_registry::covers(static_cast<char*>(p) + lead)) {
    // Above the address range the registry covers: frees could not be checked.
    [[maybe_unused]] const int rc = os_.unmap(p, map_bytes);
    dec_hold(hold);
    return fail(AllocFailKind::PHYSICAL_MEMORY_EXHAUST, size, ENOMEM);
  }
  bump(slots_[idx].maps_);
  if (aligned > MAX_LARGE_ACHUNK_SIZE) bump(live_huge_);
  total_hold_.fetch_add(map_bytes, std::memory_order_relaxed);
  AChunk* chunk = new (static_cast<char*>(p) + lead) AChunk();
  chunk->lead_ = lead;
  chunk_registry::add(chunk);
  chunk->alloc_bytes_ = size;
  chunk->charged_ = hold;
  chunk->mapped_ = aligned;
  chunk->fresh_ = true;
  if (listener_.load(std::memory_order_relaxed) != nullptr) notify(clock_.now_us());
  return chunk;
}

void AChunkMgr::free_chunk(AChunk* chunk) {
  if (chunk == nullptr) return;
  if ((reinterpret_cast<uintptr_t>(chunk) & (ACHUNK_ALIGN - 1)) != 0) {
    report_error(ErrorKind::INVALID_FREE, chunk, "not the start of a chunk (not 2 MiB aligned)");
    return;
  }
  if (!chunk_registry::is_chunk(chunk)) {
    if (chunk_registry::was_released(chunk)) {
      report_error(ErrorKind::DOUBLE_FREE, chunk, "chunk is already free (cached or unmapped)");
    } else {
      report_error(ErrorKind::INVALID_FREE, chunk, "no chunk achunk mapped starts there");
    }
    return;
  }
  // A load and a store, not a CAS: a locked instruction here would cost more than the
  // rest of a cache hit. Every sequential double free is caught; two threads freeing
  // one chunk at the same instant may both pass.
  const uint32_t magic = chunk->magic_.load(std::memory_order_relaxed);
  if (magic != AChunk::MAGIC_CODE) {
    if (magic == AChunk::CACHED_CODE) {
      report_error(ErrorKind::DOUBLE_FREE, chunk, "chunk is already free in the chunk cache");
    } else {
      report_error(ErrorKind::INVALID_FREE, chunk, "no live chunk header (bad magic)");
    }
    return;
  }
  chunk->magic_.store(AChunk::CACHED_CODE, std::memory_order_relaxed);
  chunk_registry::remove(chunk);
  const int64_t hold = chunk->charged();
  const int idx = slot_index(chunk->aligned(), thread_way());
  const int64_t now = clock_.now_us();
  // A placed chunk is cached as any other, its lead unmapped: it stays where it was
  // placed, for the next request of that alignment (alloc_placed), or of none.
  if (chunk->lead_ > 0 && !drop_lead(chunk)) {
    unmap_chunk(chunk, idx);
  } else if (idx == HUGE_SLOT) {
    cache_huge(chunk, now);
  } else if (!try_cache(chunk, idx, hold, now)) {
    unmap_chunk(chunk, idx);
  }
  maybe_evict_one(now);
  notify(now);
}

void AChunkMgr::cache_huge(AChunk* chunk, int64_t now_us) {
  // Whole, its pages kept: a loop of huge buffers faults nothing after its first round.
  if (try_cache(chunk, HUGE_SLOT, chunk->charged(), now_us)) return;
  // Else the largest slot keeps the first MAX_LARGE_ACHUNK_SIZE bytes and their pages, so the
  // next big request grows them (resize_cached) rather than faulting in a whole new
  // mapping; the rest is unmapped now.
  constexpr int TOP = HUGE_SLOT - 1;
  // A cap whose large share cannot take it anyway skips the shrink.
  if (use_large_chunk_cache_.load(std::memory_order_relaxed) &&
      max_chunk_cache_size_.load(std::memory_order_relaxed) / 2 >= MAX_LARGE_ACHUNK_SIZE) {
    AChunk* kept = resize_cached(chunk, HUGE_SLOT, MAX_LARGE_ACHUNK_SIZE);
    if (kept == nullptr) return;  // resize_cached unmapped it
    if (try_cache(kept, TOP, kept->charged(), now_us)) return;
    chunk = kept;
  }
  unmap_chunk(chunk, HUGE_SLOT);
}

bool AChunkMgr::try_cache(AChunk* chunk, int idx, int64_t hold, int64_t now_us) {
  const int64_t cap = max_chunk_cache_size_.load(std::memory_order_relaxed);
  // An explicit cap (below the limit) is checked and the push made under one lock, so
  // concurrent frees cannot overshoot it; with the adaptive cap frees never meet here.
  std::unique_lock<SpinLock> cap_guard(cap_lock_, std::defer_lock);
  if (cap < get_limit()) {
    cap_guard.lock();
    if (get_freelist_hold() + hold > cap) return false;
  }
  const bool large = above_normal(idx);
  if (large) {
    // Reference rule: large chunks may take at most half of the remaining budget. The
    // chunk being freed no longer counts as used.
    const int64_t budget = std::min(get_limit() - (get_used() - hold), cap) / 2;
    if (large_cache_hold_.fetch_add(hold, std::memory_order_relaxed) + hold > budget) {
      large_cache_hold_.fetch_sub(hold, std::memory_order_relaxed);
      return false;
    }
  }
  if (!slots_[idx].free_list_.push(chunk, now_us)) {
    if (large) large_cache_hold_.fetch_sub(hold, std::memory_order_relaxed);
    return false;
  }
  if (idx == HUGE_SLOT) live_huge_.fetch_sub(1, std::memory_order_relaxed);
  // push stamped at least now_us, so now_us is a valid lower bound for the hint.
  int64_t earliest = earliest_cache_ts_.load(std::memory_order_relaxed);
  while (now_us < earliest &&
         !earliest_cache_ts_.compare_exchange_weak(earliest, now_us, std::memory_order_relaxed)) {
  }
  return true;
}

void AChunkMgr::uncache(AChunk* chunk, int idx) {
  if (above_normal(idx)) large_cache_hold_.fetch_sub(chunk->charged(), std::memory_order_relaxed);
  // Out of the cache, a huge chunk counts as live until unmap_chunk or a shrink says not.
  if (idx == HUGE_SLOT) live_huge_.fetch_add(1, std::memory_order_relaxed);
}

int64_t AChunkMgr::get_freelist_hold() const {
  int64_t sum = 0;
  for (int idx = 0; idx < CACHEABLE_SLOTS; ++idx) sum += slots_[idx].free_list_.hold();
  return sum;
}

void AChunkMgr::unmap_chunk(AChunk* chunk, int idx) {
  const int64_t lead = chunk->lead_;
  const int64_t map_bytes = chunk->aligned() + lead;
  const int64_t hold = chunk->charged();
  chunk->magic_.store(0, std::memory_order_relaxed);
  chunk_registry::remove(chunk);
  // A failed munmap (ENOMEM when it would split a mapping past vm.max_map_count) leaves
  // the range mapped, but it is unreachable either way, so accounting treats it as gone.
  [[maybe_unused]] const int rc = os_.unmap(reinterpret_cast<char*>(chunk) - lead, map_bytes);
  bump(slots_[idx].unmaps_);
  if (map_bytes - lead > MAX_LARGE_ACHUNK_SIZE) live_huge_.fetch_sub(1, std::memory_order_relaxed);
  total_hold_.fetch_sub(map_bytes, std::memory_order_relaxed);
  dec_hold(hold);
}

int64_t AChunkMgr::sync_wash() {
  int64_t released = 0;
  for (int idx = 0; idx < CACHEABLE_SLOTS; ++idx) {
    AChunk* chunk = slots_[idx].free_list_.popall();
    while (chunk != nullptr) {
      AChunk* next = chunk->next_;
      released += chunk->charged();
      uncache(chunk, idx);
      unmap_chunk(chunk, idx);
      chunk = next;
    }
  }
  return released;
}

}  // namespace achunk
