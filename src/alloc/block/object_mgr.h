// Block layer: ObjectMgr, the reference's sharding of an allocator's block layer. An
// ObjectSet's per-thread heaps already keep small objects apart; what threads still
// share is the BlockSet behind them (slab refills, big objects, lent spans, heaps), so
// that is split into up to MAX_SHARDS SubObjectMgrs {lock, BlockSet}. A thread keeps the
// shard it last locked without waiting and moves on when that one is busy. Another shard
// opens only under lasting contention: every open shard found busy at once
// OPEN_AFTER_COLLISIONS times, at least one in ACQUISITIONS_PER_COLLISION lockings. A set
// that collides now and then (a lock holder preempted on an oversubscribed machine) works
// in one shard and holds no extra partly used chunks, each with its own high-water mark of
// resident pages; a set many cores refill at once still spreads out within milliseconds.
// At most one shard per usable CPU opens: threads collide only while running at once,
// and two threads taking big objects on 2 CPUs ran 2.2x slower in one shard. A span is
// freed under the lock of the shard that owns its chunk (the chunk meta's context).
// A usage scan visits the chunks one at a time, each under its shard's lock, so a heap of
// many live objects never holds a shard for the whole walk (for_each_chunk_in_turn).
// Never allocates.
// Depends on block_set.h, the base layer's spin_lock.h and the platform's usable_cpus.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

#include "achunk/base/fork_locks.h"
#include "achunk/base/spin_lock.h"
#include "achunk/platform/linux_os.h"
#include "alloc/block/block_set.h"

namespace achunk {

class ObjectSet;

struct SubObjectMgr {
  SubObjectMgr(ChunkSource& source, ObjectSet* set)
      : block_set_(source, this, BlockSet::OWNER_OBJECT_SET), set_(set) {}

  SpinLock lock_;  // guards block_set_
  // Lockings through ObjectMgr::lock_any; written under lock_, read by any thread.
  std::atomic<uint64_t> acquired_{0};
  BlockSet block_set_;
  ObjectSet* const set_;
};

class ObjectMgr {
 public:
  static constexpr int MAX_SHARDS = 8;
  static constexpr int OPEN_AFTER_COLLISIONS = 512;
  static constexpr int ACQUISITIONS_PER_COLLISION = 16;

  ObjectMgr(ChunkSource& source, ObjectSet* set)
      : ObjectMgr(source, set, std::make_index_sequence<MAX_SHARDS>()) {}
  ObjectMgr(const ObjectMgr&) = delete;
  ObjectMgr& operator=(const ObjectMgr&) = delete;

  // A shard, locked: the caller unlocks its lock_ when done.
  SubObjectMgr& lock_any();
  // The shard whose chunk holds `span` (any pointer into a span of one of the shards).
  static SubObjectMgr& shard_of(const void* span) {
    return *static_cast<SubObjectMgr*>(chunk_meta(AChunk::ptr2chunk(span))->context_);
  }
  int open_shards() const { return open_.load(std::memory_order_acquire); }
  // Times every open shard was busy at once, in the current window (see lock_any).
  int collisions() const { return collisions_.load(std::memory_order_relaxed); }
  // For tests: the collisions a window needs and the most shards that open.
  void set_contention_rule(int open_after, int max_open) {
    open_after_ = open_after;
    max_open_ = max_open;
  }
  int max_open() const { return max_open_; }
  // The most shards that open on a machine with `cpus` usable CPUs.
  static int max_open_for(int cpus) { return cpus < 1 ? 1 : cpus > MAX_SHARDS ? MAX_SHARDS : cpus; }
  SubObjectMgr& shard(int i) { return shards_[i]; }
  // f(BlockSet&) for every open shard, each under its lock.
  template <typename F>
  void for_each(F f);
  // f(BlockSet&, AChunk*) for every chunk of every open shard, the shard's lock held for
  // one chunk at a time and between(), which lets waiters in, called between the turns
  // (tests pass their own). The walk resumes after the chunk it visited last while no
  // chunk has left the shard since; else it starts over, skipping the chunks this scan
  // marked. A chunk the shard takes meanwhile may be missed. After MAX_SCAN_RESTARTS
  // restarts the rest of the shard is walked in one hold, so a scan costs O(chunks).
  // One scan at a time (scan_lock_).
  template <typename F, typename B>
  void for_each_chunk_in_turn(F f, B between);
  template <typename F>
  void for_each_chunk_in_turn(F f) {
    for_each_chunk_in_turn(f, [] { sched_yield(); });
  }
  static constexpr int MAX_SCAN_RESTARTS = 4;
  // The sum of f(BlockSet&) over the open shards, each under its lock.
  template <typename F>
  int64_t sum(F f) {
    int64_t total = 0;
    for_each([&](BlockSet& bs) { total += f(bs); });
    return total;
  }
  // Washes every free span of every open shard free for `min_free_us` or longer, the
  // madvise calls outside the shard locks (BlockSet::take_stale_spans): a thread that
  // allocates meanwhile never waits for them. Tails that dedicated chunks kept as long
  // are unmapped under the shard's lock (BlockSet::trim_idle_slack). The washer's lock,
  // which fork waits for, is held for one batch of WASH_BATCH spans (the time spans are off
  // the free lists) and let go between batches, where between(wash lock) runs (tests pass
  // their own): by default it hands the lock to a waiter, so a fork waits for one batch's
  // madvise calls, not the whole wash. Returns the bytes washed and unmapped.
  using BetweenBatches = void (*)(SpinLock& wash_lock);
  int64_t wash_stale_spans(int64_t min_free_us, BetweenBatches between = &yield_to_waiters);
  static void yield_to_waiters(SpinLock& lock) { lock.hand_off(HAND_OFF_YIELDS); }
  // The washer's longest wait for a woken waiter to take the lock: about a millisecond
  // of yields, the nap that ends a sleep whose wake was lost.
  static constexpr int HAND_OFF_YIELDS = 1000;
  static constexpr int WASH_BATCH = 16;
  // fork(): the washer's lock, then every shard's lock, held across the fork (so no span
  // is ever off the free lists for washing in a child).
  void visit_fork_locks(ForkLockVisitor& v);
  // In a forked child (the atfork child handler): a scan the parent was running is not
  // in the child, so its lock is let go (scan_lock_).
  void on_fork_child() { scan_lock_.reset_in_child(); }
  static constexpr int FORK_LOCKS = 1 + MAX_SHARDS;  // the locks visit_fork_locks visits

 private:
  template <size_t... I>
  ObjectMgr(ChunkSource& source, ObjectSet* set, std::index_sequence<I...>)
      : max_open_(max_open_for(usable_cpus())), shards_{((void)I, SubObjectMgr(source, set))...} {}

  // Lockings through lock_any over the open shards (racy reads of per-shard counts).
  uint64_t acquisitions() const;
  // The slow half of lock_any: every open shard (n of them) was busy.
  SubObjectMgr& lock_contended(int n, int start);

  // Where a scan of one shard stands.
  struct ScanCursor {
    uint64_t mark;           // this scan's, unique in the process
    AChunk* last = nullptr;  // the chunk it visited last
    uint64_t unlinks = 0;    // the shard's chunk_unlinks() then
    int restarts = 0;
  };
  static uint64_t next_scan_mark();
  // The shard's lock held: the next chunk of `bs` the scan has not visited, or nullptr.
  static AChunk* next_unvisited(const BlockSet& bs, ScanCursor& cursor);

  SpinLock wash_lock_;  // one batch of washing at a time; taken before any shard lock
  // One usage scan at a time (chunk marks); taken before any shard lock. Not waited for
  // by fork: a scan holds it through its whole walk, so a closed fork gate lets the scan
  // take its shard locks and the fork waits for the scan's end. A child that inherits it
  // held (its scanner is not there) resets it (on_fork_child); the marks the scan left on
  // its chunks are no later scan's.
  SpinLock scan_lock_{ForkRole::NOT_HELD};
  std::atomic<int> open_{1};
  // The window lock_any judges contention over: collisions since it began, and the
  // acquisitions count when it began.
  std::atomic<int> collisions_{0};
  std::atomic<uint64_t> window_start_{0};
  int open_after_ = OPEN_AFTER_COLLISIONS;
  int max_open_;
  SubObjectMgr shards_[MAX_SHARDS];
};

template <typename F>
void ObjectMgr::for_each(F f) {
  const int n = open_shards();
  for (int i = 0; i < n; ++i) {
    std::lock_guard<SpinLock> guard(shards_[i].lock_);
    f(shards_[i].block_set_);
  }
}

template <typename F, typename B>
void ObjectMgr::for_each_chunk_in_turn(F f, B between) {
  std::lock_guard<SpinLock> scanner(scan_lock_);
  const uint64_t mark = next_scan_mark();
  for (int i = 0, n = open_shards(); i < n; ++i) {
    SubObjectMgr& shard = shards_[i];
    BlockSet& bs = shard.block_set_;
    ScanCursor cursor{mark};
    for (bool more = true; more;) {
      {
        std::lock_guard<SpinLock> guard(shard.lock_);
        const bool rest = cursor.restarts >= MAX_SCAN_RESTARTS;
        do {
          AChunk* chunk = next_unvisited(bs, cursor);
          more = chunk != nullptr;
          if (!more) break;
          chunk_meta(chunk)->scan_mark_ = mark;
          f(bs, chunk);
          cursor.last = chunk;
          cursor.unlinks = bs.chunk_unlinks();
        } while (rest);
      }
      if (more) between();
    }
  }
}

}  // namespace achunk
