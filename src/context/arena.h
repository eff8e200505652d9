// Context layer: ObArenaAllocator, a context's bump allocator. Allocations are 16-byte
// aligned bumps in pages from a BlockSource and are never freed one by one: reuse()
// rewinds to the first page and keeps it, reset() gives every page back.
// Depends on block_source.h.
#pragma once

#include <cstdint>

#include "achunk/base/fork_locks.h"
#include "achunk/base/spin_lock.h"
#include "context/block_source.h"

namespace achunk {

class ObArenaAllocator {
 public:
  // `role`: as for ObAllocator (HELD only for the root context's).
  ObArenaAllocator(BlockSource& source, int64_t page_size, bool thread_safe,
                   ForkRole role = ForkRole::NOT_HELD)
      : source_(source), page_size_(page_size), thread_safe_(thread_safe), lock_(role) {}
  ~ObArenaAllocator() { reset(); }
  ObArenaAllocator(const ObArenaAllocator&) = delete;
  ObArenaAllocator& operator=(const ObArenaAllocator&) = delete;
  void visit_fork_locks(ForkLockVisitor& v) { v.visit(lock_, "arena"); }

  // nullptr with last_alloc_failure() set on failure.
  void* alloc(int64_t size);
  // Forgets every allocation but keeps the first page for the next round.
  void reuse();
  // Gives every page back.
  void reset();

  int64_t hold() const { return hold_; }
  int64_t used() const { return used_; }

 private:
  struct Page {
    ABlock* block;
    Page* next;
    int64_t bytes;
  };
  static constexpr int64_t PAGE_META = 32;
  void* alloc_locked(int64_t size);
  void free_pages(Page* from);

  BlockSource& source_;
  const int64_t page_size_;
  const bool thread_safe_;
  SpinLock lock_;
  Page* pages_ = nullptr;  // newest first
  int64_t bump_ = 0;       // offset in pages_
  int64_t hold_ = 0;
  int64_t used_ = 0;
};

}  // namespace achunk
