// Chunk layer: AChunkList, one cache slot's intrusive list of free chunks with its own
// lock, cap and counters. Reuse pops the newest chunk (LIFO) so a steady working set
// keeps recycling the same chunks, and idle eviction pops the oldest, so the surplus
// ages out. Depends on achunk_header.h and the base layer.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/base/fork_locks.h"
#include "achunk/base/spin_lock.h"
#include "achunk/chunk/achunk_header.h"

namespace achunk {

class AChunkList {
 public:
  static constexpr int64_t EMPTY_TS = INT64_MAX;

  explicit AChunkList(int64_t max_hold = INT64_MAX) : max_hold_(max_hold) {}
  AChunkList(const AChunkList&) = delete;
  AChunkList& operator=(const AChunkList&) = delete;

  // Caches `chunk`, stamping its cache_ts_ with `now_us`. Refuses (returns false) when
  // the list would hold more than its cap, in bytes or in chunks.
  bool push(AChunk* chunk, int64_t now_us);
  // The most recently cached chunk, for reuse (counted in reuses()), or nullptr.
  AChunk* pop();
  // The oldest chunk if it has been cached for at least `ttl_us`, else nullptr.
  AChunk* pop_expired(int64_t now_us, int64_t ttl_us) {
    return pop_oldest_if_older(now_us, ttl_us, false);
  }
  // The same, for reuse (counted in reuses()).
  AChunk* pop_idle(int64_t now_us, int64_t min_age_us) {
    return pop_oldest_if_older(now_us, min_age_us, true);
  }
  // For reuse: among the chunks cached for at least `min_age_us` whose mapped size is in
  // [min_bytes, max_bytes], the smallest (or, with `largest`, the largest); nullptr if
  // none. A walk of the list: for a slot whose count is capped (the huge slot).
  AChunk* pop_sized(int64_t min_bytes, int64_t max_bytes, bool largest, int64_t now_us,
                    int64_t min_age_us);
  // For reuse: among the `max_look` most recently cached chunks, the newest whose mapped
  // size is in [min_bytes, max_bytes] and whose second 2 MiB unit starts at a multiple of
  // `place_align` (a request placed for an alignment); nullptr if none. O(max_look).
  AChunk* pop_placed(int64_t min_bytes, int64_t max_bytes, int64_t place_align, int max_look);
  // The oldest chunk regardless of age, or nullptr.
  AChunk* pop_oldest() { return pop_expired(INT64_MAX, 0); }
  // Detaches every chunk; returns them as a nullptr-terminated chain through next_.
  AChunk* popall();

  // fork(): held across the fork so the child never inherits it mid-update.
  void visit_fork_locks(ForkLockVisitor& v) { v.visit(lock_, "chunk_mgr.free_list"); }

  void set_max_hold(int64_t bytes) { max_hold_.store(bytes, std::memory_order_relaxed); }
  void set_max_count(int64_t chunks) { max_count_ = chunks; }  // before any push
  int64_t max_hold() const { return max_hold_.load(std::memory_order_relaxed); }

  // Lock-free reads for statistics and the eviction check; exact when the list is quiet.
  int64_t hold() const { return hold_.load(std::memory_order_relaxed); }
  int64_t pushes() const { return pushes_.load(std::memory_order_relaxed); }
  int64_t pops() const { return pops_.load(std::memory_order_relaxed); }
  // Pops for reuse; counted under the lock so a cache hit costs no extra atomic RMW.
  int64_t reuses() const { return reuses_.load(std::memory_order_relaxed); }
  int64_t count() const { return pushes() - pops(); }
  bool empty() const { return head_ts_.load(std::memory_order_relaxed) == EMPTY_TS; }
  // cache_ts_ of the oldest chunk, EMPTY_TS when the list is empty.
  int64_t oldest_ts() const { return head_ts_.load(std::memory_order_relaxed); }
  // Calls f(AChunk*) for every cached chunk, under the list's lock (for dumps).
  template <typename F>
  void for_each(F f) const {
    lock_.lock();
    for (AChunk* chunk = head_; chunk != nullptr; chunk = chunk->next_) f(chunk);
    lock_.unlock();
  }
  // The address and mapped size of up to `cap` chunks, newest first, copied under the
  // lock so that the caller can look at them (a syscall each) without holding it, and in
  // *held the bytes those chunks count in hold(); the number copied.
  int snapshot(AChunk** chunks, int64_t* sizes, int cap, int64_t* held) const {
    int n = 0;
    *held = 0;
    lock_.lock();
    for (AChunk* chunk = tail_; chunk != nullptr && n < cap; chunk = chunk->prev_, ++n) {
      chunks[n] = chunk;
      sizes[n] = chunk->aligned();
      *held += chunk->charged();
    }
    lock_.unlock();
    return n;
  }

 private:
  AChunk* unlink_locked(AChunk* chunk);
  AChunk* pop_oldest_if_older(int64_t now_us, int64_t age_us, bool reuse);

  // Counters are written only under lock_, so a relaxed load-add-store suffices.
  static void add(std::atomic<int64_t>& c, int64_t d) {
    c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  }

  mutable SpinLock lock_;   // mutable: for_each reads under it
  AChunk* head_ = nullptr;  // oldest
  AChunk* tail_ = nullptr;  // newest
  std::atomic<int64_t> head_ts_{EMPTY_TS};
  std::atomic<int64_t> hold_{0};
  std::atomic<int64_t> pushes_{0};
  std::atomic<int64_t> pops_{0};
  std::atomic<int64_t> reuses_{0};
  std::atomic<int64_t> max_hold_;
  int64_t max_count_ = INT64_MAX;
};

}  // namespace achunk
