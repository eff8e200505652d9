// ThreadHeap's stash (its bins): per class, freed objects handed out again before the
// current slab's, and given back to their slabs by the owner (a full stash, its gc turn,
// thread exit) or by another thread's look at an idle heap.
#include <atomic>

#include "alloc/block/block_set.h"
#include "alloc/object/object_set.h"
#include "alloc/object/remote_free_batch.h"

namespace achunk {

namespace {

void* next_of(void* p) {
  return *static_cast<void**>(p);
}
void set_next(void* p, void* next) {
  *static_cast<void**>(p) = next;
}

}  // namespace

bool ThreadHeap::stash_push_full(int sc, void* p, const ABlock* block) {
  if (stash_cap(sc) == 0) return false;
  count_stash_op();
  unstash_half(sc);
  if (!stash_push_room(sc, p)) return false;
  stash_top_block_[sc] = block;
  return true;
}

void ThreadHeap::stash_gc() {
  const int sc = stash_cursor_;
  stash_cursor_ = sc + 1 == SIZE_CLASS_COUNT ? 0 : sc + 1;
  // A head that moved since the class's last turn: a malloc or a free used the stash.
  void* head = bins_[sc].head.load(std::memory_order_relaxed);
  if (head != gc_seen_[sc]) {
    gc_seen_[sc] = head;
    return;
  }
  if (head != nullptr) {
    count_stash_op();
    unstash_class(sc);
    gc_seen_[sc] = nullptr;
  }
}

void ThreadHeap::unstash_half(int sc) {
  void* newer = nullptr;
  if (enter_stash()) {
    // The newest half goes: its lines are the warm ones, where the older half's links
    // would each be a miss to walk and to free.
    const int count = stash_count(sc);
    const int give = count - count / 2;
    newer = give == 0 ? nullptr : bins_[sc].head.load(std::memory_order_relaxed);
    if (newer != nullptr) {
      void* last = newer;
      for (int i = 1; i < give; ++i) last = next_of(last);
      bins_[sc].head.store(next_of(last), std::memory_order_relaxed);
      set_next(last, nullptr);
      set_stash_count(sc, count - give);
    }
  }
  leave_stash();
  unstash(newer);
}

void ThreadHeap::unstash_all() {
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    if (stash_count(sc) != 0) unstash_class(sc);
  }
}

void ThreadHeap::unstash_class(int sc) {
  void* list = nullptr;
  if (enter_stash()) {
    list = bins_[sc].head.load(std::memory_order_relaxed);
    bins_[sc].head.store(nullptr, std::memory_order_relaxed);
    set_stash_count(sc, 0);
  }
  leave_stash();
  unstash(list);
}

void ThreadHeap::unstash(void* chain) {
  RemoteFreeBatch remote;
  while (chain != nullptr) {
    void* p = chain;
    chain = next_of(p);
    // The slab may have changed hands since: disowned, then adopted by another heap.
    ABlock* block = live_slab_block(p);
    Slab* slab = slab_of(block);
    if (owned_by_this_thread(slab->owner_thread_.load(std::memory_order_relaxed))) {
      free_local(block, slab, p, false);
    } else {
      remote.add(p, block);
    }
  }
}

bool ThreadHeap::close_stash() {
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    if (bins_[sc].head.load(std::memory_order_relaxed) != nullptr) {
      stash_closed_.store(true, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

void* ThreadHeap::take_stash(bool barrier, void* chain) {
  if (!stash_closed_.load(std::memory_order_relaxed)) return chain;
  // As for current slabs (take_emptied_current): after the barrier a stash call that
  // read the flag open has popping_ up, and one that reads it later finds it closed.
  // Acquire: the owner's last call, and every write before it, happened before this.
  if (barrier && !popping_.load(std::memory_order_acquire)) {
    for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
      void* head = bins_[sc].head.load(std::memory_order_relaxed);
      if (head == nullptr) continue;
      void* last = head;
      while (next_of(last) != nullptr) last = next_of(last);
      set_next(last, chain);
      chain = head;
      bins_[sc].head.store(nullptr, std::memory_order_relaxed);
      set_stash_count(sc, 0);
    }
  }
  stash_closed_.store(false, std::memory_order_release);
  return chain;
}

int64_t ThreadHeap::release_stolen(void* chain) {
  // Remote frees whoever owns each slab now: the objects' owner may be any thread.
  RemoteFreeBatch remote;
  int64_t n = 0;
  for (; chain != nullptr; ++n) {
    void* p = chain;
    chain = next_of(p);
    remote.add(p, BlockSet::ptr2block(header_of(p)));
  }
  return n;
}

}  // namespace achunk
