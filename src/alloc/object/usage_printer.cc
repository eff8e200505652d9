// ObMallocAllocator's usage dump: per ctx, then per label sorted by hold, as OceanBase's
// "[MEMORY]" lines or as JSON. The numbers come from a scan of the live objects, so
// labels cost nothing on the allocation path.
#include <mutex>

#include "achunk/base/buf_writer.h"
#include "achunk/base/spin_lock.h"
#include "alloc/object/label.h"
#include "alloc/object/malloc_allocator.h"

namespace achunk {

namespace {

constexpr int MAX_LABELS_SHOWN = 128;
constexpr int NUM_WIDTH = 15;

struct CtxUsage {
  int64_t hold;        // bytes of chunks charged to the ctx
  int64_t used;        // bytes the callers asked for
  int64_t free;        // held but not in a live object: free slots, free spans, thread caches
  int64_t free_spans;  // part of free: free spans of blocks (the rest is in slabs)
  int64_t washed;      // part of free_spans: pages given back to the OS
  int shards;          // open ObjectMgr shards
  int64_t resident;    // bytes of the ctx's chunks backed by physical pages; -1: unknown
  SpanUsage spans;
  LabelUsage total;
  LabelUsage labels[MAX_LABELS_SHOWN];
  int nlabels;
};

void measure(AChunkMgr& chunk_mgr, ObTenantCtxAllocator& ta, CtxUsage* u) {
  u->nlabels = ta.object_set().scan_usage(u->labels, MAX_LABELS_SHOWN, &u->total);
  u->hold = ta.hold();
  u->used = u->total.used;
  u->free = u->hold - u->total.hold;
  u->free_spans = ta.object_set().free_span_bytes(&u->washed);
  u->shards = ta.object_set().object_mgr().open_shards();
  ta.object_set().scan_spans(
      &u->spans,
      [](void* mgr, void* addr, int64_t len) {
        return static_cast<AChunkMgr*>(mgr)->resident_bytes(addr, len);
      },
      &chunk_mgr);
  u->resident = 0;
  ta.object_set().for_each_chunk([&](AChunk* chunk) {
    const int64_t r = chunk_mgr.resident_bytes(chunk, chunk->aligned());
    u->resident = r < 0 || u->resident < 0 ? -1 : u->resident + r;
  });
  // Largest hold first; insertion sort, the list is short and this must not allocate.
  for (int i = 1; i < u->nlabels; ++i) {
    const LabelUsage key = u->labels[i];
    int j = i - 1;
    for (; j >= 0 && u->labels[j].hold < key.hold; --j) u->labels[j + 1] = u->labels[j];
    u->labels[j + 1] = key;
  }
}

// One scratch area for all printers (5 KiB is too much for a small thread's stack, and
// thread_local storage of that size would burden every thread).
SpinLock g_scratch_lock;
CtxUsage g_scratch;

}  // namespace

int64_t ObMallocAllocator::print_usage(char* buf, int64_t len) {
  BufWriter w(buf, len);
  std::lock_guard<SpinLock> guard(g_scratch_lock);
  CtxUsage& u = g_scratch;
  for_each_ctx([&](ObTenantMemory& tenant, ObTenantCtxAllocator& ta) {
    measure(chunk_mgr_, ta, &u);
    w.str("[MEMORY] tenant_id=").num(static_cast<int64_t>(tenant.tenant_id()), 5);
    w.str(" ctx_id=").str(ctx_name(ta.ctx_id()));
    w.str(" hold=").num(u.hold, NUM_WIDTH, true).str(" used=").num(u.used, NUM_WIDTH, true);
    w.str(" limit=").num(ta.limit(), NUM_WIDTH, true).str(" free=").num(u.free, NUM_WIDTH, true);
    w.str(" free_spans=").num(u.free_spans, NUM_WIDTH, true);
    w.str(" washed=").num(u.washed, NUM_WIDTH, true).str(" shards=").num(u.shards);
    w.str(" resident=").num(u.resident, NUM_WIDTH, true);
    w.str(" tenant_hold=").num(tenant.hold(), NUM_WIDTH, true).ch('\n');
    const SpanUsage& s = u.spans;
    w.str("[MEMORY] ctx_id=").str(ctx_name(ta.ctx_id()));
    w.str(" slabs=")
        .num(s.slabs, NUM_WIDTH, true)
        .str(" slab_slots=")
        .num(s.slab_slots, NUM_WIDTH, true);
    w.str(" slab_live=").num(s.slab_live, NUM_WIDTH, true);
    w.str(" empty_slabs=").num(s.empty_slabs, NUM_WIDTH, true);
    w.str(" slab_resident=").num(s.slab_resident, NUM_WIDTH, true);
    w.str(" big=")
        .num(s.big, NUM_WIDTH, true)
        .str(" big_resident=")
        .num(s.big_resident, NUM_WIDTH, true);
    w.str(" other=").num(s.other, NUM_WIDTH, true);
    w.str(" free_resident=").num(s.free_resident, NUM_WIDTH, true);
    w.str(" wash_at=").num(s.wash_at, 9, true);
    w.str(" heap_trims=").num(s.heap_trims, 8, true);
    w.str(" spares_reclaimed=").num(s.spares_reclaimed, NUM_WIDTH, true).ch('\n');
    for (int i = 0; i < u.nlabels; ++i) {
      const LabelUsage& l = u.labels[i];
      w.str("[MEMORY] hold=")
          .num(l.hold, NUM_WIDTH, true)
          .str(" used=")
          .num(l.used, NUM_WIDTH, true);
      w.str(" count=")
          .num(l.count, 8, true)
          .str(" avg_used=")
          .num(l.used / l.count, NUM_WIDTH, true);
      w.str(" block_cnt=").num(l.blocks, 8, true).str(" mod=").str(label_name(l.label)).ch('\n');
    }
  });
  return w.length();
}

int64_t ObMallocAllocator::print_usage_json(char* buf, int64_t len) {
  BufWriter w(buf, len);
  std::lock_guard<SpinLock> guard(g_scratch_lock);
  CtxUsage& u = g_scratch;
  bool first = true;
  w.str("{\"ctxs\":[");
  for_each_ctx([&](ObTenantMemory& tenant, ObTenantCtxAllocator& ta) {
    measure(chunk_mgr_, ta, &u);
    w.str(first ? "{" : ",{");
    first = false;
    w.str("\"tenant_id\":").num(static_cast<int64_t>(tenant.tenant_id()));
    w.str(",\"ctx_id\":").quoted(ctx_name(ta.ctx_id())).str(",\"hold\":").num(u.hold);
    w.str(",\"used\":").num(u.used).str(",\"limit\":").num(ta.limit());
    w.str(",\"free\":").num(u.free).str(",\"free_spans\":").num(u.free_spans);
    w.str(",\"washed\":").num(u.washed).str(",\"resident\":").num(u.resident);
    w.str(",\"shards\":").num(u.shards).str(",\"tenant_hold\":").num(tenant.hold());
    const SpanUsage& s = u.spans;
    w.str(",\"spans\":{\"slabs\":").num(s.slabs).str(",\"slab_slots\":").num(s.slab_slots);
    w.str(",\"slab_live\":").num(s.slab_live).str(",\"empty_slabs\":").num(s.empty_slabs);
    w.str(",\"slab_resident\":").num(s.slab_resident).str(",\"big\":").num(s.big);
    w.str(",\"big_resident\":").num(s.big_resident).str(",\"other\":").num(s.other);
    w.str(",\"free_resident\":").num(s.free_resident).str(",\"wash_at\":").num(s.wash_at);
    w.str(",\"heap_trims\":").num(s.heap_trims);
    w.str(",\"spares_reclaimed\":").num(s.spares_reclaimed);
    w.ch('}');
    w.str(",\"labels\":[");
    for (int i = 0; i < u.nlabels; ++i) {
      const LabelUsage& l = u.labels[i];
      w.str(i == 0 ? "{" : ",{").str("\"mod\":").quoted(label_name(l.label));
      w.str(",\"hold\":").num(l.hold).str(",\"used\":").num(l.used);
      w.str(",\"count\":").num(l.count).str(",\"block_cnt\":").num(l.blocks).ch('}');
    }
    w.str("]}");
  });
  w.str("]}\n");
  return w.length();
}

}  // namespace achunk
