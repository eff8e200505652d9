#include "context/ob_allocator.h"

#include <algorithm>
#include <mutex>

#include "achunk/base/error_report.h"
#include "alloc/object/object_check.h"

namespace achunk {

namespace {

int64_t slot_of(int64_t size) {
  return size <= SMALL_OBJECT_MAX ? class_slot_size(size_class_of(size))
                                  : (size + AOBJECT_META_SIZE + 15) / 16 * 16;
}

}  // namespace

ObAllocator::ObAllocator(BlockSource& source, int64_t page_size, bool thread_safe, ForkRole role)
    : source_(source),
      page_size_(page_size),
      max_page_size_(page_size > MAX_GROWN_PAGE ? page_size : MAX_GROWN_PAGE),
      thread_safe_(thread_safe),
      next_page_size_(page_size),
      lock_(role) {
  static_assert(sizeof(Page) <= PAGE_META);
}

ObAllocator::Page* ObAllocator::new_page(int64_t bytes) {
  ABlock* block = source_.alloc_block(bytes);
  if (block == nullptr) return nullptr;
  auto* page = static_cast<Page*>(block_data(block));
  const int64_t span = BlockSet::span_bytes(block);
  *page = Page{Page::MAGIC, false, this, block, nullptr, pages_, span, PAGE_META};
  if (pages_ != nullptr) pages_->prev = page;
  pages_ = page;
  hold_ += span;
  return page;
}

void ObAllocator::switch_page(Page* page) {
  if (current_ != nullptr) current_->bump = bump_ - reinterpret_cast<char*>(current_);
  current_ = page;
  bump_ = page != nullptr ? reinterpret_cast<char*>(page) + page->bump : nullptr;
  bump_end_ = page != nullptr ? reinterpret_cast<char*>(page) + page->bytes : nullptr;
}

void ObAllocator::release_page(Page* page) {
  if (page == current_) {
    current_ = nullptr;
    bump_ = bump_end_ = nullptr;
  }
  if (page->prev != nullptr) {
    page->prev->next = page->next;
  } else {
    pages_ = page->next;
  }
  if (page->next != nullptr) page->next->prev = page->prev;
  hold_ -= page->bytes;
  page->magic = 0;
  source_.free_block(page->block);
}

void* ObAllocator::alloc_slow(int64_t size, uint16_t label) {
  if (!thread_safe_) return alloc_locked(size, label);
  std::lock_guard<SpinLock> guard(lock_);
  return alloc_locked(size, label);
}

void* ObAllocator::alloc_if_uncontended(int64_t size, uint16_t label, bool* busy) {
  if (!thread_safe_) return alloc_locked(size, label);
  if (!lock_.try_lock()) {
    *busy = true;
    return nullptr;
  }
  std::lock_guard<SpinLock> guard(lock_, std::adopt_lock);
  return alloc_locked(size, label);
}

void* ObAllocator::alloc_locked(int64_t size, uint16_t label) {
  if (size < 0 || size > AOBJECT_MAX_SIZE) {
    set_alloc_failure(AllocFailure{AllocFailKind::INVALID_SIZE, 0, size, hold_, 0});
    return nullptr;
  }
  const bool small = size <= SMALL_OBJECT_MAX;
  const int sc = small ? size_class_of(size) : 0;
  const int64_t slot = small ? class_slot_size(sc) : slot_of(size);
  char* p = nullptr;
  if (small && free_[sc] != nullptr) {
    p = static_cast<char*>(free_[sc]);
    free_[sc] = *static_cast<void**>(free_[sc]);
  } else if (slot + PAGE_META > page_size_) {
    Page* page = new_page(slot + PAGE_META);  // a page of its own, freed with the object
    if (page == nullptr) return nullptr;
    page->big = true;
    page->bump = page->bytes;
    p = reinterpret_cast<char*>(page) + PAGE_META + AOBJECT_HEADER_SIZE;
  } else {
    if (bump_end_ - bump_ < slot) {
      Page* page = new_page(next_page_size_);
      if (page == nullptr) return nullptr;
      next_page_size_ = std::min(next_page_size_ * 2, max_page_size_);
      switch_page(page);
    }
    p = bump_ + AOBJECT_HEADER_SIZE;
    bump_ += slot;
  }
  return finish(p, size, label);
}

ObAllocator* ObAllocator::owner_of(void* ptr) {
  Page* page = page_of(ptr);
  return page != nullptr ? page->owner : nullptr;
}

bool ObAllocator::free_slow(void* ptr) {
  if (!thread_safe_) return free_locked(ptr);
  std::lock_guard<SpinLock> guard(lock_);
  return free_locked(ptr);
}

bool ObAllocator::free_locked(void* ptr) {
  if (ptr == nullptr) return true;
  Page* page = page_of(ptr);
  if (page == nullptr || page->owner != this) {
    report_error(ErrorKind::INVALID_FREE, ptr, "not an object of this memory context");
    return false;
  }
  uint64_t h = load_header(ptr);
  if (header_state(h) != ObjectState::IN_USE || !tail_intact(ptr, header_size(h))) {
    // The checks again, this time to report what is wrong.
    h = live_header(ptr, false);
    if (h == 0 || !check_tail(ptr, h, header_size(h), "tail canary overwritten")) return false;
  }
  store_header(ptr, make_header(ObjectState::FREE, header_label(h), header_size(h)));
  used_ -= header_size(h);
  --live_;
  if (page->big) {
    release_page(page);
    return true;
  }
  void*& head = free_[size_class_of(header_size(h))];
  *static_cast<void**>(ptr) = head;
  head = ptr;
  return true;
}

void ObAllocator::reset() {
  std::unique_lock<SpinLock> guard(lock_, std::defer_lock);
  if (thread_safe_) guard.lock();
  // Oldest first, so the page touched last is the first one a page cache hands out
  // again: the next context then starts on lines still in the CPU cache.
  Page* oldest = pages_;
  while (oldest != nullptr && oldest->next != nullptr) oldest = oldest->next;
  while (oldest != nullptr) {
    Page* newer = oldest->prev;
    release_page(oldest);
    oldest = newer;
  }
  switch_page(nullptr);
  next_page_size_ = page_size_;
  for (void*& head : free_) head = nullptr;
  used_ = 0;
  live_ = 0;
  single_label_ = NO_LABEL_YET;
}

int ObAllocator::scan_usage(LabelUsage* out, int cap, LabelUsage* total) {
  std::unique_lock<SpinLock> guard(lock_, std::defer_lock);
  if (thread_safe_) guard.lock();
  int n = 0;
  *total = LabelUsage{};
  if (current_ != nullptr) current_->bump = bump_ - reinterpret_cast<char*>(current_);
  for (Page* page = pages_; page != nullptr; page = page->next) {
    for (int64_t off = PAGE_META; off < page->bump;) {
      char* user = reinterpret_cast<char*>(page) + off + AOBJECT_HEADER_SIZE;
      const uint64_t h = load_header(user);
      const int64_t slot = page->big ? page->bytes - PAGE_META : slot_of(header_size(h));
      off += slot;
      if (header_state(h) != ObjectState::IN_USE) continue;
      int i = 0;
      while (i < n && out[i].label != header_label(h)) ++i;
      if (i == n && n < cap) out[n++] = LabelUsage{header_label(h), 0, 0, 0, 0};
      auto add = [&](LabelUsage& u) {
        u.hold += slot;
        u.used += header_size(h);
        u.count += 1;
        u.blocks += page->big ? 1 : 0;
      };
      add(*total);
      if (i < n) add(out[i]);
    }
  }
  return n;
}

}  // namespace achunk
