#include "alloc/object/thread_heap.h"

#include <algorithm>
#include <mutex>

namespace achunk {

void ThreadHeap::collect(Slab* slab) {
  void* list = slab->remote_free_.exchange(nullptr, std::memory_order_acquire);
  while (list != nullptr) {
    void* next = *static_cast<void**>(list);
    *static_cast<void**>(list) = slab->local_free_;
    slab->local_free_ = list;
    --slab->used_;
    list = next;
  }
}

void ThreadHeap::link(int sc, ABlock* block) {
  block->prev_ = nullptr;
  block->next_ = slabs_[sc];
  if (slabs_[sc] != nullptr) slabs_[sc]->prev_ = block;
  slabs_[sc] = block;
}

void ThreadHeap::unlink(int sc, ABlock* block) {
  if (block->prev_ != nullptr) {
    block->prev_->next_ = block->next_;
  } else {
    slabs_[sc] = block->next_;
  }
  if (block->next_ != nullptr) block->next_->prev_ = block->prev_;
  block->prev_ = block->next_ = nullptr;
  if (current_[sc] == block) current_[sc] = nullptr;
  if (spare_[sc] == block) spare_[sc] = nullptr;
}

void ThreadHeap::slab_emptied(ABlock* block, Slab* slab) {
  // The slab is this thread's, so this thread's heap of the slab's set is alive.
  ThreadHeap* heap = ObjectSet::owner_of(block)->existing_heap();
  if (heap != nullptr) heap->on_slab_empty(block, slab);
}

int64_t ThreadHeap::empty_big_slab_bytes(const ABlock* except) const {
  int64_t bytes = 0;
  // Classes up to 1 KiB all have 16 KiB slabs.
  for (int c = size_class_of(SIZE_CLASS_TABLE_MAX) + 1; c < SIZE_CLASS_COUNT; ++c) {
    if (slab_bytes(c) <= SPARE_SLAB_MAX) continue;
    const ABlock* current = current_[c];
    if (current != nullptr && current != except && slab_of(current_[c])->used_ == 0) {
      bytes += slab_bytes(c);
    }
    if (spare_[c] != nullptr && spare_[c] != except) bytes += slab_bytes(c);
  }
  return bytes;
}

void ThreadHeap::release(int sc, ABlock* block, bool wash) {
  unlink(sc, block);
  ObjectSet::free_span(block, wash);
}

ABlock* ThreadHeap::give_up_spares(ABlock* chain, int64_t* bytes) {
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    ABlock* block = spare_[sc];
    if (block == nullptr) continue;
    unlink(sc, block);
    slab_of(block)->owner_thread_.store(nullptr, std::memory_order_relaxed);
    block->next_ = chain;
    chain = block;
    *bytes += slab_bytes(sc);
  }
  return chain;
}

void ThreadHeap::trim() {
  empty_run_ = 0;
  // span_idle_ms -1 asks for no washing but when an allocation fails.
  if (set_->span_idle_us() < 0) return;
  draining_ = true;
  trimmed_us_ = set_->now_us();
  set_->heap_trims_.fetch_add(1, std::memory_order_relaxed);
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    for (ABlock* block = slabs_[sc]; block != nullptr;) {
      ABlock* next = block->next_;
      collect(slab_of(block));
      if (slab_of(block)->used_ == 0) release(sc, block);
      block = next;
    }
  }
  // Other heaps idle since the last look keep their spares for good otherwise: their
  // threads make no call either.
  set_->reclaim_idle_spares(this);
  // Then every dirty free span of the set, these slabs merged in (one madvise per span):
  // a server about to go quiet makes no later call to wash what its last second freed,
  // and trims are too rare (a few per connection's life, at most) to cost faults.
  set_->wash_free_spans();
}

void ThreadHeap::end_run() {
  empty_run_ = 0;
  draining_ = false;
  ++refill_mark_;
  if (trimmed_us_ < 0) return;
  const bool early = set_->now_us() - trimmed_us_ < set_->span_idle_us();
  trim_run_ = early ? std::min(trim_run_ * 2, TRIM_RUN_MAX) : std::max(trim_run_ / 2, TRIM_RUN);
  trimmed_us_ = -1;
}

void ThreadHeap::on_slab_empty(ABlock* block, Slab* slab) {
  std::lock_guard<SpinLock> guard(lock_);
  ++activity_;
  const int sc = slab->sc_;
  if (block == spare_[sc]) return;
  const bool current = block == current_[sc];
  if (draining_) {
    release(sc, block, true);
    return;
  }
  // A slab counts once per refill, so one cycling on its current slab counts once.
  if (slab->empty_mark_ != refill_mark_) {
    slab->empty_mark_ = refill_mark_;
    if (++empty_run_ >= trim_run_) {
      trim();
      if (draining_) return;  // the trim gave this slab back too
    }
  }
  if (!current && spare_[sc] != nullptr) {
    release(sc, block);
    return;
  }
  // The emptied current slab is parked as the spare (the older spare goes back: its pages
  // are the colder ones), and the next allocation of its class takes it back in
  // alloc_slow. Only so can another thread give back the empty slabs of a thread gone
  // idle: it may take spares under lock_, never a slab the fast path may be using.
  if (current) current_[sc] = nullptr;
  if (spare_[sc] != nullptr) release(sc, spare_[sc]);
  // A slab bigger than SPARE_SLAB_MAX stays only within the heap's EMPTY_BIG_SLAB_MAX, so
  // a thread cycling objects of one big class keeps its slab but an idle one holds little.
  if (slab_bytes(sc) > SPARE_SLAB_MAX &&
      empty_big_slab_bytes(block) + slab_bytes(sc) > EMPTY_BIG_SLAB_MAX) {
    release(sc, block);
    return;
  }
  spare_[sc] = block;
}

void* ThreadHeap::alloc_slow(int sc) {
  std::lock_guard<SpinLock> guard(lock_);
  ++activity_;
  end_run();
  ABlock* found = spare_[sc];
  spare_[sc] = nullptr;
  if (found != nullptr) return take(sc, found);
  // Gather other threads' frees on every slab of the class: keep the first slab with
  // room as current, give empty ones back (the current one stays, to avoid churn).
  for (ABlock* block = slabs_[sc]; block != nullptr;) {
    ABlock* next = block->next_;
    Slab* slab = slab_of(block);
    collect(slab);
    if (slab->used_ == 0 && found != nullptr && block != current_[sc]) {
      release(sc, block);
    } else if (found == nullptr && slab->local_free_ != nullptr) {
      found = block;
    }
    block = next;
  }
  // Freed slots before new pages: carving touches memory no object used yet.
  if (found == nullptr && current_[sc] != nullptr && ObjectSet::carve(current_[sc])) {
    found = current_[sc];
  }
  for (ABlock* block = slabs_[sc]; found == nullptr && block != nullptr; block = block->next_) {
    if (ObjectSet::carve(block)) found = block;
  }
  if (found == nullptr) {
    found = set_->adopt_slab(sc);
    if (found != nullptr) collect(slab_of(found));
    if (found == nullptr || (slab_of(found)->local_free_ == nullptr && !ObjectSet::carve(found))) {
      if (found != nullptr) link(sc, found);  // adopted but full: keep it, look further
      found = set_->new_slab(sc);
      if (found == nullptr) return nullptr;
    }
    link(sc, found);
  }
  return take(sc, found);
}

void* ThreadHeap::take(int sc, ABlock* block) {
  current_[sc] = block;
  Slab* slab = slab_of(block);
  void* p = slab->local_free_;
  slab->local_free_ = *static_cast<void**>(p);
  ++slab->used_;
  return p;
}

}  // namespace achunk
