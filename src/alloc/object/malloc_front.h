// Object layer: the per-thread front of ob_malloc. An entry remembers, for one
// (allocator, tenant, ctx, label), the thread's heap and the label's id, so a repeated
// allocation skips the tenant directory, the label table and the heap lookup. An entry
// is trusted only while nothing it names can have changed: the allocator by its
// instance id, the label by the 16 bytes found at its pointer; the heap because a thread
// that gives a heap back empties all its entries (ObjectSet::flush_thread_heap). Never allocates.
// Depends on thread_state.h (the entries), object_set.h and label.h.
#pragma once

#include <cstdint>

#include "alloc/object/label.h"
#include "alloc/object/object_set.h"
#include "alloc/object/thread_state.h"

namespace achunk {
namespace malloc_front {

// The entries live in the thread's ThreadState: the hashed ones, then the entry of
// ObMallocAllocator::alloc_static, which no hash reaches: its `label` holds the address of
// the ObMemAttr it was filled for. A thread that owns no state finds every entry empty.
inline Entry& static_entry() {
  return thread_state().entries[ENTRIES];
}

inline Entry& entry_for(uint64_t tenant_id, int ctx_id, const char* label) {
  // Labels are distinct literals, so their addresses spread well; tenant and ctx only
  // separate the same label used in several ctx.
  const uintptr_t h =
      (reinterpret_cast<uintptr_t>(label) >> 4) ^ tenant_id ^ static_cast<uintptr_t>(ctx_id);
  return thread_state().entries[h & (ENTRIES - 1)];
}

}  // namespace malloc_front
}  // namespace achunk
