// Object layer: ThreadState, what one thread caches to find its memory fast: its heap in
// each object set, ob_malloc's front entries, the label cache and its last (tenant, ctx)
// allocator. One block per thread that allocates, taken from a pool on its first
// allocation (ObjectSet::own_thread_state) and given back at its exit, so TLS keeps one
// pointer: a thread that never allocates costs nothing, and glibc zeroes no cache when a
// thread starts. Until then the pointer names a shared, read-only, empty state on which
// every lookup misses. Depends on the base layer's tls.h and fork_locks.h and the
// platform layer's os.h.
#pragma once

#include <cstdint>

#include "achunk/base/fork_locks.h"
#include "achunk/base/tls.h"
#include "achunk/platform/os.h"

namespace achunk {

class ThreadHeap;
class ObTenantCtxAllocator;

namespace object_set_tls {
inline constexpr int MAX_SETS = 256;
}  // namespace object_set_tls

namespace malloc_front {
// One (allocator, tenant, ctx, label) the thread allocated for: its heap and the label's
// id. A cache line each, so finding one is a shift.
struct alignas(64) Entry {
  const char* label;
  uint64_t label_bytes[2];  // the 16 bytes at `label` when the entry was filled
  uint64_t tenant_id;
  ThreadHeap* heap;
  int32_t ctx_id;
  uint32_t allocator_id;  // 0: empty; so is every entry after the thread gives a heap back
  // make_header(IN_USE, label id, 0) | PLAIN_CLASS_BIT: a plain-class object's header is
  // this or its size; an aligned class's drops the bit.
  uint64_t in_use_header;
};
static_assert(sizeof(Entry) == 64);
inline constexpr int ENTRIES = 64;
}  // namespace malloc_front

// A label pointer with the 16 bytes found at it and its interned id.
struct LabelCacheEntry {
  const char* ptr;
  uint64_t bytes[2];
  uint16_t id;
};

// The last (directory, tenant, ctx) the thread allocated from.
struct TaCache {
  uint32_t allocator_id;  // not the address: another allocator may be built at that one
  uint64_t tenant_id;
  int ctx_id;
  ObTenantCtxAllocator* ta;
};

struct alignas(4096) ThreadState {
  static constexpr int LABEL_CACHE_ENTRIES = 64;
  // ob_malloc's hashed entries, then the entry of alloc_static, which no hash reaches.
  malloc_front::Entry entries[malloc_front::ENTRIES + 1];
  // The thread's heap by set index, and the set's generation when it was made, so a
  // pointer kept for a destroyed set is seen to be stale after the index is reused.
  ThreadHeap* heaps[object_set_tls::MAX_SETS];
  uint32_t heap_generation[object_set_tls::MAX_SETS];
  LabelCacheEntry label_cache[LABEL_CACHE_ENTRIES];
  TaCache ta_cache;
  // Pool bookkeeping: written since the state was last zeroed (a washed state reads 0
  // and needs no clearing), and the link of the pool's list of resident states.
  bool dirty;
  ThreadState* next_free;
};

namespace thread_state_detail {
extern const ThreadState EMPTY;
}  // namespace thread_state_detail
// The calling thread's state, or the empty one until it first allocates.
extern ACHUNK_TLS ThreadState* tl_thread_state;

// For lookups only: a write needs an owned state (ObjectSet::own_thread_state).
inline ThreadState& thread_state() {
  return *tl_thread_state;
}
inline bool thread_state_owned() {
  return tl_thread_state != &thread_state_detail::EMPTY;
}

// The pool. A fresh or reused state, zeroed, or nullptr when no memory can be mapped.
// Then the thread goes on without caches: ObjectSet serves its small objects from spans.
ThreadState* acquire_thread_state();
// Takes back a state no thread uses any more, resident for the next threads, so a pool
// of threads replaced at once faults no page in again. Beyond THREAD_STATES_RESIDENT_MAX
// free resident states a state's pages go back to the OS at once and the pool keeps only
// its address, so a burst of threads leaves 8 bytes per state behind. Resident states are
// handed out first, newest first. After a failed mapping the pool skips the next 16
// attempts to map, doubling up to 1,024 while mapping keeps failing.
void release_thread_state(ThreadState* state);
// Free states kept resident once threads stop coming and going, and at most while they
// come and go.
inline constexpr int THREAD_STATES_KEPT = 32;
inline constexpr int THREAD_STATES_RESIDENT_MAX = 256;
// The free resident states beyond THREAD_STATES_KEPT give their pages back: at once with
// `force` (a trim), else only when no state was taken or given back since the previous
// call (the housekeeping thread's look, each interval), so those up to
// THREAD_STATES_RESIDENT_MAX go back by idle time, not at a thread's exit. Returns the
// states washed; one madvise each, under the pool lock, at most
// THREAD_STATES_RESIDENT_MAX - THREAD_STATES_KEPT of them.
int64_t wash_idle_thread_states(bool force);

struct ThreadStatePoolStats {
  int64_t mapped = 0;  // states mapped so far (some perhaps never handed out yet)
  int64_t in_use = 0;  // held by threads
  int64_t free = 0;    // given back, waiting in the pool
  int64_t washed = 0;  // of the free ones, those whose pages went back to the OS
};
// Without the pool lock (the stats region reads it from chunk calls made under allocator
// locks): each figure as of the last pool change.
ThreadStatePoolStats thread_state_pool_stats();
// The OS the pool maps and washes states through: a LinuxOs unless set (tests pass a
// fake that fails on demand; nullptr goes back to the default). States are not chunk
// memory, as TLS is not, so the chunk manager's OS need not be this one.
void set_thread_state_os(Os* os);
// fork(): the pool's lock, held across the fork. A leaf (nothing is taken under it, and
// it may be taken under any allocator lock), so the registry visits it last.
void thread_state_visit_fork_locks(ForkLockVisitor& v);

}  // namespace achunk
