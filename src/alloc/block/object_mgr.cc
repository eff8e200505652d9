#include "alloc/block/object_mgr.h"

#include "achunk/base/tls.h"

namespace achunk {

namespace {
// The shard this thread last locked, in whichever set: where its next try starts.
ACHUNK_TLS uint8_t tl_shard_hint;
}  // namespace

SubObjectMgr& ObjectMgr::lock_any() {
  int n = open_shards();
  // No division on this path: every big object and slab refill comes through here.
  const int start = tl_shard_hint < n ? tl_shard_hint : 0;
  if (shards_[start].lock_.try_lock()) return shards_[start];
  for (int s = start + 1 == n ? 0 : start + 1; s != start; s = s + 1 == n ? 0 : s + 1) {
    if (shards_[s].lock_.try_lock()) {
      tl_shard_hint = static_cast<uint8_t>(s);
      return shards_[s];
    }
  }
  // Every open shard is busy: open one more if there is room (the winner of the race
  // takes it), else wait for the one this thread used last.
  while (n < MAX_SHARDS) {
    if (open_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel)) {
      shards_[n].lock_.lock();
      tl_shard_hint = static_cast<uint8_t>(n);
      return shards_[n];
    }
  }
  shards_[start].lock_.lock();
  return shards_[start];
}

void ObjectMgr::visit_fork_locks(ForkLockVisitor& v) {
  for (SubObjectMgr& s : shards_) v.visit(s.lock_, "object_mgr.shard");
}

}  // namespace achunk
