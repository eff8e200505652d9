// Context layer: ObParallelAllocator, a memory context's freeable allocator as one or
// more ObAllocators ("ways"). A context with ALLOC_THREAD_SAFE and `parallel` > 1 spreads
// its threads over up to MAX_WAYS ways, each with its own lock, as the reference spreads
// a parallel context over sub-allocators: a thread whose way is busy moves on to a free
// one and stays there, so threads rarely wait for each other. A
// free goes to the way that owns the object's page, from any thread. One way (every
// other context) is a plain ObAllocator behind one branch.
// Depends on ob_allocator.h and block_source.h.
#pragma once

#include <cstdint>

#include "context/block_source.h"
#include "context/ob_allocator.h"

namespace achunk {

class ObParallelAllocator {
 public:
  static constexpr int MAX_WAYS = 8;

  // `parallel` ways when thread_safe (at most MAX_WAYS), else one. The extra ways live in
  // a span of `source`; if that span cannot be had, the allocator runs with one way.
  // `role`: of every way's lock, as for ObAllocator (HELD only for the root context's).
  ObParallelAllocator(BlockSource& source, int64_t page_size, bool thread_safe, int parallel,
                      ForkRole role = ForkRole::NOT_HELD);
  ~ObParallelAllocator();
  ObParallelAllocator(const ObParallelAllocator&) = delete;
  ObParallelAllocator& operator=(const ObParallelAllocator&) = delete;

  void* alloc(int64_t size, uint16_t label) {
    return ways_ == 1 ? first_.alloc(size, label) : alloc_spread(size, label);
  }
  // False (after a report) when ptr is not a live object of this allocator.
  bool free(void* ptr) { return ways_ == 1 ? first_.free(ptr) : free_spread(ptr); }

  // fork(): every way's lock.
  void visit_fork_locks(ForkLockVisitor& v) {
    for (int i = 0; i < ways_; ++i) way(i).visit_fork_locks(v);
  }
  int ways() const { return ways_; }
  int64_t hold() const;
  int64_t used() const;
  int64_t live_count() const;
  // The one label of every object so far across the ways, or -1 (see ObAllocator).
  int single_label() const;
  // Live objects by label over all ways; returns the number of labels.
  int scan_usage(LabelUsage* out, int cap, LabelUsage* total);

 private:
  ObAllocator& way(int i) { return i == 0 ? first_ : *extra_[i - 1]; }
  const ObAllocator& way(int i) const { return i == 0 ? first_ : *extra_[i - 1]; }
  // The thread's way if its lock is free, else the next free one (which becomes the
  // thread's way), else wait for the thread's way.
  void* alloc_spread(int64_t size, uint16_t label);
  // A free with several ways: to the way that owns the object's page.
  bool free_spread(void* ptr);

  BlockSource& source_;
  ObAllocator first_;
  ObAllocator* extra_[MAX_WAYS - 1] = {};
  ABlock* extra_block_ = nullptr;  // the span the extra ways live in
  int ways_ = 1;
};

}  // namespace achunk
