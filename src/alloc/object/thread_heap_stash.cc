// ThreadHeap's stash: per class, the freed objects of slabs that had no free slot, handed
// out again before any refill, and given back to their slabs by the owner (a full stash,
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
  unstash_half(sc);
  return stash_push_room(sc, p, block);
}

void ThreadHeap::stash_gc() {
  const int sc = stash_cursor_;
  stash_cursor_ = sc + 1 == SIZE_CLASS_COUNT ? 0 : sc + 1;
  if (stash_taken_[sc]) {
    stash_taken_[sc] = false;
    return;
  }
  if (stash_count_[sc].load(std::memory_order_relaxed) != 0) unstash_class(sc);
}

void ThreadHeap::unstash_half(int sc) {
  void* older = nullptr;
  if (enter_stash()) {
    // The newest half stays: its lines are the warm ones.
    const int keep = stash_count_[sc].load(std::memory_order_relaxed) / 2;
    void* head = stash_[sc].load(std::memory_order_relaxed);
    if (keep == 0) {
      older = head;
      stash_[sc].store(nullptr, std::memory_order_relaxed);
    } else {
      void* last = head;
      for (int i = 1; i < keep; ++i) last = next_of(last);
      older = next_of(last);
      set_next(last, nullptr);
    }
    stash_count_[sc].store(static_cast<uint8_t>(keep), std::memory_order_relaxed);
  }
  leave_stash();
  unstash(older);
}

void ThreadHeap::unstash_all() {
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    if (stash_count_[sc].load(std::memory_order_relaxed) != 0) unstash_class(sc);
  }
}

void ThreadHeap::unstash_class(int sc) {
  void* list = nullptr;
  if (enter_stash()) {
    list = stash_[sc].load(std::memory_order_relaxed);
    stash_[sc].store(nullptr, std::memory_order_relaxed);
    stash_count_[sc].store(0, std::memory_order_relaxed);
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
    ABlock* block = BlockSet::ptr2block(header_of(p));
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
    if (stash_[sc].load(std::memory_order_relaxed) != nullptr) {
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
      void* head = stash_[sc].load(std::memory_order_relaxed);
      if (head == nullptr) continue;
      void* last = head;
      while (next_of(last) != nullptr) last = next_of(last);
      set_next(last, chain);
      chain = head;
      stash_[sc].store(nullptr, std::memory_order_relaxed);
      stash_count_[sc].store(0, std::memory_order_relaxed);
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
