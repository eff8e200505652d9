#include "achunk/chunk/achunk_list.h"

#include <mutex>

namespace achunk {

bool AChunkList::push(AChunk* chunk, int64_t now_us) {
  const int64_t h = chunk->charged();
  std::lock_guard<SpinLock> guard(lock_);
  if (hold_.load(std::memory_order_relaxed) + h > max_hold_.load(std::memory_order_relaxed) ||
      count() >= max_count_) {
    return false;
  }
  // Two threads may read the clock in one order and take the lock in the other; keeping
  // stamps non-decreasing along the list keeps the head the oldest entry.
  chunk->cache_ts_ = (tail_ != nullptr && tail_->cache_ts_ > now_us) ? tail_->cache_ts_ : now_us;
  chunk->next_ = nullptr;
  chunk->prev_ = tail_;
  if (tail_ != nullptr) {
    tail_->next_ = chunk;
  } else {
    head_ = chunk;
    head_ts_.store(chunk->cache_ts_, std::memory_order_relaxed);
  }
  tail_ = chunk;
  add(hold_, h);
  add(pushes_, 1);
  return true;
}

AChunk* AChunkList::unlink_locked(AChunk* chunk) {
  if (chunk->prev_ != nullptr) {
    chunk->prev_->next_ = chunk->next_;
  } else {
    head_ = chunk->next_;
  }
  if (chunk->next_ != nullptr) {
    chunk->next_->prev_ = chunk->prev_;
  } else {
    tail_ = chunk->prev_;
  }
  chunk->prev_ = chunk->next_ = nullptr;
  head_ts_.store(head_ != nullptr ? head_->cache_ts_ : EMPTY_TS, std::memory_order_relaxed);
  add(hold_, -chunk->charged());
  add(pops_, 1);
  return chunk;
}

AChunk* AChunkList::pop() {
  if (empty()) return nullptr;  // the common miss costs no lock
  std::lock_guard<SpinLock> guard(lock_);
  if (tail_ == nullptr) return nullptr;
  add(reuses_, 1);
  return unlink_locked(tail_);
}

AChunk* AChunkList::pop_oldest_if_older(int64_t now_us, int64_t age_us, bool reuse) {
  if (empty()) return nullptr;
  std::lock_guard<SpinLock> guard(lock_);
  if (head_ == nullptr || now_us - head_->cache_ts_ < age_us) return nullptr;
  if (reuse) add(reuses_, 1);
  return unlink_locked(head_);
}

AChunk* AChunkList::pop_sized(int64_t min_bytes, int64_t max_bytes, bool largest, int64_t now_us,
                              int64_t min_age_us) {
  if (empty()) return nullptr;
  std::lock_guard<SpinLock> guard(lock_);
  AChunk* best = nullptr;
  // From the oldest: stamps do not decrease along the list, so the first too young ends it.
  for (AChunk* chunk = head_; chunk != nullptr && now_us - chunk->cache_ts_ >= min_age_us;
       chunk = chunk->next_) {
    const int64_t bytes = chunk->aligned();
    if (bytes < min_bytes || bytes > max_bytes) continue;
    if (best == nullptr || (largest ? bytes > best->aligned() : bytes < best->aligned())) {
      best = chunk;
    }
  }
  if (best == nullptr) return nullptr;
  add(reuses_, 1);
  return unlink_locked(best);
}

AChunk* AChunkList::pop_placed(int64_t min_bytes, int64_t max_bytes, int64_t place_align,
                               int max_look) {
  if (empty()) return nullptr;
  std::lock_guard<SpinLock> guard(lock_);
  int looked = 0;
  for (AChunk* chunk = tail_; chunk != nullptr && looked < max_look;
       chunk = chunk->prev_, ++looked) {
    const int64_t bytes = chunk->aligned();
    const uintptr_t second_unit = reinterpret_cast<uintptr_t>(chunk) + ACHUNK_ALIGN;
    if (bytes < min_bytes || bytes > max_bytes ||
        (second_unit & static_cast<uintptr_t>(place_align - 1)) != 0) {
      continue;
    }
    add(reuses_, 1);
    return unlink_locked(chunk);
  }
  return nullptr;
}

AChunk* AChunkList::popall() {
  std::lock_guard<SpinLock> guard(lock_);
  AChunk* chain = head_;
  head_ = tail_ = nullptr;
  head_ts_.store(EMPTY_TS, std::memory_order_relaxed);
  hold_.store(0, std::memory_order_relaxed);
  pops_.store(pushes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return chain;
}

}  // namespace achunk
