// Object layer: one ctx's usage as the dumps show it (hold, used, free spans, washed,
// resident bytes, labels by hold), measured by a scan of its live objects and spans.
// Shared by the usage printer and the live stats region so both report the same numbers.
// Never allocates. Depends on object_set.h, tenant_ctx_allocator.h and the chunk layer.
#pragma once

#include <cstdint>

#include "achunk/chunk/achunk_mgr.h"
#include "alloc/object/object_set.h"
#include "alloc/object/tenant_ctx_allocator.h"

namespace achunk {

struct CtxUsage {
  static constexpr int MAX_LABELS = 128;

  int64_t hold;        // bytes of chunks charged to the ctx
  int64_t used;        // bytes the callers asked for
  int64_t free;        // held but not in a live object: free slots, free spans, thread caches
  int64_t free_spans;  // part of free: free spans of blocks (the rest is in slabs)
  int64_t washed;      // part of free_spans: pages given back to the OS
  int shards;          // open ObjectMgr shards
  int64_t resident;    // bytes of the ctx's chunks backed by physical pages; -1: unknown
  SpanUsage spans;     // spans.free_resident: free spans' bytes still in RAM
  LabelUsage total;
  LabelUsage labels[MAX_LABELS];  // largest hold first
  int nlabels;
};

// Fills *u for `ta`. Takes each shard's lock in turn; O(live objects + spans + chunks) of
// `ta`, one residency probe (mincore) per 2 MiB of chunk, however many spans it holds.
void measure_ctx_usage(AChunkMgr& chunk_mgr, ObTenantCtxAllocator& ta, CtxUsage* u);

}  // namespace achunk
