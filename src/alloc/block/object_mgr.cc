#include "alloc/block/object_mgr.h"

#include "achunk/base/tls.h"

namespace achunk {

namespace {
// The shard this thread last locked, in whichever set: where its next try starts.
ACHUNK_TLS uint8_t tl_shard_hint;
}  // namespace

namespace {
SubObjectMgr& acquired(SubObjectMgr& s) {
  s.acquired_.store(s.acquired_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return s;
}
}  // namespace

SubObjectMgr& ObjectMgr::lock_any() {
  const int n = open_shards();
  // No division on this path: every big object and slab refill comes through here.
  const int start = tl_shard_hint < n ? tl_shard_hint : 0;
  if (shards_[start].lock_.try_lock()) return acquired(shards_[start]);
  for (int s = start + 1 == n ? 0 : start + 1; s != start; s = s + 1 == n ? 0 : s + 1) {
    if (shards_[s].lock_.try_lock()) {
      tl_shard_hint = static_cast<uint8_t>(s);
      return acquired(shards_[s]);
    }
  }
  return lock_contended(n, start);
}

uint64_t ObjectMgr::acquisitions() const {
  uint64_t total = 0;
  for (int i = 0, n = open_shards(); i < n; ++i) {
    total += shards_[i].acquired_.load(std::memory_order_relaxed);
  }
  return total;
}

SubObjectMgr& ObjectMgr::lock_contended(int n, int start) {
  // Every open shard is busy. Once a window has OPEN_AFTER_COLLISIONS collisions, open one
  // more if they came at least one in ACQUISITIONS_PER_COLLISION lockings (the winner of
  // the race takes it), else start a new window; then wait for this thread's last shard.
  const int collisions = collisions_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n < max_open_ && collisions >= open_after_) {
    const uint64_t now = acquisitions();
    const uint64_t since = now - window_start_.load(std::memory_order_relaxed);
    const bool lasting = since <= static_cast<uint64_t>(collisions) * ACQUISITIONS_PER_COLLISION;
    collisions_.store(0, std::memory_order_relaxed);
    window_start_.store(now, std::memory_order_relaxed);
    while (lasting && n < max_open_) {
      if (open_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel)) {
        shards_[n].lock_.lock();
        tl_shard_hint = static_cast<uint8_t>(n);
        return acquired(shards_[n]);
      }
    }
  }
  shards_[start].lock_.lock();
  return acquired(shards_[start]);
}

void ObjectMgr::visit_fork_locks(ForkLockVisitor& v) {
  for (SubObjectMgr& s : shards_) v.visit(s.lock_, "object_mgr.shard");
}

}  // namespace achunk
