#include "context/arena.h"

#include <mutex>

#include "achunk/base/alloc_failure.h"

namespace achunk {

void* ObArenaAllocator::alloc(int64_t size) {
  if (!thread_safe_) return alloc_locked(size);
  std::lock_guard<SpinLock> guard(lock_);
  return alloc_locked(size);
}

void* ObArenaAllocator::alloc_locked(int64_t size) {
  if (size < 0 || size > ACHUNK_MAX_ALLOC_SIZE) {
    set_alloc_failure(AllocFailure{AllocFailKind::INVALID_SIZE, 0, size, hold_, 0});
    return nullptr;
  }
  const int64_t need = (size + 15) / 16 * 16;
  if (pages_ == nullptr || bump_ + need > pages_->bytes) {
    const int64_t bytes = need + PAGE_META > page_size_ ? need + PAGE_META : page_size_;
    ABlock* block = source_.alloc_block(bytes);
    if (block == nullptr) return nullptr;
    auto* page = static_cast<Page*>(block_data(block));
    *page = Page{block, pages_, BlockSet::span_bytes(block)};
    pages_ = page;
    bump_ = PAGE_META;
    hold_ += page->bytes;
  }
  void* p = reinterpret_cast<char*>(pages_) + bump_;
  bump_ += need;
  used_ += size;
  return p;
}

void ObArenaAllocator::free_pages(Page* from) {
  while (from != nullptr) {
    Page* next = from->next;
    hold_ -= from->bytes;
    source_.free_block(from->block);
    from = next;
  }
}

void ObArenaAllocator::reuse() {
  std::unique_lock<SpinLock> guard(lock_, std::defer_lock);
  if (thread_safe_) guard.lock();
  if (pages_ == nullptr) return;
  // Keep the oldest page (usually the page-size one), free the rest.
  Page* keep = pages_;
  while (keep->next != nullptr) keep = keep->next;
  Page* rest = pages_;
  pages_ = keep;
  for (Page* p = rest; p != keep;) {
    Page* next = p->next;
    hold_ -= p->bytes;
    source_.free_block(p->block);
    p = next;
  }
  bump_ = PAGE_META;
  used_ = 0;
}

void ObArenaAllocator::reset() {
  std::unique_lock<SpinLock> guard(lock_, std::defer_lock);
  if (thread_safe_) guard.lock();
  free_pages(pages_);
  pages_ = nullptr;
  bump_ = 0;
  used_ = 0;
}

}  // namespace achunk
