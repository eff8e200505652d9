#include "alloc/object/malloc_allocator.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "achunk/base/alloc_failure.h"
#include "achunk/base/error_report.h"
#include "achunk/base/tls.h"
#include "achunk/chunk/chunk_registry.h"
#include "alloc/object/label.h"
#include "alloc/object/object_check.h"

namespace achunk {

namespace {

constexpr const char* CTX_NAMES[MAX_CTX_ID] = {
    "DEFAULT_CTX_ID",    "MEMSTORE_CTX_ID", "EXECUTE_CTX_ID",  "TRANS_CTX_MGR_ID",
    "PLAN_CACHE_CTX_ID", "WORK_AREA",       "GLIBC",           "CO_STACK",
    "LIBEASY",           "LOGGER_CTX_ID",   "KVSTORE_CACHE_ID"};

AChunk* fail(AllocFailKind kind, int64_t size) {
  set_alloc_failure(AllocFailure{kind, 0, size, 0, 0});
  return nullptr;
}

// Whether ptr, in a live chunk of ours that holds no live span for it, is where an
// object of a span given back since started: a freed object whose pages may be washed.
bool freed_object_at(AChunk* chunk, void* ptr) {
  if (header_state(load_header(ptr)) == ObjectState::FREE) return true;
  if (!chunk->is_valid() || chunk_meta(chunk)->kind_ != BlockSet::OWNER_OBJECT_SET) return false;
  // A big object's user pointer is 16 bytes into its span, or a block for one placed for
  // an alignment, and spans start at blocks.
  const int64_t off = static_cast<char*>(ptr) - static_cast<char*>(chunk->data());
  return off >= BIG_OBJECT_OFFSET &&
         (off % ABLOCK_SIZE == BIG_OBJECT_OFFSET || off % ABLOCK_SIZE == 0);
}

// The object header of a pointer ob_malloc handed out, after checking the registry and
// the chunk and block headers on the way; 0 (after a report) when it is not one. Reads
// no memory outside a chunk the registry knows.
uint64_t checked_header(void* ptr, ABlock** block_out = nullptr) {
  if ((reinterpret_cast<uintptr_t>(ptr) & 15) != 0) {
    report_error(ErrorKind::INVALID_FREE, ptr, "not 16-byte aligned: not from ob_malloc");
    return 0;
  }
  if (!chunk_registry::is_chunk(header_of(ptr))) {
    if (chunk_registry::was_released(header_of(ptr))) {
      report_error(ErrorKind::DOUBLE_FREE, ptr, "its chunk was freed: already freed");
    } else {
      report_error(ErrorKind::INVALID_FREE, ptr,
                   "no chunk of achunk holds it (static, stack, foreign or interior memory)");
    }
    return 0;
  }
  AChunk* chunk = AChunk::ptr2chunk(header_of(ptr));
  const BlockChunkMeta* meta = chunk_meta(chunk);
  ABlock* block = chunk->is_valid() && meta->kind_ == BlockSet::OWNER_OBJECT_SET
                      ? BlockSet::ptr2block(header_of(ptr))
                      : nullptr;
  if (block == nullptr || !block->in_use()) {
    if (chunk->is_valid() && meta->kind_ == BlockSet::OWNER_PAGE_MANAGER) {
      report_error(ErrorKind::INVALID_FREE, ptr,
                   "memory of a context's page manager: free it through its context");
    } else if (freed_object_at(chunk, ptr)) {
      report_object(ErrorKind::DOUBLE_FREE, ptr, load_header(ptr),
                    "object is already free (its span or chunk too)");
    } else {
      report_error(ErrorKind::INVALID_FREE, ptr, "no ob_malloc chunk or block holds it");
    }
    return 0;
  }
  if (slab_of(block)->sc_ == Slab::FOREIGN) {
    report_error(ErrorKind::INVALID_FREE, ptr,
                 "memory of a memory context: free it through its context");
    return 0;
  }
  // The caller checks the canary next, whose line the header names: fetch both together.
  if (const int sc = slab_of(block)->sc_; sc < SIZE_CLASS_COUNT) prefetch_tail_bounds(ptr, sc);
  // An aligned pointer's pad header leads to its object, which the caller checks.
  if (header_state(load_header(ptr)) != ObjectState::ALIGNED &&
      !ObjectSet::is_object_start(ptr, block)) {
    report_error(ErrorKind::INVALID_FREE, ptr, "not the start of an object ob_malloc handed out");
    return 0;
  }
  if (block_out != nullptr) *block_out = block;
  return live_header(ptr, true);
}

}  // namespace

void ObMallocAllocator::fill_front(ObTenantCtxAllocator& ta, int64_t size, const ObMemAttr& attr,
                                   uint16_t label) {
  // No entry for no label: the fast path reads the label without a null check.
  if (size > SMALL_OBJECT_MAX || attr.label_ == nullptr) return;
  ThreadHeap* heap = ta.object_set().existing_heap();
  uint64_t bytes[2];
  if (heap == nullptr || !read_label_bytes(attr.label_, bytes)) return;
  malloc_front::entry_for(attr.tenant_id_, attr.ctx_id_, attr.label_) =
      malloc_front::Entry{attr.label_,
                          {bytes[0], bytes[1]},
                          attr.tenant_id_,
                          heap,
                          attr.ctx_id_,
                          id_,
                          make_header(ObjectState::IN_USE, label, 0) | PLAIN_CLASS_BIT};
}

const char* ctx_name(int ctx_id) {
  return ctx_id >= 0 && ctx_id < MAX_CTX_ID ? CTX_NAMES[ctx_id] : "INVALID_CTX_ID";
}

namespace {
std::atomic<uint32_t> g_next_allocator_id{1};
}  // namespace

ObMallocAllocator::ObMallocAllocator(AChunkMgr& chunk_mgr)
    : chunk_mgr_(chunk_mgr), id_(g_next_allocator_id.fetch_add(1, std::memory_order_relaxed)) {}

ObMallocAllocator::~ObMallocAllocator() {
  for (int t = 0; t < MAX_TENANTS; ++t) {
    for (auto& slot : tenants_[t].ctx) {
      if (ObTenantCtxAllocator* ta = slot.load()) ta->~ObTenantCtxAllocator();
    }
    if (tenants_[t].memory != nullptr) tenants_[t].memory->~ObTenantMemory();
  }
}

ObMallocAllocator::Tenant* ObMallocAllocator::find_tenant(uint64_t tenant_id, bool create) {
  for (Tenant& t : tenants_) {
    if (t.ready.load(std::memory_order_acquire) && t.memory->tenant_id() == tenant_id) return &t;
  }
  if (!create) return nullptr;
  std::lock_guard<SpinLock> guard(lock_);
  for (int i = 0; i < MAX_TENANTS; ++i) {
    Tenant& t = tenants_[i];
    if (t.ready.load(std::memory_order_relaxed)) {
      if (t.memory->tenant_id() == tenant_id) return &t;
      continue;
    }
    t.memory = new (tenant_storage_[i]) ObTenantMemory(tenant_id);
    t.ready.store(true, std::memory_order_release);
    return &t;
  }
  return nullptr;
}

ObTenantMemory* ObMallocAllocator::get_tenant(uint64_t tenant_id) {
  Tenant* t = find_tenant(tenant_id, true);
  return t != nullptr ? t->memory : nullptr;
}

ObTenantCtxAllocator* ObMallocAllocator::get_tenant_ctx_allocator(uint64_t tenant_id, int ctx_id) {
  if (ctx_id < 0 || ctx_id >= MAX_CTX_ID) return nullptr;
  Tenant* t = find_tenant(tenant_id, true);
  if (t == nullptr) return nullptr;
  if (ObTenantCtxAllocator* ta = t->ctx[ctx_id].load(std::memory_order_acquire)) return ta;
  std::lock_guard<SpinLock> guard(lock_);
  if (ObTenantCtxAllocator* ta = t->ctx[ctx_id].load(std::memory_order_relaxed)) return ta;
  const int ti = static_cast<int>(t - tenants_);
  auto* ta = new (ctx_storage_[ti][ctx_id])
      ObTenantCtxAllocator(chunk_mgr_, *t->memory, ctx_id, span_idle_us_);
  t->ctx[ctx_id].store(ta, std::memory_order_release);
  return ta;
}

bool ObMallocAllocator::set_tenant_limit(uint64_t tenant_id, int64_t bytes) {
  ObTenantMemory* t = get_tenant(tenant_id);
  if (t == nullptr) return false;
  t->set_limit(bytes);
  return true;
}

bool ObMallocAllocator::set_tenant_ctx_limit(uint64_t tenant_id, int ctx_id, int64_t bytes) {
  ObTenantCtxAllocator* ta = get_tenant_ctx_allocator(tenant_id, ctx_id);
  if (ta == nullptr) return false;
  ta->set_limit(bytes);
  return true;
}

void ObMallocAllocator::visit_fork_locks(ForkLockVisitor& v) {
  visit_usage_fork_locks(v);
  v.visit(lock_, "malloc_allocator.directory");
}

int64_t ObMallocAllocator::wash_stale_spans(int64_t min_free_us) {
  int64_t washed = 0;
  for_each_ctx([&](ObTenantMemory&, ObTenantCtxAllocator& ta) {
    washed += ta.object_set().wash_stale_spans(min_free_us);
  });
  // The thread states exited threads left go back by the same idle rule as warm slabs.
  washed += wash_idle_thread_states(min_free_us == 0) * static_cast<int64_t>(sizeof(ThreadState));
  return washed;
}

void ObMallocAllocator::flush_thread_caches() {
  for_each_ctx(
      [](ObTenantMemory&, ObTenantCtxAllocator& ta) { ta.object_set().flush_thread_heap(); });
}

void ObMallocAllocator::unstash_thread_caches() {
  for_each_ctx([](ObTenantMemory&, ObTenantCtxAllocator& ta) {
    if (ThreadHeap* heap = ta.object_set().existing_heap()) heap->unstash_all();
  });
}

void* ObMallocAllocator::alloc_refill(ThreadHeap& heap, uint16_t label, int64_t size,
                                      const ObMemAttr& attr, int sc) {
  const uint64_t in_use = make_header(ObjectState::IN_USE, label, 0);
  void* p = sc >= 0 ? heap.alloc_object_with(sc, size, in_use)
                    : heap.alloc_object_with(size_class_of(size), size, in_use | PLAIN_CLASS_BIT);
  return p != nullptr ? p : alloc_slow(size, attr, 0, sc);
}

void* ObMallocAllocator::alloc_static_miss(int64_t size, const ObMemAttr& attr) {
  const malloc_front::Entry& e = malloc_front::static_entry();
  if (static_entry_valid(e, attr, id_) &&
      static_cast<uint64_t>(size) <= static_cast<uint64_t>(SMALL_OBJECT_MAX)) {
    return alloc_refill(*e.heap, header_label(e.in_use_header), size, attr);
  }
  return alloc_static_slow(size, attr);
}

void* ObMallocAllocator::alloc_static_slow(int64_t size, const ObMemAttr& attr) {
  void* p = alloc_slow(size, attr);
  if (p != nullptr) adopt_static_entry(attr);
  return p;
}

void ObMallocAllocator::adopt_static_entry(const ObMemAttr& attr) {
  const malloc_front::Entry& e =
      malloc_front::entry_for(attr.tenant_id_, attr.ctx_id_, attr.label_);
  // Filled by the slow path unless the object was big or the label unreadable.
  if (e.label == attr.label_ && e.allocator_id == id_ && e.tenant_id == attr.tenant_id_ &&
      e.ctx_id == attr.ctx_id_) {
    malloc_front::static_entry() = e;
    malloc_front::static_entry().label = reinterpret_cast<const char*>(&attr);
  }
}

void* ObMallocAllocator::alloc_align(int64_t align, int64_t size, const ObMemAttr& attr) {
  return alloc_align_in(align, size, attr, false);
}

void* ObMallocAllocator::alloc_align_static(int64_t align, int64_t size, const ObMemAttr& attr) {
  return alloc_align_in(align, size, attr, true);
}

void* ObMallocAllocator::alloc_slow(int64_t size, const ObMemAttr& attr, int64_t head_align,
                                    int sc) {
  ObjectSet::run_slow_path_hook();
  if (size < 0 || size > OBJECT_MAX_SIZE) return fail(AllocFailKind::INVALID_SIZE, size);
  // The thread allocates: from here on it caches what it finds. Without a state (a small
  // object within its shared budget, or after a failed mapping) it looks everything up
  // each time. A big object takes one: the state's pages are small beside it, and a
  // thread that allocates only big buffers would otherwise intern its label every time.
  ThreadState* state =
      thread_state_owned() || size > SMALL_OBJECT_MAX || !ObjectSet::within_shared_budget()
          ? ObjectSet::own_thread_state()
          : nullptr;
  // The last (directory, tenant, ctx) this thread allocated from: most threads allocate
  // from one or two, and the directory scan is then skipped.
  ObTenantCtxAllocator* ta = nullptr;
  if (state != nullptr && state->ta_cache.allocator_id == id_ &&
      state->ta_cache.tenant_id == attr.tenant_id_ && state->ta_cache.ctx_id == attr.ctx_id_) {
    ta = state->ta_cache.ta;
  }
  if (ta == nullptr) {
    ta = get_tenant_ctx_allocator(attr.tenant_id_, attr.ctx_id_);
    if (ta == nullptr) return fail(AllocFailKind::INVALID_ARGUMENT, size);
    if (state != nullptr) state->ta_cache = TaCache{id_, attr.tenant_id_, attr.ctx_id_, ta};
  }
  const uint16_t label = label_id_cached(attr.label_);
  ObjectSet& set = ta->object_set();
  auto try_alloc = [&] {
    if (head_align > 0) return set.alloc_big(size, label, head_align);
    return sc >= 0 ? set.alloc_in_class(sc, size, label) : set.alloc(size, label);
  };
  if (void* p = try_alloc()) {
    // The entry names the heap and the header, not a class: an aligned class fills it too.
    if (head_align == 0) fill_front(*ta, size, attr, label);
    return p;
  }
  // Give back what can be given back, once, then retry: the ctx's warm slabs (exited
  // threads') always, and this thread's empty slabs for a ctx or tenant limit (they may
  // free whole chunks); the chunk cache for the server limit; for a failed mmap also the
  // pages of every free span of the ctx's chunks.
  const AllocFailKind kind = last_alloc_failure().kind;
  if (kind != AllocFailKind::CTX_LIMIT && kind != AllocFailKind::TENANT_LIMIT &&
      kind != AllocFailKind::SERVER_LIMIT && kind != AllocFailKind::PHYSICAL_MEMORY_EXHAUST) {
    return nullptr;
  }
  set.release_warm();
  if (kind == AllocFailKind::CTX_LIMIT || kind == AllocFailKind::TENANT_LIMIT) {
    set.flush_thread_heap();
  } else if (kind == AllocFailKind::SERVER_LIMIT) {
    chunk_mgr_.sync_wash();
  } else {
    set.wash_free_spans();
    chunk_mgr_.sync_wash();
  }
  return try_alloc();
}

void ObMallocAllocator::free_checked_by(void* ptr, AllocOrigin origin) {
  if (ptr == nullptr) return;
  ObjectSet::run_slow_path_hook();
  ABlock* block = nullptr;
  uint64_t h = checked_header(ptr, &block);
  if (h == 0 || !origin_matches(ptr, h, origin, dealloc_name(origin))) return;
  if (header_state(h) == ObjectState::ALIGNED) {
    // An aligned pointer: the real object starts `offset` bytes before it.
    void* raw = static_cast<char*>(ptr) - header_size(h);
    const uint64_t raw_h = checked_header(raw, &block);
    if (raw_h == 0) return;
    const int64_t aligned_size = ObjectSet::object_size(raw, raw_h) - header_size(h);
    if (!check_tail(ptr, raw_h, aligned_size, "tail canary of aligned object overwritten")) return;
    store_header(ptr, 0);
    ptr = raw;
    h = raw_h;
  }
  if (!check_tail(ptr, h, ObjectSet::object_size(ptr, h), "tail canary overwritten")) return;
  ObjectSet::free(ptr, block);
}

int64_t ObMallocAllocator::get_size(void* ptr) {
  const uint64_t h = checked_header(ptr);
  if (h == 0) return -1;
  if (header_state(h) != ObjectState::ALIGNED) return ObjectSet::object_size(ptr, h);
  // The object ends where the aligned bytes end (alloc_align shrank it so).
  void* raw = static_cast<char*>(ptr) - header_size(h);
  return ObjectSet::object_size(raw, load_header(raw)) - header_size(h);
}

int64_t ObMallocAllocator::usable_size(void* ptr) {
  if (const int64_t capacity = ObjectSet::try_usable_size_fast(ptr); capacity >= 0) {
    return capacity;
  }
  const uint64_t h = checked_header(ptr);
  if (h == 0) return -1;
  if (header_state(h) == ObjectState::ALIGNED) {
    const int64_t size = get_size(ptr);
    const uint64_t raw_h = load_header(static_cast<char*>(ptr) - header_size(h));
    const char* what = "tail canary of aligned object overwritten";
    return check_tail(ptr, raw_h, size, what) ? size : -1;
  }
  // The canary is checked before it moves, or an overrun so far would go unseen.
  if (!check_tail(ptr, h, ObjectSet::object_size(ptr, h), "tail canary overwritten")) return -1;
  // Callers may write every byte we report, so the object first grows to fill its slot
  // and its canary moves to the slot's end; the overrun check stays exact.
  const int64_t capacity = ObjectSet::usable_size(ptr);
  ObjectSet::resize_in_place(ptr, capacity);
  return capacity;
}

void* ObMallocAllocator::move_shrunk(void* ptr, int64_t size, const ObMemAttr& attr) {
  // A shrink never fails: without room for the copy (a limit) the object shrinks in place,
  // and the caller's last failure is the one it saw.
  const AllocFailure seen = last_alloc_failure();
  void* fresh = alloc(size, attr);
  if (fresh == nullptr) {
    set_alloc_failure(seen);
    return nullptr;
  }
  std::memcpy(fresh, ptr, static_cast<size_t>(size));
  free(ptr);
  return fresh;
}

void* ObMallocAllocator::realloc_moved(void* ptr, int64_t size, int sc, uint64_t header,
                                       const ObMemAttr& attr) {
  const int64_t size_now = header_size(header);
  if (size > class_slot_size(sc) - AOBJECT_META_SIZE) {
    void* fresh = alloc(size, attr);
    if (fresh == nullptr) return nullptr;
    std::memcpy(fresh, ptr, static_cast<size_t>(size_now));
    free(ptr);
    return fresh;
  }
  if (void* fresh = move_shrunk(ptr, size, attr)) return fresh;
  ObjectSet::resize_in_place(ptr, size);  // no room for the copy: it shrinks where it is
  return ptr;
}

void* ObMallocAllocator::realloc(void* ptr, int64_t size, const ObMemAttr& attr) {
  if (ptr == nullptr) return alloc(size, attr);
  if (size == 0) {
    free(ptr);
    return nullptr;
  }
  // A slab's object that stays small, with one lookup (resize_in_slot); a negative size,
  // a big object, an aligned pointer's pad and anything that fails a check take the full
  // path below.
  int sc = -1;
  uint64_t live = 0;
  if (resize_in_slot(ptr, size, &sc, &live)) return ptr;
  if (sc >= 0) return realloc_moved(ptr, size, sc, live, attr);
  const uint64_t h = checked_header(ptr);
  if (h == 0 || !origin_matches(ptr, h, AllocOrigin::MALLOC, "realloc")) return nullptr;
  if (header_state(h) != ObjectState::ALIGNED) {
    // Before the canary moves (in place) or the object does (grow_back), or an overrun so
    // far would go unseen. An aligned object's free below checks its own.
    const int64_t size_now = ObjectSet::object_size(ptr, h);
    if (!check_tail(ptr, h, size_now, "tail canary overwritten")) return nullptr;
    // Far below its slot, a shrunk object moves to a smaller one; any other stays.
    if (size < size_now && ObjectSet::shrink_moves(ptr, size)) {
      if (void* fresh = move_shrunk(ptr, size, attr)) return fresh;
    }
    if (ObjectSet::resize_in_place(ptr, size)) {
      // A shrunk big object gives back the blocks past its new size, in place, as glibc's
      // split does. It stays: a buffer shrunk after each request and grown by the next
      // (MariaDB's packet buffer) would pay two copies a request, where the grow takes
      // the freed blocks back in place.
      return size < size_now ? ObjectSet::trim_big(ptr) : ptr;
    }
    // A big object in a chunk of its own grows with its mapping (mremap), as glibc's
    // mmapped chunks do: no copy, whatever the size.
    if (void* moved = ObjectSet::resize_dedicated(ptr, size)) return moved;
  }
  const int64_t old_size = get_size(ptr);
  // A big object moved to grow gets a quarter more span than asked: a buffer grown step
  // by step (a result set, a packet) then grows in place at the next steps instead of
  // being copied at each. The spare tail is address space; pages only once written.
  const bool headroom = size > old_size && size > SMALL_OBJECT_MAX && size <= OBJECT_MAX_SIZE / 2;
  // A big object first grows down into the free span before it (glibc merges a free chunk
  // before it the same way): nothing new is taken, and the tail it trims is there for the
  // next buffer to grow into, so it keeps only an eighth more than asked.
  if (headroom && header_state(h) == ObjectState::BIG) {
    if (void* moved = ObjectSet::grow_back(ptr, size, size + size / 8)) return moved;
  }
  void* fresh = headroom ? alloc(size + size / 4, attr) : nullptr;
  if (fresh != nullptr) {
    ObjectSet::resize_in_place(fresh, size);
  } else {
    fresh = alloc(size, attr);  // no headroom, or a limit with room for the size alone
    if (fresh == nullptr) return nullptr;
  }
  std::memcpy(fresh, ptr, static_cast<size_t>(old_size < size ? old_size : size));
  free(ptr);
  return fresh;
}

void* ObMallocAllocator::alloc_align_in(int64_t align, int64_t size, const ObMemAttr& attr,
                                        bool static_attr) {
  if (align <= 0 || (align & (align - 1)) != 0 || align > MAX_ALIGN) {
    return fail(AllocFailKind::INVALID_ARGUMENT, size);
  }
  if (align <= 16) return alloc(size, attr);
  if (size < 0 || size > OBJECT_MAX_SIZE - align) return fail(AllocFailKind::INVALID_SIZE, size);
  // Up to a cache line, a plain object of an aligned class; up to a page, of a page class
  // when its slot is no larger than the slide's below. No pad, the fast free, and the
  // malloc's front when the drop-in malloc's entry is there.
  const int sc = class_for_alignment(align, size);
  if (sc >= 0) {
    const malloc_front::Entry& e = malloc_front::static_entry();
    void* p = nullptr;
    if (static_entry_valid(e, attr, id_)) {
      p = e.heap->alloc_object_fast_in(sc, size, e.in_use_header & ~PLAIN_CLASS_BIT);
      if (p != nullptr) return p;
      p = alloc_refill(*e.heap, header_label(e.in_use_header), size, attr, sc);
    } else {
      p = alloc_slow(size, attr, 0, sc);
      if (p != nullptr && static_attr) adopt_static_entry(attr);
    }
    // A thread without a heap gets a 16-byte-aligned span instead, and slides below.
    if (p == nullptr || (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0) return p;
    free(p);
  }
  if (align >= ABLOCK_SIZE && align < ACHUNK_ALIGN && size + align - 16 > SMALL_OBJECT_MAX &&
      ObjectSet::aligned_span_fits(size, align)) {
    // A big object at the second block of a span placed so that it meets `align`, no pad:
    // sliding within a bigger object would keep up to `align` bytes more in its span, and
    // its pad header would take a page of its own.
    return alloc_slow(size, attr, align);
  }
  char* raw = nullptr;
  char* aligned = nullptr;
  if (align < ACHUNK_ALIGN) {
    // Room to slide forward within the object, whose pad header then stays in the
    // first 2 MiB of its chunk, where a free finds the chunk by masking. Both pointers
    // are 16-byte aligned, so the slide is at most align - 16.
    raw = static_cast<char*>(alloc(size + align - 16, attr));
    if (raw == nullptr) return nullptr;
    aligned = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + align - 1) &
                                      ~(static_cast<uintptr_t>(align) - 1));
  } else {
    // A chunk of its own placed so that its second 2 MiB unit starts at a multiple of
    // `align`: the aligned bytes start there, the pad header just below, in the first.
    const int64_t lead = ACHUNK_ALIGN - ACHUNK_HEADER_SIZE - BIG_OBJECT_OFFSET;
    raw = static_cast<char*>(alloc_slow(lead + size, attr, align));
    if (raw == nullptr) return nullptr;
    aligned = raw + lead;
  }
  if (aligned == raw) {
    if (size > 0) ObjectSet::resize_in_place(raw, size);
    return raw;
  }
  // A pad header just below the aligned pointer leads back to the object, which now
  // ends where the aligned bytes end: one canary catches overruns of either.
  const int64_t offset = aligned - raw;
  ObjectSet::resize_in_place(raw, offset + size);
  ObjectSet::mark_inner_pointer(raw, aligned);
  store_header(aligned, make_header(ObjectState::ALIGNED, 0, static_cast<uint32_t>(offset)));
  return aligned;
}

}  // namespace achunk
