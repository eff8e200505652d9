#include "alloc/object/thread_state.h"

#include <algorithm>
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
// After a failed mapping the next attempts are skipped, their number doubling from the
// first to the last figure while mapping keeps failing: a thread without a state (its
// small objects then come as spans) does not make one failing mmap per malloc.
constexpr int64_t MAP_BACKOFF_FIRST = 16;
constexpr int64_t MAP_BACKOFF_MAX = 1024;
// The washed states' addresses live in an array of their own, mapped and doubled apart
// from the states, so a washed state keeps no page (a link inside it would keep one).
constexpr int64_t WASHED_FIRST_CAPACITY = 512;

ACHUNK_STATIC_SPIN_LOCK(g_pool_lock, ForkRole::HELD);
ThreadState* g_free = nullptr;  // resident states, newest first
ThreadState** g_washed = nullptr;
int64_t g_washed_capacity = 0;
ThreadState* g_fresh = nullptr;
int64_t g_fresh_left = 0;
int64_t g_activity = 0;   // states taken and given back since the last idle wash's look
int64_t g_backoff = 0;    // attempts skipped after the last failure (0: none failed)
int64_t g_skip_left = 0;  // of those, still to skip
// The pool's counts, changed under the pool lock and read without it: the stats region
// reads them from a chunk call, where allocator locks may be held that fork() takes
// after the pool lock.
struct PoolCounts {
  std::atomic<int64_t> mapped{0};
  std::atomic<int64_t> in_use{0};
  std::atomic<int64_t> free{0};
  std::atomic<int64_t> washed{0};
} g_stats;
std::atomic<Os*> g_os{nullptr};

// The OS set by set_thread_state_os, else `fallback`.
Os& pool_os(LinuxOs& fallback) {
  Os* os = g_os.load(std::memory_order_acquire);
  return os != nullptr ? *os : fallback;
}

// Maps STATES_PER_MAP fresh states, unless backing off after failures. Pool lock held.
bool map_fresh_states(Os& os) {
  if (g_skip_left > 0) {
    --g_skip_left;
    return false;
  }
  int err = 0;
  void* p = os.map_aligned(STATES_PER_MAP * static_cast<int64_t>(sizeof(ThreadState)),
                           alignof(ThreadState), &err);
  if (p == nullptr) {
    g_backoff = g_backoff == 0 ? MAP_BACKOFF_FIRST : std::min(2 * g_backoff, MAP_BACKOFF_MAX);
    g_skip_left = g_backoff;
    return false;
  }
  g_backoff = 0;
  g_fresh = static_cast<ThreadState*>(p);
  g_fresh_left = STATES_PER_MAP;
  g_stats.mapped += STATES_PER_MAP;
  return true;
}

// Room for one more washed state's address, the array moved to a doubled mapping if
// full. False when that mapping fails: the state then stays resident. Pool lock held.
// Always the real OS: the array is the pool's own bookkeeping, outlives any test's OS.
bool reserve_washed_slot() {
  LinuxOs os;
  if (g_stats.washed < g_washed_capacity) return true;
  const int64_t capacity = g_washed_capacity == 0 ? WASHED_FIRST_CAPACITY : 2 * g_washed_capacity;
  const int64_t bytes = capacity * static_cast<int64_t>(sizeof(ThreadState*));
  int err = 0;
  auto* slots = static_cast<ThreadState**>(os.map_aligned(bytes, 4096, &err));
  if (slots == nullptr) return false;
  if (g_washed != nullptr) {
    std::memcpy(static_cast<void*>(slots), g_washed,
                static_cast<size_t>(g_stats.washed) * sizeof(ThreadState*));
    [[maybe_unused]] const int rc =
        os.unmap(g_washed, g_washed_capacity * static_cast<int64_t>(sizeof(ThreadState*)));
  }
  g_washed = slots;
  g_washed_capacity = capacity;
  return true;
}

// Gives a free state's pages back and keeps its address; false (nothing changed) when
// there is no room for the address or the OS refuses. Pool lock held.
bool wash_state(Os& os, ThreadState* state) {
  if (!reserve_washed_slot() || os.release_pages(state, sizeof(ThreadState)) != 0) return false;
  g_washed[g_stats.washed++] = state;
  return true;
}

}  // namespace

void set_thread_state_os(Os* os) {
  std::lock_guard<SpinLock> guard(g_pool_lock);
  g_os.store(os, std::memory_order_release);
  // A new OS gets its own first try.
  g_backoff = 0;
  g_skip_left = 0;
}

ThreadState* acquire_thread_state() {
  ThreadState* state = nullptr;
  {
    std::lock_guard<SpinLock> guard(g_pool_lock);
    LinuxOs linux_os;
    if (g_free != nullptr) {
      state = g_free;
      g_free = state->next_free;
      --g_stats.free;
    } else if (g_stats.washed > 0) {
      state = g_washed[--g_stats.washed];
      --g_stats.free;
    } else {
      if (g_fresh_left == 0 && !map_fresh_states(pool_os(linux_os))) return nullptr;
      state = g_fresh++;
      --g_fresh_left;
    }
    ++g_stats.in_use;
    ++g_activity;
  }
  // Outside the lock: only this thread has it now. Fresh and washed states read as zero
  // (reading a washed page maps the shared zero page, no memory).
  if (state->dirty) std::memset(static_cast<void*>(state), 0, CACHE_BYTES);
  state->dirty = true;
  state->next_free = nullptr;
  return state;
}

void release_thread_state(ThreadState* state) {
  std::lock_guard<SpinLock> guard(g_pool_lock);
  ++g_stats.free;
  --g_stats.in_use;
  ++g_activity;
  LinuxOs linux_os;
  if (g_stats.free - g_stats.washed > THREAD_STATES_RESIDENT_MAX &&
      wash_state(pool_os(linux_os), state)) {
    return;
  }
  state->next_free = g_free;
  g_free = state;
}

int64_t wash_idle_thread_states(bool force) {
  std::lock_guard<SpinLock> guard(g_pool_lock);
  const bool busy = g_activity != 0;
  g_activity = 0;
  if (busy && !force) return 0;
  LinuxOs linux_os;
  Os& os = pool_os(linux_os);
  int64_t washed = 0;
  while (g_free != nullptr && g_stats.free - g_stats.washed > THREAD_STATES_KEPT) {
    ThreadState* state = g_free;
    ThreadState* next = state->next_free;
    if (!wash_state(os, state)) break;
    g_free = next;
    ++washed;
  }
  return washed;
}

ThreadStatePoolStats thread_state_pool_stats() {
  return ThreadStatePoolStats{g_stats.mapped.load(std::memory_order_relaxed),
                              g_stats.in_use.load(std::memory_order_relaxed),
                              g_stats.free.load(std::memory_order_relaxed),
                              g_stats.washed.load(std::memory_order_relaxed)};
}

void thread_state_visit_fork_locks(ForkLockVisitor& v) {
  v.visit(g_pool_lock, "thread_state.pool");
}

}  // namespace achunk
