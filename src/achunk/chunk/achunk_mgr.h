// Chunk layer: AChunkMgr maps 2 MiB-aligned chunks, caches freed ones in slots (8 ways
// of 2 MiB, one slot per large size 4..20 MiB, and a huge slot that keeps up to 8 chunks
// above 20 MiB whole, served by best fit; a huge chunk it cannot take is shrunk into the
// 20 MiB slot), keeps the server's soft limit, evicts chunks that idled in the cache on
// later frees, and reports its counters. Depends on the platform (os.h, clock.h) and the
// chunk files.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/base/alloc_failure.h"
#include "achunk/base/options.h"
#include "achunk/base/spin_lock.h"
#include "achunk/chunk/achunk_header.h"
#include "achunk/chunk/achunk_list.h"
#include "achunk/chunk/chunk_stats.h"
#include "achunk/platform/clock.h"
#include "achunk/platform/os.h"

namespace achunk {

// Told about every free_chunk and every chunk alloc that maps: calls rare next to object
// calls, where a layer above does its periodic work (the live stats region). Called with
// no chunk lock held, but possibly with the caller's locks held.
class ChunkListener {
 public:
  virtual void on_chunk_call(int64_t now_us) = 0;

 protected:
  ~ChunkListener() = default;
};

class AChunkMgr {
 public:
  static constexpr int NORMAL_ACHUNK_NWAY = 8;
  static constexpr int LARGE_ACHUNK_NSLOT = 9;                               // 4, 6, ... 20 MiB
  static constexpr int HUGE_SLOT = NORMAL_ACHUNK_NWAY + LARGE_ACHUNK_NSLOT;  // > 20 MiB
  static constexpr int CACHEABLE_SLOTS = HUGE_SLOT + 1;
  static constexpr int SLOT_COUNT = CACHEABLE_SLOTS;
  // Chunks the huge slot caches: a huge request walks them for the best fit.
  static constexpr int HUGE_CACHE_MAX = 8;
  // Cached chunks of its size a request placed for an alignment looks at, newest first.
  static constexpr int PLACED_LOOK = 8;
  static constexpr int64_t MAX_LARGE_ACHUNK_SIZE = int64_t{20} << 20;
  static constexpr int64_t CACHE_EXPIRE_US = 30'000'000;
  // Cached chunks per slot whose resident pages get_stats measures (the rest count whole).
  static constexpr int RESIDENT_SAMPLE = 64;
  // A cached large chunk is resized for a request of another size only once it has been
  // idle this long, or once its size is unasked: neither the last RESIZE_UNASKED_REQUESTS
  // large or huge requests nor the last RESIZE_UNASKED_US asked for it (see
  // pop_nearest_large). Requests follow a drifting mix at its own pace; the time keeps a
  // fast loop over many sizes from converting a chunk at every miss.
  static constexpr int64_t RESIZE_MIN_IDLE_US = 100'000;
  static constexpr int64_t RESIZE_UNASKED_REQUESTS = 4;
  static constexpr int64_t RESIZE_UNASKED_US = 500;

  AChunkMgr(Os& os, const Clock& clock);
  // Unmaps every cached chunk. Chunks still handed out are the caller's leak.
  ~AChunkMgr();
  AChunkMgr(const AChunkMgr&) = delete;
  AChunkMgr& operator=(const AChunkMgr&) = delete;

  // A chunk whose data() has room for `size` bytes, or nullptr with the reason in
  // last_alloc_failure(). Reuses a cached chunk of the same mapped size when there is one,
  // else (a large or huge request) a bigger one: of the next large size up to 25% larger,
  // else the smallest huge chunk up to twice the size.
  // With `head_align` (a power of two above 2 MiB) the chunk's second 2 MiB unit starts
  // at a multiple of head_align: an object there is that aligned, and its header, just
  // below, is in the chunk's first unit. A cached chunk of about the size that sits so is
  // reused (alloc_placed), else a fresh mapping is placed so, starting head_align - 2 MiB
  // bytes before the chunk (AChunk::lead_: address space only, never touched nor
  // charged, unmapped when the chunk is freed and cached).
  AChunk* alloc_chunk(int64_t size, int64_t head_align = 0);
  // Resizes a chunk handed out to hold `size` payload bytes, keeping its contents: its
  // mapping grows (mremap) when its 2 MiB-aligned size grows, and may move. A shrink
  // keeps the mapping and its charge (see trim_chunk). Returns the chunk, maybe at a new
  // address, or nullptr with the reason in last_alloc_failure() and the chunk as it was.
  // A chunk still holding its lead (a fresh placed one) is refused. For a big object's
  // realloc: no copy.
  AChunk* resize_chunk(AChunk* chunk, int64_t size);
  // Gives back the tail a chunk handed out kept past its request when it shrank
  // (resize_chunk): unmaps the whole 2 MiB units past it, in place, releases the pages
  // of its last unit past the request, and stops charging them. Returns the bytes
  // unmapped and released, 0 when there is no such tail, -1 when the OS refused and
  // nothing changed. A refused release after an unmap leaves those pages charged. Its
  // owner calls it once the tail has stayed unused for its idle time.
  int64_t trim_chunk(AChunk* chunk);
  // Caches the chunk (or unmaps it when the cache is full), then unmaps at most one other
  // cached chunk that has idled for chunk_cache_ttl_ms. A pointer that is not a live
  // chunk is reported through report_error() and otherwise ignored.
  void free_chunk(AChunk* chunk);
  // Unmaps every cached chunk; returns the bytes released.
  int64_t sync_wash();
  // Unmaps every cached chunk that has idled for the TTL, not just one (for a host's own
  // timer or the drop-in malloc's opt-in release thread, when no frees arrive). Skips,
  // returning 0, if another thread is evicting. Returns the chunks unmapped.
  int64_t release_expired();
  // Gives the physical pages of a range inside a live chunk back to the OS (the range
  // stays mapped and reads as zero). For the block layer's wash of free spans. Returns 0
  // or the errno.
  int release_pages(void* addr, int64_t size) { return os_.release_pages(addr, size); }
  // The Os's process barrier, for the object layer's look at idle threads' slabs.
  bool process_barrier() { return os_.process_barrier(); }
  bool process_barrier_available() { return os_.process_barrier_available(); }
  // Os::resident_pages, for usage scans and calloc's zeroing (a syscall).
  int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) {
    return os_.resident_pages(addr, size, vec);
  }

  // 0 means no limit. Lowering it below hold() flushes cached chunks, largest first.
  void set_memory_limit(int64_t bytes);
  // 0 means adaptive (the cache may hold up to the memory limit). Shrinking releases the
  // surplus at once, largest and oldest chunks first.
  void set_max_chunk_cache_size(int64_t bytes, bool use_large_chunk_cache);
  // -1 disables idle eviction.
  void set_chunk_cache_ttl_ms(int64_t ms);
  // Applies every option the chunk layer owns (at start-up), or one of them (a change).
  void apply_options(const Options& opts);
  void apply_option(OptionId id, const Options& opts);

  int64_t get_limit() const { return limit_.load(std::memory_order_relaxed); }
  int64_t get_hold() const { return hold_.load(std::memory_order_relaxed); }
  int64_t get_total_hold() const { return total_hold_.load(std::memory_order_relaxed); }
  // Bytes cached, summed over the slots: exact when no free or alloc is in flight.
  int64_t get_freelist_hold() const;
  int64_t get_large_freelist_hold() const {
    return large_cache_hold_.load(std::memory_order_relaxed);
  }
  int64_t get_used() const { return get_hold() - get_freelist_hold(); }
  // Chunks mapped now, handed out or cached: maps less unmaps, summed over the slots.
  int64_t mapped_chunks() const;
  int64_t get_max_chunk_cache_size() const {
    return max_chunk_cache_size_.load(std::memory_order_relaxed);
  }
  int64_t get_expired_unmaps() const { return expired_unmaps_.load(std::memory_order_relaxed); }
  // Chunks above MAX_LARGE_ACHUNK_SIZE handed out now: mapped so, or grown so or taken
  // from the cache, and not yet freed, unmapped or shrunk.
  int64_t live_huge_chunks() const { return live_huge_.load(std::memory_order_relaxed); }
  int64_t get_chunk_cache_ttl_ms() const;
  // The injected clock's time and the span idle time in microseconds (negative: never),
  // for the block layer, which ages its free spans as this layer ages cached chunks.
  int64_t now_us() const { return clock_.now_us(); }
  // Chunks in slot `idx` (0..7 normal ways, 8..16 large sizes, 17 huge).
  int64_t cached_count(int idx) const { return slots_[idx].free_list_.count(); }

  // nullptr: none (the default).
  void set_listener(ChunkListener* listener) {
    listener_.store(listener, std::memory_order_release);
  }

  // Reads the OS figures too unless `with_os` is false.
  ChunkMgrStats get_stats(bool with_os = true) const;
  int64_t print(char* buf, int64_t len) const;
  int64_t print_json(char* buf, int64_t len) const;

  // Taken before fork() and released after it in both processes, so a child forked while
  // other threads allocate finds every lock free and every list whole.
  void visit_fork_locks(ForkLockVisitor& v);

  // Slot of a chunk whose mapped size is `aligned`; normal chunks use the given way.
  static int slot_index(int64_t aligned, int way);
  // The way the calling thread prefers for 2 MiB chunks.
  static int thread_way();

 private:
  struct alignas(64) Slot {
    AChunkList free_list_;
    std::atomic<int64_t> maps_{0};
    std::atomic<int64_t> unmaps_{0};
    std::atomic<int64_t> misses_{0};
    // Reuse pops the cache then had to unmap (the hold could not be reconciled); a hit
    // is a reuse pop that is not one of these.
    std::atomic<int64_t> failed_reuses_{0};
    // large_requests_, and the time, when a request last asked for this large size (0:
    // never).
    std::atomic<int64_t> asked_at_{0};
    std::atomic<int64_t> asked_us_{0};
  };

  static bool is_large(int idx) { return idx >= NORMAL_ACHUNK_NWAY && idx < HUGE_SLOT; }
  // Large or huge: what the large share of the cache budget (large_cache_hold_) counts.
  static bool above_normal(int idx) { return idx >= NORMAL_ACHUNK_NWAY; }
  // The mapped size of the chunks of large slot `idx`.
  static int64_t slot_bytes(int idx) { return (idx - NORMAL_ACHUNK_NWAY + 2) * ACHUNK_ALIGN; }

  bool try_inc_hold(int64_t bytes);
  void dec_hold(int64_t bytes) { hold_.fetch_sub(bytes, std::memory_order_relaxed); }
  AChunk* pop_chunk_with_size(int idx);
  AChunk* reuse_cached(AChunk* chunk, int idx, int64_t size, int64_t hold);
  // Pops a cached large or huge chunk for a request of slot idx (large or huge) and
  // mapped size `aligned` that its own sizes missed: the smallest bigger one, else the
  // biggest smaller one. O(slots + HUGE_CACHE_MAX).
  AChunk* pop_nearest_large(int idx, int64_t aligned, int* from);
  // alloc_chunk with a head_align above 2 MiB: a cached chunk of about the size, among
  // the newest PLACED_LOOK of its slot (and the next large one), whose second unit meets
  // head_align, else a fresh placed mapping. O(PLACED_LOOK).
  AChunk* alloc_placed(int64_t size, int64_t aligned, int64_t hold, int idx, int64_t head_align);
  // Unmaps a freed placed chunk's lead, leaving a plain chunk where it was placed; false
  // (the chunk as it was) when the unmap fails.
  bool drop_lead(AChunk* chunk);
  // From the huge slot, for reuse: a chunk of [min_bytes, max_bytes] (see pop_sized).
  AChunk* pop_huge(int64_t min_bytes, int64_t max_bytes, bool largest, int64_t min_age_us);
  // Resizes a cached chunk's mapping (Os::resize_aligned) to `aligned`; on failure it is
  // unmapped and nullptr returned.
  AChunk* resize_cached(AChunk* chunk, int from, int64_t aligned);
  // Os::resize_aligned of the chunk's mapping to `aligned`, with the counters that follow;
  // nullptr and *err on failure, the mapping as it was.
  AChunk* remap(AChunk* chunk, int64_t aligned, int* err);
  // Charges `bytes` to hold_, flushing the cache first when the limit is in the way.
  bool charge_or_flush(int64_t bytes);
  AChunk* map_new_chunk(int64_t size, int64_t aligned, int64_t hold, int idx, int64_t lead = 0);
  AChunk* fail(AllocFailKind kind, int64_t size, int sys_errno);
  bool try_cache(AChunk* chunk, int idx, int64_t hold, int64_t now_us);
  // A freed huge chunk: cached whole in the huge slot when it has room and the cache
  // takes it, else shrunk to the largest cached size and cached there, else unmapped.
  void cache_huge(AChunk* chunk, int64_t now_us);
  // Takes a chunk just popped from slot idx off the cache accounting.
  void uncache(AChunk* chunk, int idx);
  // munmap + every counter that follows from it.
  void unmap_chunk(AChunk* chunk, int idx);
  // Pops and unmaps cached chunks, largest slots and oldest chunks first, until
  // `done()` holds or the cache is empty.
  template <typename Done>
  void release_cached_until(Done done);
  void maybe_evict_one(int64_t now_us);
  void notify(int64_t now_us) {
    if (ChunkListener* l = listener_.load(std::memory_order_acquire)) l->on_chunk_call(now_us);
  }
  bool evict_one_expired(int64_t now_us, int64_t ttl_us);

  Os& os_;
  const Clock& clock_;
  std::atomic<int64_t> resizes_{0};       // cached chunks resized to serve another size
  std::atomic<int64_t> live_resizes_{0};  // chunks handed out resized (resize_chunk)
  std::atomic<int64_t> slack_trims_{0};   // kept tails unmapped (trim_chunk)
  std::atomic<int64_t> live_huge_{0};
  std::atomic<int64_t> large_requests_{0};  // large and huge requests so far
  Slot slots_[SLOT_COUNT];

  alignas(64) std::atomic<int64_t> limit_{INT64_MAX};
  std::atomic<int64_t> max_chunk_cache_size_{INT64_MAX};
  std::atomic<int64_t> memory_chunk_cache_size_{0};  // as configured; 0 = adaptive
  std::atomic<bool> use_large_chunk_cache_{true};
  std::atomic<int64_t> ttl_us_{CACHE_EXPIRE_US};

  alignas(64) std::atomic<int64_t> hold_{0};
  std::atomic<int64_t> total_hold_{0};
  // Cached bytes are counted per slot (each list's hold_), not in one shared counter, so
  // threads hitting their own ways share no written cache line. An explicit cap is
  // checked against the sum under cap_lock_; the adaptive cap needs no check because
  // the cache is part of hold_, which the limit already bounds.
  alignas(64) SpinLock cap_lock_;
  std::atomic<int64_t> large_cache_hold_{0};  // reserved before a large push

  // Lower bound of every cached chunk's cache_ts_, so the free path can tell that nothing
  // has expired with one relaxed load. Lowered by pushes, raised by eviction scans.
  alignas(64) std::atomic<int64_t> earliest_cache_ts_{AChunkList::EMPTY_TS};
  // One evicting thread at a time; others only try it and skip. Held for fork, so a child
  // never inherits it held (its eviction would be off for good) or a chunk mid-eviction.
  SpinLock evicting_;
  int cursor_ = 0;  // next slot the eviction scan examines; owned by the evicting_ holder
  std::atomic<int64_t> expired_unmaps_{0};
  std::atomic<ChunkListener*> listener_{nullptr};
};

template <typename Done>
inline void AChunkMgr::release_cached_until(Done done) {
  for (int idx = CACHEABLE_SLOTS - 1; idx >= 0; --idx) {
    while (!done()) {
      AChunk* chunk = slots_[idx].free_list_.pop_oldest();
      if (chunk == nullptr) break;
      uncache(chunk, idx);
      unmap_chunk(chunk, idx);
    }
  }
}

}  // namespace achunk
