#include "alloc/object/thread_state.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "achunk/base/spin_lock.h"
#include "achunk/platform/linux_os.h"

namespace achunk {

namespace thread_state_detail {
// Read-only: a write through a thread's pointer before it owns a state faults at once.
constinit const ThreadState EMPTY{};
}  // namespace thread_state_detail

// A constant address: the TLS image is copied to each thread after relocation.
ACHUNK_TLS ThreadState* tl_thread_state = const_cast<ThreadState*>(&thread_state_detail::EMPTY);

namespace {

// States are mapped this many at a time: few mappings, and an untouched state costs no RSS.
constexpr int64_t STATES_PER_MAP = 16;
// Bytes a state's caches span; the rest of its pages stays untouched.
constexpr size_t CACHE_BYTES = offsetof(ThreadState, dirty);

ACHUNK_STATIC_SPIN_LOCK(g_pool_lock, ForkRole::HELD);
ThreadState* g_free = nullptr;  // newest first
ThreadState* g_fresh = nullptr;
int64_t g_fresh_left = 0;
ThreadStatePoolStats g_stats;
std::atomic<Os*> g_os{nullptr};

// The OS set by set_thread_state_os, else `fallback`.
Os& pool_os(LinuxOs& fallback) {
  Os* os = g_os.load(std::memory_order_acquire);
  return os != nullptr ? *os : fallback;
}

}  // namespace

void set_thread_state_os(Os* os) {
  g_os.store(os, std::memory_order_release);
}

ThreadState* acquire_thread_state() {
  ThreadState* state = nullptr;
  {
    std::lock_guard<SpinLock> guard(g_pool_lock);
    if (g_free != nullptr) {
      state = g_free;
      g_free = state->next_free;
      --g_stats.free;
      if (!state->dirty) --g_stats.washed;
    } else {
      if (g_fresh_left == 0) {
        LinuxOs linux_os;
        int err = 0;
        void* p = pool_os(linux_os).map_aligned(
            STATES_PER_MAP * static_cast<int64_t>(sizeof(ThreadState)), alignof(ThreadState), &err);
        if (p == nullptr) return nullptr;
        g_fresh = static_cast<ThreadState*>(p);
        g_fresh_left = STATES_PER_MAP;
        g_stats.mapped += STATES_PER_MAP;
      }
      state = g_fresh++;
      --g_fresh_left;
    }
    ++g_stats.in_use;
  }
  // Outside the lock: only this thread has it now. Fresh and washed states read as zero.
  if (state->dirty) std::memset(static_cast<void*>(state), 0, CACHE_BYTES);
  state->dirty = true;
  state->next_free = nullptr;
  return state;
}

void release_thread_state(ThreadState* state) {
  std::lock_guard<SpinLock> guard(g_pool_lock);
  if (g_stats.free - g_stats.washed >= THREAD_STATES_KEPT) {
    LinuxOs linux_os;
    if (pool_os(linux_os).release_pages(state, sizeof(ThreadState)) == 0) {
      state->dirty = false;
      ++g_stats.washed;
    }
  }
  state->next_free = g_free;
  g_free = state;
  ++g_stats.free;
  --g_stats.in_use;
}

ThreadStatePoolStats thread_state_pool_stats() {
  std::lock_guard<SpinLock> guard(g_pool_lock);
  return g_stats;
}

void thread_state_visit_fork_locks(ForkLockVisitor& v) {
  v.visit(g_pool_lock, "thread_state.pool");
}

}  // namespace achunk
