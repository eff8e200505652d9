// ObMallocAllocator's usage dump: per ctx, then per label sorted by hold, as OceanBase's
// "[MEMORY]" lines or as JSON. The numbers come from a scan of the live objects, so
// labels cost nothing on the allocation path.
#include <mutex>

#include "achunk/base/buf_writer.h"
#include "achunk/base/spin_lock.h"
#include "alloc/object/ctx_usage.h"
#include "alloc/object/label.h"
#include "alloc/object/malloc_allocator.h"

namespace achunk {

namespace {

constexpr int NUM_WIDTH = 15;

// Each line's fields, listed once for both forms. `width`: columns in the text form (0:
// as long as needed), numbers grouped as the reference's "%'15ld".
template <typename T>
struct Field {
  const char* name;
  int64_t (*get)(const T&);
  int width;
};

struct CtxRow {
  const ObTenantMemory& tenant;
  const ObTenantCtxAllocator& ta;
  const CtxUsage& u;
};

constexpr Field<CtxRow> CTX_FIELDS[] = {
    {"hold", [](const CtxRow& r) { return r.u.hold; }, NUM_WIDTH},
    {"used", [](const CtxRow& r) { return r.u.used; }, NUM_WIDTH},
    {"limit", [](const CtxRow& r) { return r.ta.limit(); }, NUM_WIDTH},
    {"free", [](const CtxRow& r) { return r.u.free; }, NUM_WIDTH},
    {"free_spans", [](const CtxRow& r) { return r.u.free_spans; }, NUM_WIDTH},
    {"washed", [](const CtxRow& r) { return r.u.washed; }, NUM_WIDTH},
    {"shards", [](const CtxRow& r) { return int64_t{r.u.shards}; }, 0},
    {"resident", [](const CtxRow& r) { return r.u.resident; }, NUM_WIDTH},
    {"tenant_hold", [](const CtxRow& r) { return r.tenant.hold(); }, NUM_WIDTH},
};

constexpr Field<SpanUsage> SPAN_FIELDS[] = {
    {"slabs", [](const SpanUsage& s) { return s.slabs; }, NUM_WIDTH},
    {"slab_slots", [](const SpanUsage& s) { return s.slab_slots; }, NUM_WIDTH},
    {"slab_live", [](const SpanUsage& s) { return s.slab_live; }, NUM_WIDTH},
    {"empty_slabs", [](const SpanUsage& s) { return s.empty_slabs; }, NUM_WIDTH},
    {"slab_resident", [](const SpanUsage& s) { return s.slab_resident; }, NUM_WIDTH},
    {"big", [](const SpanUsage& s) { return s.big; }, NUM_WIDTH},
    {"big_resident", [](const SpanUsage& s) { return s.big_resident; }, NUM_WIDTH},
    {"other", [](const SpanUsage& s) { return s.other; }, NUM_WIDTH},
    {"free_resident", [](const SpanUsage& s) { return s.free_resident; }, NUM_WIDTH},
    {"spares_reclaimed", [](const SpanUsage& s) { return s.spares_reclaimed; }, NUM_WIDTH},
    {"warm_slabs", [](const SpanUsage& s) { return s.warm_slabs; }, NUM_WIDTH},
};

constexpr Field<AllocatorOverhead> OVERHEAD_FIELDS[] = {
    {"thread_states", [](const AllocatorOverhead& o) { return o.thread_states; }, NUM_WIDTH},
    {"thread_heaps", [](const AllocatorOverhead& o) { return o.thread_heaps; }, NUM_WIDTH},
    {"chunk_headers", [](const AllocatorOverhead& o) { return o.chunk_headers; }, NUM_WIDTH},
    {"stats_region", [](const AllocatorOverhead& o) { return o.stats_region; }, NUM_WIDTH},
};

constexpr Field<LabelUsage> LABEL_FIELDS[] = {
    {"hold", [](const LabelUsage& l) { return l.hold; }, NUM_WIDTH},
    {"used", [](const LabelUsage& l) { return l.used; }, NUM_WIDTH},
    {"count", [](const LabelUsage& l) { return l.count; }, 8},
    {"avg_used", [](const LabelUsage& l) { return l.count > 0 ? l.used / l.count : 0; }, NUM_WIDTH},
    {"block_cnt", [](const LabelUsage& l) { return l.blocks; }, 8},
};

// " name=value" for each field.
template <typename T, size_t N>
void put_text(BufWriter& w, const Field<T> (&fields)[N], const T& v) {
  for (const Field<T>& f : fields) w.ch(' ').str(f.name).ch('=').num(f.get(v), f.width, true);
}

// ",\"name\":value" for each field (`first`: no comma before the first).
template <typename T, size_t N>
void put_json(BufWriter& w, const Field<T> (&fields)[N], const T& v, bool first = false) {
  for (const Field<T>& f : fields) {
    if (!first) w.ch(',');
    first = false;
    w.quoted(f.name).ch(':').num(f.get(v));
  }
}

// One scratch area for all printers (5 KiB is too much for a small thread's stack, and
// thread_local storage of that size would burden every thread).
ACHUNK_STATIC_SPIN_LOCK(g_scratch_lock, ForkRole::HELD);
CtxUsage g_scratch;

}  // namespace

void ObMallocAllocator::visit_usage_fork_locks(ForkLockVisitor& v) {
  v.visit(g_scratch_lock, "usage_printer.scratch");
}

AllocatorOverhead ObMallocAllocator::overhead() {
  AllocatorOverhead o;
  const ThreadStatePoolStats states = thread_state_pool_stats();
  o.thread_states =
      (states.in_use + states.free - states.washed) * static_cast<int64_t>(sizeof(ThreadState));
  for_each_ctx([&](ObTenantMemory&, ObTenantCtxAllocator& ta) {
    o.thread_heaps += ta.object_set().heap_bytes();
  });
  o.chunk_headers = chunk_mgr_.mapped_chunks() * ACHUNK_HEADER_SIZE;
  return o;
}

int64_t ObMallocAllocator::print_usage(char* buf, int64_t len, const AllocatorOverhead* overhead) {
  BufWriter w(buf, len);
  std::lock_guard<SpinLock> guard(g_scratch_lock);
  CtxUsage& u = g_scratch;
  if (overhead != nullptr) {
    w.str("[MEMORY] overhead=").num(overhead->total(), NUM_WIDTH, true);
    put_text(w, OVERHEAD_FIELDS, *overhead);
    w.ch('\n');
  }
  for_each_ctx([&](ObTenantMemory& tenant, ObTenantCtxAllocator& ta) {
    measure_ctx_usage(chunk_mgr_, ta, &u);
    w.str("[MEMORY] tenant_id=").num(static_cast<int64_t>(tenant.tenant_id()), 5);
    w.str(" ctx_id=").str(ctx_name(ta.ctx_id()));
    put_text(w, CTX_FIELDS, CtxRow{tenant, ta, u});
    w.str("\n[MEMORY] ctx_id=").str(ctx_name(ta.ctx_id()));
    put_text(w, SPAN_FIELDS, u.spans);
    w.ch('\n');
    for (int i = 0; i < u.nlabels; ++i) {
      w.str("[MEMORY]");
      put_text(w, LABEL_FIELDS, u.labels[i]);
      w.str(" mod=").str(label_name(u.labels[i].label)).ch('\n');
    }
  });
  return w.length();
}

int64_t ObMallocAllocator::print_usage_json(char* buf, int64_t len,
                                            const AllocatorOverhead* overhead) {
  BufWriter w(buf, len);
  std::lock_guard<SpinLock> guard(g_scratch_lock);
  CtxUsage& u = g_scratch;
  bool first = true;
  w.ch('{');
  if (overhead != nullptr) {
    w.str("\"overhead\":{\"total\":").num(overhead->total());
    put_json(w, OVERHEAD_FIELDS, *overhead);
    w.str("},");
  }
  w.str("\"ctxs\":[");
  for_each_ctx([&](ObTenantMemory& tenant, ObTenantCtxAllocator& ta) {
    measure_ctx_usage(chunk_mgr_, ta, &u);
    w.str(first ? "{" : ",{");
    first = false;
    w.str("\"tenant_id\":").num(static_cast<int64_t>(tenant.tenant_id()));
    w.str(",\"ctx_id\":").quoted(ctx_name(ta.ctx_id()));
    put_json(w, CTX_FIELDS, CtxRow{tenant, ta, u});
    w.str(",\"spans\":{");
    put_json(w, SPAN_FIELDS, u.spans, true);
    w.str("},\"labels\":[");
    for (int i = 0; i < u.nlabels; ++i) {
      w.str(i == 0 ? "{" : ",{").str("\"mod\":").quoted(label_name(u.labels[i].label));
      put_json(w, LABEL_FIELDS, u.labels[i]);
      w.ch('}');
    }
    w.str("]}");
  });
  w.str("]}\n");
  return w.length();
}

}  // namespace achunk
