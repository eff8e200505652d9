// Object layer: FreeQueue, a thread's frees whose checks wait (ObjectSet::free_queued).
// The free of an object that is likely cold fetches the lines its checks will read and
// waits here; the free that pushes it out, LEN frees on, checks and frees it. Kept in the
// thread's ThreadState, which TLS reaches in one load, so a push never waits for the
// object's set to be found. Depends on nothing inside achunk.
#pragma once

#include <atomic>
#include <cstdint>

namespace achunk {

struct ABlock;

struct FreeQueue {
  static constexpr int LEN = 8;
  // Only objects of slots up to this wait: a 16 KiB slab's, of which a large live set has
  // many to a slab. A larger slot's slab holds a few (1-8 of 8-64 KiB), and a buffer
  // grown by realloc through those classes kept slabs from emptying while their last
  // frees waited (realloc's peak RSS 23.0 to 24.7 MiB).
  static constexpr int64_t SLOT_MAX = 1024;
  // Queues p in the oldest entry's place and returns that entry in *old (nullptr when it
  // held none); false, nothing queued, while another thread's look takes the queue, or
  // for good when no look could take it from an idle thread (see open). A pointer may be
  // queued twice (a double free): its header's mark lets only one check pass.
  __attribute__((always_inline)) bool push(void* p, ABlock* block, void** old, ABlock** old_block) {
    const bool pushed = enter();
    if (pushed) {
      const uint32_t i = at;
      *old = ptr[i].load(std::memory_order_relaxed);
      *old_block = this->block[i].load(std::memory_order_relaxed);
      ptr[i].store(p, std::memory_order_relaxed);
      this->block[i].store(block, std::memory_order_relaxed);
      at = (i + 1) % LEN;
    }
    leave();
    return pushed;
  }
  // The owner takes every entry (into out[], returning how many); none while a look does.
  int take_all(void** out, ABlock** out_blocks) {
    int n = 0;
    if (enter()) n = take_entries(out, out_blocks);
    leave();
    return n;
  }

  // Another thread's look, as at a heap's stash (ThreadHeap::close_stash): close() claims
  // a queue holding entries and closes it (the owner's calls then fail); after a process
  // barrier, take() moves the entries out unless a call is under way, and opens it again.
  bool close() {
    if (!holds_any() || looking.exchange(true, std::memory_order_acquire)) return false;
    open.store(false, std::memory_order_relaxed);
    return true;
  }
  int take(bool barrier, void** out, ABlock** out_blocks) {
    int n = 0;
    // Acquire: the owner's last call, and every write before it, happened before this.
    if (barrier && !busy.load(std::memory_order_acquire)) n = take_entries(out, out_blocks);
    open.store(true, std::memory_order_release);
    looking.store(false, std::memory_order_release);
    return n;
  }

  std::atomic<void*> ptr[LEN];
  std::atomic<ABlock*> block[LEN];
  uint32_t at;             // the oldest entry (owner only)
  std::atomic<bool> busy;  // the owner is in a call (enter to leave)
  // Opened when the thread gets a heap whose set's looks have a process barrier (a
  // zeroed state's queue stays closed); closed while a look takes the queue.
  std::atomic<bool> open;
  std::atomic<bool> looking;  // claimed by a look: one at a time
  bool enabled;               // opened once (owner only, ObjectSet::create_heap)

 private:
  bool enter() {
    busy.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return open.load(std::memory_order_relaxed);
  }
  void leave() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    busy.store(false, std::memory_order_release);
  }
  bool holds_any() const {
    for (const auto& q : ptr) {
      if (q.load(std::memory_order_relaxed) != nullptr) return true;
    }
    return false;
  }
  int take_entries(void** out, ABlock** out_blocks) {
    int n = 0;
    for (int i = 0; i < LEN; ++i) {
      void* p = ptr[i].load(std::memory_order_relaxed);
      if (p == nullptr) continue;
      out[n] = p;
      out_blocks[n++] = block[i].load(std::memory_order_relaxed);
      ptr[i].store(nullptr, std::memory_order_relaxed);
    }
    return n;
  }
};

}  // namespace achunk
