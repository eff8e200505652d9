// Test support: ThreadHeapTestPeer, which holds a heap's popping_ flag up as a pop or a
// stash call stopped midway would. Depends on the object layer's thread_heap.h.
#pragma once

#include "alloc/object/thread_heap.h"

namespace achunk {

struct ThreadHeapTestPeer {
  static void set_popping(ThreadHeap* heap, bool on) { heap->popping_.store(on); }
};

}  // namespace achunk
