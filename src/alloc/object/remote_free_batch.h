// Object layer: RemoteFreeBatch, frees onto slabs the freeing thread does not own,
// gathered by slab so that each slab's go onto its remote list in one compare-and-swap
// (ObjectSet::push_remote): a stash drains in a pass that costs one atomic operation per
// slab, however many of its objects it held. Depends on slab.h.
#pragma once

#include <cstdint>

#include "alloc/object/slab.h"

namespace achunk {

class RemoteFreeBatch {
 public:
  // Slabs gathered at once; a further one pushes them all first.
  static constexpr int SLABS = 8;

  RemoteFreeBatch() = default;
  RemoteFreeBatch(const RemoteFreeBatch&) = delete;
  RemoteFreeBatch& operator=(const RemoteFreeBatch&) = delete;
  ~RemoteFreeBatch() { flush(); }

  // p (header FREE, still counted out of its slab) of the slab `block`.
  void add(void* p, ABlock* block) {
    for (int i = 0; i < count_; ++i) {
      Group& g = groups_[i];
      if (g.block == block) {
        *static_cast<void**>(p) = g.head;
        g.head = p;
        ++g.n;
        return;
      }
    }
    if (count_ == SLABS) flush();
    *static_cast<void**>(p) = nullptr;
    groups_[count_++] = Group{block, p, p, 1};
  }
  // Pushes every gathered slab's objects.
  void flush();

 private:
  struct Group {
    ABlock* block;
    void* head;  // linked through the objects' first word, `tail` last
    void* tail;
    int64_t n;
  };
  Group groups_[SLABS];
  int count_ = 0;
};

}  // namespace achunk
