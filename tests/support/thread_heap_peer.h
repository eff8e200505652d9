// Test support: ThreadHeapTestPeer, which holds a heap's popping_ flag up as a pop or a
// stash call stopped midway would, and counts the owner's stash calls. Depends on the object
// layer's thread_heap.h.
#pragma once

#include "alloc/object/thread_heap.h"

namespace achunk {

struct ThreadHeapTestPeer {
  static void set_popping(ThreadHeap* heap, bool on) { heap->popping_.store(on); }
  // The owner's stash calls so far (each one, open or closed, bumps it).
  static uint64_t stash_ops(const ThreadHeap* heap) { return heap->stash_ops_.load(); }
};

}  // namespace achunk
