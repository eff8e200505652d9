// Context layer: ObAllocator, a memory context's freeable allocator. Objects are carved
// by bump from pages taken from a BlockSource (each new page twice the last, from the
// context's page size up to MAX_GROWN_PAGE, as PostgreSQL's AllocSet grows its blocks:
// a small context stays on one page, a busy one switches pages rarely), each with the
// object layer's 8-byte header and tail canary, and freed objects are reused by class.
// Pages go back when the allocator is reset (the context is destroyed), big objects as
// soon as they are freed. With `thread_safe` every call takes a lock; otherwise one
// thread at a time.
// Depends on the object layer (aobject.h, size_class.h) and block_source.h.
#pragma once

#include <cstdint>

#include "achunk/base/fork_locks.h"
#include "achunk/base/spin_lock.h"
#include "alloc/object/aobject.h"
#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "context/block_source.h"

namespace achunk {

class ObAllocator {
 public:
  // `role`: HELD only for the root context's; any other allocator's lock is its owner's,
  // as a mutex in a user object is, so fork() does not hold it.
  ObAllocator(BlockSource& source, int64_t page_size, bool thread_safe,
              ForkRole role = ForkRole::NOT_HELD);
  ~ObAllocator() { reset(); }
  ObAllocator(const ObAllocator&) = delete;
  ObAllocator& operator=(const ObAllocator&) = delete;
  void visit_fork_locks(ForkLockVisitor& v) { v.visit(lock_, "ob_allocator"); }

  // nullptr with last_alloc_failure() set on failure; size 0 gives a unique pointer.
  // Inline: a small object from the free list or the current page is a few stores.
  void* alloc(int64_t size, uint16_t label) {
    if (thread_safe_ || static_cast<uint64_t>(size) > static_cast<uint64_t>(SMALL_OBJECT_MAX)) {
      return alloc_slow(size, label);
    }
    const int sc = size_class_of(size);
    char* p = static_cast<char*>(free_[sc]);
    if (p != nullptr) {
      free_[sc] = *static_cast<void**>(free_[sc]);
    } else {
      const int64_t slot = class_slot_size(sc);
      if (bump_end_ - bump_ < slot) return alloc_slow(size, label);
      p = bump_ + AOBJECT_HEADER_SIZE;
      bump_ += slot;
    }
    return finish(p, size, label);
  }
  // For a thread-safe allocator: alloc if its lock is free at once, else nullptr with
  // *busy set (nothing done), so a caller can go to another allocator instead of waiting.
  void* alloc_if_uncontended(int64_t size, uint16_t label, bool* busy);
  // False (after a report through report_error) when ptr is not a live object of this
  // allocator: another allocator's, a double free, or an overwritten canary. Inline: a
  // small object that passes every check goes onto its class's free list here.
  bool free(void* ptr) {
    if (thread_safe_ || ptr == nullptr) return free_slow(ptr);
    Page* page = page_of(ptr);
    const uint64_t h = page != nullptr ? load_header(ptr) : 0;
    if (page == nullptr || page->owner != this || page->big ||
        header_state(h) != ObjectState::IN_USE || !tail_intact(ptr, header_size(h))) {
      return free_slow(ptr);  // frees big objects, reports the rest
    }
    store_header(ptr, make_header(ObjectState::FREE, header_label(h), header_size(h)));
    used_ -= header_size(h);
    --live_;
    void*& head = free_[size_class_of(header_size(h))];
    *static_cast<void**>(ptr) = head;
    head = ptr;
    return true;
  }
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
  // At the start of every page. Slots follow back to back from PAGE_META: header at 56,
  // user bytes at 64, so user pointers are 16-byte aligned like ob_malloc's.
  struct Page {
    static constexpr uint32_t MAGIC = 0x0BA110C8;
    uint32_t magic;
    bool big;  // one big object, freed with its page
    ObAllocator* owner;
    ABlock* block;
    Page* prev;
    Page* next;
    int64_t bytes;  // usable bytes from the page start
    int64_t bump;   // offset of the next slot to carve
  };
  static constexpr int64_t PAGE_META = 56;
  static constexpr int64_t MAX_GROWN_PAGE = 64 * 1024;

  // The page of a 16-byte-aligned pointer into a live context page, else nullptr.
  static Page* page_of(void* ptr) {
    if ((reinterpret_cast<uintptr_t>(ptr) & 15) != 0) return nullptr;
    ABlock* block = BlockSet::ptr2block(header_of(ptr));
    if (block == nullptr || !block->in_use()) return nullptr;
    auto* page = static_cast<Page*>(block_data(block));
    return page->magic == Page::MAGIC ? page : nullptr;
  }
  void* finish(char* p, int64_t size, uint16_t label) {
    store_header(p, make_header(ObjectState::IN_USE, label, static_cast<uint32_t>(size)));
    write_tail(p, static_cast<uint32_t>(size));
    used_ += size;
    ++live_;
    if (single_label_ != label) single_label_ = single_label_ == NO_LABEL_YET ? label : -1;
    return p;
  }
  void* alloc_slow(int64_t size, uint16_t label);
  void* alloc_locked(int64_t size, uint16_t label);
  // Ends carving the current page (its bump is written back) and starts on `page`.
  void switch_page(Page* page);
  bool free_slow(void* ptr);
  bool free_locked(void* ptr);
  Page* new_page(int64_t bytes);
  void release_page(Page* page);

  BlockSource& source_;
  const int64_t page_size_;
  const int64_t max_page_size_;
  const bool thread_safe_;
  int64_t next_page_size_;  // of the next small-object page
  SpinLock lock_;
  Page* pages_ = nullptr;    // all pages, newest first
  Page* current_ = nullptr;  // the page small objects are carved from
  char* bump_ = nullptr;     // current_'s next slot (its bump field lags until a switch)
  char* bump_end_ = nullptr;
  void* free_[PLAIN_CLASS_COUNT] = {};
  // used_ and live_ apart: side by side the compiler updates them with one 16-byte
  // load and store, and that load stalls on the two 8-byte stores of the last free.
  int64_t used_ = 0;
  int64_t hold_ = 0;
  int64_t live_ = 0;
  int single_label_ = NO_LABEL_YET;
  static constexpr int NO_LABEL_YET = -2;
};

}  // namespace achunk
