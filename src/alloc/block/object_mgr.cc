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

int64_t ObjectMgr::wash_stale_spans(int64_t min_free_us, BetweenBatches between) {
  int64_t washed = 0;
  for (int i = 0, n = open_shards(); i < n; ++i) {
    SubObjectMgr& shard = shards_[i];
    BlockSet& bs = shard.block_set_;
    const int64_t cutoff = bs.now_us() - min_free_us;
    {
      std::lock_guard<SpinLock> guard(shard.lock_);
      washed += bs.trim_idle_slack(cutoff);
    }
    for (bool failed = false; !failed;) {
      // No span is off the lists outside this hold, so a fork between batches is safe.
      std::unique_lock<SpinLock> washer(wash_lock_);
      ABlock* spans[WASH_BATCH];
      int taken;
      {
        std::lock_guard<SpinLock> guard(shard.lock_);
        taken = bs.take_stale_spans(cutoff, spans, WASH_BATCH);
      }
      if (taken == 0) break;
      bool ok[WASH_BATCH];
      for (int k = 0; k < taken; ++k) {
        const int64_t bytes = BlockSet::span_bytes(spans[k]);
        ok[k] = bs.release_pages(block_data(spans[k]), bytes) == 0;
        washed += ok[k] ? bytes : 0;
        failed = failed || !ok[k];  // the OS refuses: try again next time
      }
      {
        std::lock_guard<SpinLock> guard(shard.lock_);
        for (int k = 0; k < taken; ++k) bs.put_back_span(spans[k], ok[k]);
      }
      washer.unlock();
      between(wash_lock_);
    }
  }
  return washed;
}

uint64_t ObjectMgr::next_scan_mark() {
  static constinit std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

AChunk* ObjectMgr::next_unvisited(const BlockSet& bs, ScanCursor& cursor) {
  AChunk* chunk;
  if (cursor.last != nullptr && bs.chunk_unlinks() == cursor.unlinks) {
    chunk = cursor.last->next_;  // no chunk left: the last one is still on the list
  } else {
    if (cursor.last != nullptr) ++cursor.restarts;
    chunk = bs.first_chunk();
  }
  while (chunk != nullptr && chunk_meta(chunk)->scan_mark_ == cursor.mark) chunk = chunk->next_;
  return chunk;
}

void ObjectMgr::visit_fork_locks(ForkLockVisitor& v) {
  v.visit(wash_lock_, "object_mgr.wash");
  for (SubObjectMgr& s : shards_) v.visit(s.lock_, "object_mgr.shard");
}

}  // namespace achunk
