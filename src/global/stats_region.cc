#include "global/stats_region.h"

#include <cstring>

#include "achunk/base/buf_writer.h"
#include "achunk/base/error_report.h"
#include "achunk/base/options.h"
#include "alloc/object/label.h"
#include "alloc/object/ob_mem_attr.h"

namespace achunk {

namespace {

using stats::FieldDesc;
using stats::FieldUnit;

std::atomic<uint64_t> g_generation{0};

// Values the region adds to the chunk manager's snapshot.
struct Extra {
  int64_t ctx_count = 0;
  int64_t requests_served = 0;
  int64_t housekeeping_running = 0;
  int64_t label_count = 0;
  int64_t usage_scans = 0;
  int64_t usage_age_ms = -1;
  ThreadStatePoolStats threads;
  int64_t lock_sleeps = 0;
  AllocatorOverhead overhead;
};

bool has(const char* name, const char* part) {
  return std::strstr(name, part) != nullptr;
}

FieldUnit chunk_unit(const char* name) {
  if (has(name, "maps") || has(name, "hits") || has(name, "misses") || has(name, "count") ||
      has(name, "pushes") || has(name, "pops")) {
    return FieldUnit::COUNT;
  }
  return has(name, "_ms") ? FieldUnit::MS : FieldUnit::BYTES;
}

FieldUnit option_unit(const OptionDef& def) {
  if (def.type == OptionType::SIZE) return FieldUnit::BYTES;
  if (def.type == OptionType::BOOL) return FieldUnit::BOOL;
  return has(def.name, "_ms") ? FieldUnit::MS : FieldUnit::COUNT;
}

// Every 64-bit field in publication order: f(prefix, name, unit, value). The field table
// and each refresh walk the same list, so a field cannot be named but not written.
template <typename F>
void visit_fields(const ChunkMgrStats& s, const int64_t* options, const Extra& x, F f) {
  for (const ChunkStatField& field : CHUNK_STAT_FIELDS) {
    f("chunk_mgr.", field.name, chunk_unit(field.name), s.*field.member);
  }
  f("chunk_mgr.", "max_map_count", FieldUnit::COUNT, s.max_map_count);
  for (const ChunkSlotStats& slot : s.slots) {
    char prefix[16];
    BufWriter(prefix, sizeof(prefix)).str("cache.").num(slot.size_mb).str("mb.");
    for (const ChunkSlotField& field : CHUNK_SLOT_FIELDS) {
      f(prefix, field.name, chunk_unit(field.name), slot.*field.member);
    }
  }
  for (int i = 0; i < OPTION_COUNT; ++i) {
    f("option.", OPTION_TABLE[i].name, option_unit(OPTION_TABLE[i]), options[i]);
  }
  f("", "ctx_count", FieldUnit::COUNT, x.ctx_count);
  f("", "requests_served", FieldUnit::COUNT, x.requests_served);
  f("", "housekeeping_running", FieldUnit::BOOL, x.housekeeping_running);
  f("", "label_count", FieldUnit::COUNT, x.label_count);
  f("", "usage_scans", FieldUnit::COUNT, x.usage_scans);
  f("", "usage_age_ms", FieldUnit::MS, x.usage_age_ms);
  f("", "thread_states", FieldUnit::COUNT, x.threads.in_use);
  f("", "thread_states_free", FieldUnit::COUNT, x.threads.free);
  f("", "thread_states_washed", FieldUnit::COUNT, x.threads.washed);
  f("", "lock_sleeps", FieldUnit::COUNT, x.lock_sleeps);
  f("", "overhead", FieldUnit::BYTES, x.overhead.total());
  f("overhead.", "thread_states", FieldUnit::BYTES, x.overhead.thread_states);
  f("overhead.", "thread_heaps", FieldUnit::BYTES, x.overhead.thread_heaps);
  f("overhead.", "chunk_headers", FieldUnit::BYTES, x.overhead.chunk_headers);
  f("overhead.", "stats_region", FieldUnit::BYTES, x.overhead.stats_region);
}

constexpr int THP_SIZE = sizeof(ChunkMgrStats::thp_mode);

// The slot sizes of a snapshot (set even in an empty one), so the names are fixed.
ChunkMgrStats named_stats() {
  ChunkMgrStats s;
  for (int i = 0; i < ChunkMgrStats::SLOT_LINES; ++i) {
    s.slots[i].size_mb =
        i == ChunkMgrStats::SLOT_LINES - 1 ? ChunkSlotStats::HUGE_LINE_MB : 2 * (i + 1);
  }
  return s;
}

}  // namespace

int collect_ctx_rows(ObMallocAllocator& allocator, stats::CtxRow* rows, int cap) {
  int n = 0;
  allocator.for_each_ctx([&](ObTenantMemory& tenant, ObTenantCtxAllocator& ta) {
    if (n == cap) return;
    stats::CtxRow& r = rows[n++];
    r.tenant_id = tenant.tenant_id();
    r.ctx_id = ta.ctx_id();
    r.hold = ta.hold();
    r.limit = ta.limit();
    r.tenant_hold = tenant.hold();
    r.tenant_limit = tenant.limit();
    BufWriter(r.ctx_name, sizeof(r.ctx_name)).str(ctx_name(ta.ctx_id()));
  });
  return n;
}

void measure_usage(ObMallocAllocator& allocator, UsageScan* scan) {
  scan->nctx = 0;
  scan->ntop = 0;
  CtxUsage& u = scan->scratch;
  allocator.for_each_ctx([&](ObTenantMemory& tenant, ObTenantCtxAllocator& ta) {
    if (scan->nctx == static_cast<int>(stats::CTX_CAPACITY)) return;
    measure_ctx_usage(allocator.chunk_mgr(), ta, &u);
    UsageScan::Ctx& c = scan->ctxs[scan->nctx++];
    c.tenant_id = tenant.tenant_id();
    c.ctx_id = ta.ctx_id();
    c.used = u.used;
    c.free_spans = u.free_spans;
    c.washed = u.washed;
    c.free_resident = u.spans.free_resident;
    c.hold = ta.hold();
    const SpanUsage& sp = u.spans;
    c.spans = stats::CtxSpans{
        sp.slabs, sp.slab_slots,   sp.slab_live, sp.empty_slabs,      sp.slab_resident,
        sp.big,   sp.big_resident, sp.other,     sp.spares_reclaimed, sp.warm_slabs};
    // u.labels is sorted by hold: stop at the first one that would not make the list.
    for (int i = 0; i < u.nlabels; ++i) {
      const LabelUsage& l = u.labels[i];
      const int cap = static_cast<int>(stats::LABEL_CAPACITY);
      if (scan->ntop == cap && scan->top[cap - 1].hold >= l.hold) break;
      int j = scan->ntop < cap ? scan->ntop++ : cap - 1;
      for (; j > 0 && scan->top[j - 1].hold < l.hold; --j) scan->top[j] = scan->top[j - 1];
      stats::LabelRow& r = scan->top[j];
      r = stats::LabelRow{};
      r.tenant_id = tenant.tenant_id();
      r.ctx_id = ta.ctx_id();
      r.hold = l.hold;
      r.used = l.used;
      r.count = l.count;
      BufWriter(r.label, sizeof(r.label)).str(label_name(l.label));
      BufWriter(r.ctx_name, sizeof(r.ctx_name)).str(ctx_name(ta.ctx_id()));
    }
  });
}

StatsRegion::StatsRegion(Os& os, AChunkMgr& chunk_mgr, StatsHost& host)
    : os_(os), chunk_mgr_(chunk_mgr), host_(host) {}

StatsRegion::~StatsRegion() {
  destroy();
}

void StatsRegion::tick(int64_t now_us, bool housekeeping) {
  if (busy_.exchange(true, std::memory_order_acquire)) return;
  if (!owns_region()) {
    busy_.store(false, std::memory_order_release);
    return;
  }
  next_us_.store(now_us + REFRESH_US, std::memory_order_relaxed);
  if (host_.option_value(OPT_STATS_REGION) == 0) {
    destroy();
  } else if (region_.addr != nullptr || create()) {
    const uint64_t answered = serve_request(housekeeping);
    refresh(now_us, housekeeping);
    if (answered != 0) __atomic_store_n(&control()->resp_seq, answered, __ATOMIC_RELEASE);
  }
  busy_.store(false, std::memory_order_release);
}

bool StatsRegion::create() {
  if (create_failed_) return false;
  int err = 0;
  region_ = os_.map_shared_region(stats::MEMFD_NAME, stats::REGION_SIZE, &err);
  if (region_.addr == nullptr) {
    create_failed_ = true;
    char line[160];
    BufWriter(line, sizeof(line))
        .str("achunk: no stats region (memfd_create/mmap failed, errno ")
        .num(err)
        .str("); achunk-dump cannot see this process");
    write_stderr_line(line);
    return false;
  }
  std::memset(region_.addr, 0, stats::REGION_SIZE);
  region_pid_ = os_.process_id();
  mapped_bytes_.store(stats::REGION_SIZE, std::memory_order_relaxed);
  stats::Header* h = header();
  h->major = stats::MAJOR;
  h->minor = stats::MINOR;
  h->header_size = sizeof(stats::Header);
  h->region_size = stats::REGION_SIZE;
  h->pid = os_.process_id();
  h->start_time = os_.process_start_time();
  h->generation = g_generation.fetch_add(1, std::memory_order_relaxed) + 1;
  h->ctx_offset = stats::CTX_OFFSET;
  h->ctx_capacity = stats::CTX_CAPACITY;
  h->ctx_stride = sizeof(stats::CtxRow);
  h->control_offset = stats::CONTROL_OFFSET;
  h->control_size = sizeof(stats::Control);
  h->label_offset = stats::LABEL_OFFSET;
  h->label_capacity = stats::LABEL_CAPACITY;
  h->label_stride = sizeof(stats::LabelRow);
  write_field_table();
  last_request_ = 0;
  // The magic last: a reader that sees it sees a complete header and field table.
  __atomic_store_n(&h->magic, stats::MAGIC, __ATOMIC_RELEASE);
  return true;
}

void StatsRegion::write_field_table() {
  stats::Header* h = header();
  unsigned char* base = mutable_bytes();
  uint32_t n = 0;
  int64_t options[OPTION_COUNT] = {};
  visit_fields(named_stats(), options, Extra{},
               [&](const char* prefix, const char* name, FieldUnit unit, int64_t) {
                 FieldDesc* d = reinterpret_cast<FieldDesc*>(base + stats::FIELD_OFFSET) + n;
                 BufWriter(d->name, sizeof(d->name)).str(prefix).str(name);
                 d->type = stats::FieldType::I64;
                 d->unit = unit;
                 d->offset = stats::DATA_OFFSET + 8 * n;
                 d->size = 8;
                 ++n;
               });
  FieldDesc* thp = reinterpret_cast<FieldDesc*>(base + stats::FIELD_OFFSET) + n;
  BufWriter(thp->name, sizeof(thp->name)).str("chunk_mgr.transparent_hugepages");
  thp->type = stats::FieldType::STR;
  thp->unit = FieldUnit::NONE;
  thp->offset = stats::DATA_OFFSET + 8 * n;
  thp->size = THP_SIZE;
  h->field_offset = stats::FIELD_OFFSET;
  h->field_count = n + 1;
  h->data_offset = stats::DATA_OFFSET;
  h->data_size = 8 * n + THP_SIZE;
}

void StatsRegion::refresh(int64_t now_us, bool housekeeping) {
  // Before the sequence lock turns odd: a scan takes long, and readers would retry.
  if (housekeeping && now_us >= next_usage_us_) {
    host_.measure_usage(&usage_);
    next_usage_us_ = now_us + USAGE_REFRESH_US;
    usage_at_us_ = now_us;
    ++usage_scans_;
  }
  // The OS figures: statm always (a read of one small file); the resident bytes of the
  // cached chunks (a mincore per chunk) only from the housekeeping thread.
  ChunkMgrStats s = chunk_mgr_.get_stats(housekeeping);
  if (housekeeping) {
    cache_resident_ = s.cache_resident;
  } else {
    const OsMemoryInfo info = os_.memory_info();
    s.resident_size = info.resident_size;
    s.virtual_memory_used = info.virtual_memory_used;
    s.max_map_count = info.max_map_count;
    std::memcpy(s.thp_mode, info.thp_mode, THP_SIZE);
    s.cache_resident = cache_resident_;
  }
  int64_t options[OPTION_COUNT];
  for (int i = 0; i < OPTION_COUNT; ++i) options[i] = host_.option_value(i);
  Extra x;
  x.requests_served = served_;
  x.housekeeping_running = host_.housekeeping_running() ? 1 : 0;
  x.label_count = usage_.ntop;
  x.usage_scans = usage_scans_;
  x.usage_age_ms = usage_at_us_ < 0 ? -1 : (now_us - usage_at_us_) / 1000;
  x.threads = host_.thread_states();
  x.lock_sleeps = host_.lock_sleeps();
  x.overhead = host_.overhead();
  x.overhead.stats_region = mapped_bytes();  // this region, mapped while it refreshes

  stats::Header* h = header();
  unsigned char* base = mutable_bytes();
  // Odd before any data is written: an acquire read-modify-write keeps the writes below
  // it (a fence would do too, but ThreadSanitizer does not model fences).
  const uint64_t seq = __atomic_fetch_add(&h->seq, 1, __ATOMIC_ACQ_REL);
  auto* rows = reinterpret_cast<stats::CtxRow*>(base + stats::CTX_OFFSET);
  x.ctx_count = host_.collect_ctx(rows, stats::CTX_CAPACITY);
  publish_usage(rows, static_cast<int>(x.ctx_count));
  uint32_t n = 0;
  visit_fields(s, options, x, [&](const char*, const char*, FieldUnit, int64_t v) {
    std::memcpy(base + stats::DATA_OFFSET + 8 * n, &v, 8);
    ++n;
  });
  std::memcpy(base + stats::DATA_OFFSET + 8 * n, s.thp_mode, THP_SIZE);
  h->heartbeat_ns = now_us * 1000;
  h->refreshes += 1;
  __atomic_store_n(&h->seq, seq + 2, __ATOMIC_RELEASE);
}

void StatsRegion::publish_usage(stats::CtxRow* rows, int nrows) {
  // Both lists follow the directory's order, so one pass pairs them (a ctx created since
  // the scan is skipped over).
  int k = 0;
  for (int i = 0; i < nrows; ++i) {
    stats::CtxRow& r = rows[i];
    int m = k;
    while (m < usage_.nctx &&
           (usage_.ctxs[m].tenant_id != r.tenant_id || usage_.ctxs[m].ctx_id != r.ctx_id)) {
      ++m;
    }
    if (m == usage_.nctx) {
      r.used = r.free_spans = r.washed = r.free_resident = r.usage_hold = -1;
      r.spans = stats::UNKNOWN_SPANS;
      continue;
    }
    r.used = usage_.ctxs[m].used;
    r.free_spans = usage_.ctxs[m].free_spans;
    r.washed = usage_.ctxs[m].washed;
    r.free_resident = usage_.ctxs[m].free_resident;
    r.usage_hold = usage_.ctxs[m].hold;
    r.spans = usage_.ctxs[m].spans;
    k = m + 1;
  }
  std::memcpy(mutable_bytes() + stats::LABEL_OFFSET, usage_.top,
              usage_.ntop * sizeof(stats::LabelRow));
}

uint64_t StatsRegion::serve_request(bool housekeeping) {
  stats::Control* c = control();
  const uint64_t req = __atomic_load_n(&c->req_seq, __ATOMIC_ACQUIRE);
  if (req == last_request_) return 0;
  // A private copy: the tool (or anything else with access) may still be writing.
  stats::Control r;
  std::memcpy(&r, c, sizeof(r));
  r.option[sizeof(r.option) - 1] = '\0';
  r.value[sizeof(r.value) - 1] = '\0';
  const auto op = static_cast<stats::ControlOp>(r.op);
  const bool release =
      op == stats::ControlOp::RELEASE_EXPIRED || op == stats::ControlOp::RELEASE_ALL;
  // Free spans are washed under ctx locks, which a chunk-level caller may hold: leave a
  // release to the housekeeping thread when there is one.
  if (release && !housekeeping && host_.housekeeping_running()) return 0;

  stats::Control a{};
  a.result = static_cast<int32_t>(stats::ControlResult::OK);
  BufWriter msg(a.message, sizeof(a.message));
  if (op == stats::ControlOp::SET_OPTION) {
    const int id = find_option(r.option, std::strlen(r.option));
    const bool settable = id == OPT_MEMORY_LIMIT || id == OPT_MEMORY_CHUNK_CACHE_SIZE ||
                          id == OPT_CHUNK_CACHE_TTL_MS || id == OPT_SPAN_IDLE_MS ||
                          id == OPT_RELEASE_INTERVAL_MS || id == OPT_DEALLOC_MISMATCH;
    int64_t v = 0;
    char err[160];
    if (id < 0) {
      a.result = static_cast<int32_t>(stats::ControlResult::BAD_REQUEST);
      msg.str("unknown option '").str(r.option).str("'");
    } else if (!settable) {
      a.result = static_cast<int32_t>(stats::ControlResult::REJECTED);
      msg.str(r.option).str(": not settable from achunk-dump");
    } else if (!parse_option_value(OPTION_TABLE[id], r.value, std::strlen(r.value), &v, err,
                                   sizeof(err))) {
      a.result = static_cast<int32_t>(stats::ControlResult::REJECTED);
      msg.str(err).str(" (nothing changed)");
    } else {
      a.before = host_.option_value(id);
      if (host_.try_set_option(id, v) == StatsHost::SetResult::BUSY) return 0;  // next tick
      a.after = host_.option_value(id);
      msg.str(r.option).str(" set");
    }
  } else if (release) {
    const bool all = op == stats::ControlOp::RELEASE_ALL;
    a.before = os_.memory_info().resident_size;
    const int64_t total_before = chunk_mgr_.get_total_hold();
    if (all) {
      chunk_mgr_.sync_wash();
    } else {
      chunk_mgr_.release_expired();
    }
    a.unmapped = total_before - chunk_mgr_.get_total_hold();
    if (housekeeping) {
      a.washed = host_.wash_spans(all);
      msg.str(all ? "released the cache and every free span" : "released expired chunks and spans");
    } else {
      msg.str("released cached chunks; free spans are washed only by the housekeeping thread");
    }
    a.after = os_.memory_info().resident_size;
  } else {
    a.result = static_cast<int32_t>(stats::ControlResult::BAD_REQUEST);
    msg.str("unknown operation ").num(r.op);
  }
  std::memcpy(c->message, a.message, sizeof(a.message));
  c->result = a.result;
  c->before = a.before;
  c->after = a.after;
  c->unmapped = a.unmapped;
  c->washed = a.washed;
  last_request_ = req;
  ++served_;
  return req;
}

void StatsRegion::mark_exited() {
  if (busy_.exchange(true, std::memory_order_acquire)) return;
  if (region_.addr != nullptr && owns_region()) {
    __atomic_store_n(&header()->generation, 0, __ATOMIC_RELEASE);
  }
  busy_.store(false, std::memory_order_release);
}

void StatsRegion::destroy() {
  if (region_.addr == nullptr) return;
  __atomic_store_n(&header()->generation, 0, __ATOMIC_RELEASE);
  os_.unmap_shared_region(region_, stats::REGION_SIZE);
  region_ = {};
  mapped_bytes_.store(0, std::memory_order_relaxed);
}

// Cold: with the child's other fork code, so a forked child faults in few text pages.
__attribute__((cold)) void StatsRegion::forget_after_fork(int64_t not_before_us) {
  // Only this thread exists in the child: whoever held busy_ is gone.
  os_.drop_parents_region(region_, stats::REGION_SIZE);
  region_ = {};
  mapped_bytes_.store(0, std::memory_order_relaxed);
  create_failed_ = false;
  next_usage_us_ = 0;
  next_us_.store(not_before_us, std::memory_order_relaxed);
  busy_.store(false, std::memory_order_release);
}

}  // namespace achunk
