// Block layer: ObjectMgr, the reference's sharding of an allocator's block layer. An
// ObjectSet's per-thread heaps already keep small objects apart; what threads still
// share is the BlockSet behind them (slab refills, big objects, lent spans, heaps), so
// that is split into up to MAX_SHARDS SubObjectMgrs {lock, BlockSet}. A thread keeps the
// shard it last locked without waiting and moves on when that one is busy; a shard is
// opened only when every open one is busy at once, so a set without contention works in
// one shard and holds no extra partly used chunks. A span is freed under the lock of the
// shard that owns its chunk (the chunk meta's context). Never allocates.
// Depends on block_set.h and the base layer's spin_lock.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

#include "achunk/base/fork_locks.h"
#include "achunk/base/spin_lock.h"
#include "alloc/block/block_set.h"

namespace achunk {

class ObjectSet;

struct SubObjectMgr {
  SubObjectMgr(ChunkSource& source, ObjectSet* set)
      : block_set_(source, this, BlockSet::OWNER_OBJECT_SET), set_(set) {}

  SpinLock lock_;  // guards block_set_
  BlockSet block_set_;
  ObjectSet* const set_;
};

class ObjectMgr {
 public:
  static constexpr int MAX_SHARDS = 8;

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
  SubObjectMgr& shard(int i) { return shards_[i]; }
  // f(BlockSet&) for every open shard, each under its lock.
  template <typename F>
  void for_each(F f);
  // The sum of f(BlockSet&) over the open shards, each under its lock.
  template <typename F>
  int64_t sum(F f) {
    int64_t total = 0;
    for_each([&](BlockSet& bs) { total += f(bs); });
    return total;
  }
  // fork(): every shard's lock held across the fork.
  void visit_fork_locks(ForkLockVisitor& v);

 private:
  template <size_t... I>
  ObjectMgr(ChunkSource& source, ObjectSet* set, std::index_sequence<I...>)
      : shards_{((void)I, SubObjectMgr(source, set))...} {}

  std::atomic<int> open_{1};
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

}  // namespace achunk
