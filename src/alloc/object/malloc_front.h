// Object layer: the per-thread front of ob_malloc. An entry remembers, for one
// (allocator, tenant, ctx, label), the thread's heap and the label's id, so a repeated
// allocation skips the tenant directory, the label table and the heap lookup. An entry
// is trusted only while nothing it names can have changed: the allocator by its
// instance id, the heap by this thread's heap epoch (bumped whenever the thread gives a
// heap back), the label by the 16 bytes found at its pointer. Never allocates.
// Depends on thread_heap.h and label.h.
#pragma once

#include <cstdint>

#include "achunk/base/tls.h"
#include "alloc/object/label.h"
#include "alloc/object/object_set.h"

namespace achunk {
namespace malloc_front {

// A cache line each, so finding one is a shift.
struct alignas(64) Entry {
  const char* label;
  uint64_t label_bytes[2];  // the 16 bytes at `label` when the entry was filled
  uint64_t tenant_id;
  ThreadHeap* heap;
  int32_t ctx_id;
  uint32_t allocator_id;  // 0: empty
  uint32_t heap_epoch;
  // make_header(IN_USE, label id, 0): an object's header is this or its size.
  uint64_t in_use_header;
};
static_assert(sizeof(Entry) == 64);

inline constexpr int ENTRIES = 64;
// The hashed entries, then the entry of ObMallocAllocator::alloc_static, which no hash
// reaches: its `label` holds the address of the ObMemAttr it was filled for. One array,
// as UBSan's null check misreads a member access on a TLS struct of its own.
extern ACHUNK_TLS Entry entries[ENTRIES + 1];
inline Entry& static_entry() {
  return entries[ENTRIES];
}

inline Entry& entry_for(uint64_t tenant_id, int ctx_id, const char* label) {
  // Labels are distinct literals, so their addresses spread well; tenant and ctx only
  // separate the same label used in several ctx.
  const uintptr_t h =
      (reinterpret_cast<uintptr_t>(label) >> 4) ^ tenant_id ^ static_cast<uintptr_t>(ctx_id);
  return entries[h & (ENTRIES - 1)];
}

}  // namespace malloc_front
}  // namespace achunk
