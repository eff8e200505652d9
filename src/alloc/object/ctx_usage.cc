#include "alloc/object/ctx_usage.h"

namespace achunk {

void measure_ctx_usage(AChunkMgr& chunk_mgr, ObTenantCtxAllocator& ta, CtxUsage* u) {
  u->nlabels = ta.object_set().scan_usage(u->labels, CtxUsage::MAX_LABELS, &u->total);
  u->hold = ta.hold();
  u->used = u->total.used;
  u->free = u->hold - u->total.hold;
  u->free_spans = ta.object_set().free_span_bytes(&u->washed);
  u->shards = ta.object_set().object_mgr().open_shards();
  ta.object_set().scan_spans(
      &u->spans, &u->resident,
      [](void* mgr, void* addr, int64_t len, unsigned char* vec) {
        return static_cast<AChunkMgr*>(mgr)->resident_pages(addr, len, vec);
      },
      &chunk_mgr);
  // Largest hold first; insertion sort, the list is short and this must not allocate.
  for (int i = 1; i < u->nlabels; ++i) {
    const LabelUsage key = u->labels[i];
    int j = i - 1;
    for (; j >= 0 && u->labels[j].hold < key.hold; --j) u->labels[j + 1] = u->labels[j];
    u->labels[j + 1] = key;
  }
}

}  // namespace achunk
