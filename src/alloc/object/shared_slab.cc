// ObjectSet's shared slabs: the slabs a thread's first small objects come from, one per
// class under its lock, so threads that allocate little share pages (see shared_alloc).
#include <mutex>

#include "alloc/object/object_set.h"

namespace achunk {

void* ObjectSet::alloc_without_heap(int sc, int64_t size, uint16_t label) {
  // Neither a heap nor a ThreadState: a thread that allocates little costs its share of
  // the shared slabs' pages and nothing else.
  if (shares(sc) && within_shared_budget()) {
    object_set_tls::shared_used += class_slot_size(sc);
    void* p = shared_alloc(sc);
    if (p != nullptr) ThreadHeap::init_object(p, size, make_header(ObjectState::IN_USE, label, 0));
    return p;
  }
  if (ThreadHeap* heap = create_heap()) return heap->alloc_object_in(sc, size, label);
  return alloc_big(size, label);
}

void* ObjectSet::shared_alloc(int sc) {
  SharedSlab& shared = shared_[sc];
  std::lock_guard<SpinLock> guard(shared.lock);
  ++shared.allocs;
  shared_allocs_.fetch_add(1, std::memory_order_relaxed);
  while (true) {
    if (ABlock* block = shared.current) {
      Slab* slab = slab_of(block);
      ThreadHeap::collect(slab);
      if (slab->local_free_ != nullptr || carve(block)) {
        void* p = slab->local_free_;
        slab->local_free_ = *static_cast<void**>(p);
        slab->used_.store(slab->used_.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
        return p;
      }
      // Full: the first free into it puts it on the ready stack, for any refill.
      shared.current = nullptr;
      if (!disown(block, shared_marker())) {
        shared.current = block;  // a free landed first: collect it
        continue;
      }
    }
    // Memory already carved first: a slab with room others' frees made, an exited
    // thread's warm one, and only then a fresh span.
    ABlock* block = pop_ready(sc);
    if (block == nullptr) block = pop_warm(sc);
    if (block != nullptr) {
      slab_of(block)->owner_thread_.store(shared_marker(), std::memory_order_relaxed);
    } else {
      block = new_slab(sc, shared_marker());
      if (block == nullptr) return nullptr;
    }
    shared.current = block;
  }
}

ABlock* ObjectSet::reclaim_idle_shared(ABlock* chain, int64_t* bytes) {
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    if (!shares(sc)) continue;
    SharedSlab& shared = shared_[sc];
    // Held: a thread is allocating from it, so it is not idle.
    if (!shared.lock.try_lock()) continue;
    ABlock* block = shared.current;
    // Every free into it is remote, and no allocation runs: used_ is still, and with no
    // object out no free can come.
    if (block != nullptr && shared.allocs == shared.seen_allocs &&
        ThreadHeap::all_freed(slab_of(block))) {
      shared.current = nullptr;
      chain = ThreadHeap::give_up(block, chain, bytes);
    }
    shared.seen_allocs = shared.allocs;
    shared.lock.unlock();
  }
  return chain;
}

}  // namespace achunk
