// Context layer: ObAllocator, a memory context's freeable allocator. Objects are carved
// by bump from pages taken from a BlockSource, each with the object layer's 8-byte
// header and tail canary, and freed objects are reused by size class. Pages go back when
// the allocator is reset (the context is destroyed), big objects as soon as they are
// freed. With `thread_safe` every call takes a lock; otherwise one thread at a time.
// Depends on the object layer (aobject.h, size_class.h) and block_source.h.
#pragma once

#include <cstdint>

#include "achunk/spin_lock.h"
#include "alloc/object_set.h"
#include "alloc/size_class.h"
#include "context/block_source.h"

namespace achunk {

class ObAllocator {
 public:
  ObAllocator(BlockSource& source, int64_t page_size, bool thread_safe);
  ~ObAllocator() { reset(); }
  ObAllocator(const ObAllocator&) = delete;
  ObAllocator& operator=(const ObAllocator&) = delete;

  // nullptr with last_alloc_failure() set on failure; size 0 gives a unique pointer.
  void* alloc(int64_t size, uint16_t label);
  // False (after a report through report_error) when ptr is not a live object of this
  // allocator: another allocator's, a double free, or an overwritten canary.
  bool free(void* ptr);
  // Frees every object and page.
  void reset();

  int64_t hold() const { return hold_; }  // bytes of pages
  int64_t used() const { return used_; }  // bytes requested by live objects
  int64_t live_count() const { return live_; }
  // The one label every object so far was allocated with, or -1 once labels differ;
  // lets a leak report skip the scan in the common single-label case.
  int single_label() const { return single_label_; }
  // Live objects by label (see ObjectSet::scan_usage); returns the number of labels.
  int scan_usage(LabelUsage* out, int cap, LabelUsage* total);
  // The allocator an object of any context came from (nullptr if none).
  static ObAllocator* owner_of(void* ptr);

 private:
  struct Page;
  void* alloc_locked(int64_t size, uint16_t label);
  bool free_locked(void* ptr);
  Page* new_page(int64_t bytes);
  void release_page(Page* page);

  BlockSource& source_;
  const int64_t page_size_;
  const bool thread_safe_;
  SpinLock lock_;
  Page* pages_ = nullptr;  // all pages, the current one first
  void* free_[SIZE_CLASS_COUNT] = {};
  int64_t hold_ = 0;
  int64_t used_ = 0;
  int64_t live_ = 0;
  int single_label_ = NO_LABEL_YET;
  static constexpr int NO_LABEL_YET = -2;
};

}  // namespace achunk
