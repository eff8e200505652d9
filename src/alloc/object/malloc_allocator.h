// Object layer: ObMallocAllocator, the tenant directory and the ob_malloc engine. It maps
// (tenant, ctx) to an ObTenantCtxAllocator (created on first use in fixed storage, never
// freed), applies tenant and ctx limits, retries a failed allocation once after giving
// memory back, validates every free (magic, state, tail canary), and prints per-ctx and
// per-label usage. Never calls malloc. Depends on tenant_ctx_allocator.h, ob_mem_attr.h.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/base/fork_locks.h"
#include "achunk/base/spin_lock.h"
#include "alloc/object/malloc_front.h"
#include "alloc/object/ob_mem_attr.h"
#include "alloc/object/overhead.h"
#include "alloc/object/tenant_ctx_allocator.h"

namespace achunk {

class ObMallocAllocator {
 public:
  static constexpr int MAX_TENANTS = 16;

  explicit ObMallocAllocator(AChunkMgr& chunk_mgr);
  ~ObMallocAllocator();
  ObMallocAllocator(const ObMallocAllocator&) = delete;
  ObMallocAllocator& operator=(const ObMallocAllocator&) = delete;

  // nullptr with last_alloc_failure() set on failure; size 0 gives a unique pointer.
  // Inline: a repeated small allocation is served from this thread's front entry.
  void* alloc(int64_t size, const ObMemAttr& attr) {
    malloc_front::Entry& e = malloc_front::entry_for(attr.tenant_id_, attr.ctx_id_, attr.label_);
    // Entries are filled only for non-null labels that were readable, so the same pointer
    // can be read without the checks; equal bytes then mean the text did not change.
    if (e.label == attr.label_ && e.allocator_id == id_ && e.tenant_id == attr.tenant_id_ &&
        e.ctx_id == attr.ctx_id_ &&
        static_cast<uint64_t>(size) <= static_cast<uint64_t>(SMALL_OBJECT_MAX)) {
      uint64_t bytes[2];
      read_label_bytes_unchecked(attr.label_, bytes);
      if (bytes[0] == e.label_bytes[0] && bytes[1] == e.label_bytes[1]) {
        if (void* p = e.heap->alloc_object_fast(size, e.in_use_header)) return p;
        return alloc_refill(*e.heap, header_label(e.in_use_header), size, attr);
      }
    }
    return alloc_slow(size, attr);
  }
  // alloc() for an `attr` of static storage that never changes, nor does its label's text
  // (the drop-in malloc's): a thread's repeated allocation hits an entry of its own, which
  // checks only the allocator and the size.
  void* alloc_static(int64_t size, const ObMemAttr& attr) {
    if (void* p = alloc_static_fast(id_, size, attr)) return p;
    return alloc_static_miss(size, attr);
  }
  // alloc_static once its hit (alloc_static_fast) returned nullptr: a refill when the
  // entry is this attr's and the slab ran dry, else the slow path.
  void* alloc_static_miss(int64_t size, const ObMemAttr& attr);
  // alloc_static's hit alone, for the allocator whose id() is `allocator_id`, with no call
  // and no read of the allocator: nullptr when it is not a hit or the slab ran dry.
  // `origin`: the object's (AllocOrigin), as origin_bits.
  __attribute__((always_inline)) static void* alloc_static_fast(uint32_t allocator_id, int64_t size,
                                                                const ObMemAttr& attr,
                                                                uint64_t origin = 0) {
    const malloc_front::Entry& e = malloc_front::static_entry();
    if (static_entry_valid(e, attr, allocator_id) &&
        static_cast<uint64_t>(size) <= static_cast<uint64_t>(SMALL_OBJECT_MAX)) {
      return e.heap->alloc_object_fast(size, e.in_use_header | origin);
    }
    return nullptr;
  }
  // alloc_align's hit, the same way: a power-of-two `align` up to a page, in an aligned
  // class up to a cache line and in a page class above (class_for_alignment). Unsigned,
  // as malloc's sizes are: an alignment of 2^63 is no small one.
  __attribute__((always_inline)) static void* alloc_align_static_fast(uint32_t allocator_id,
                                                                      uint64_t align, uint64_t size,
                                                                      const ObMemAttr& attr,
                                                                      uint64_t origin = 0) {
    if (align <= 16) {
      return alloc_static_fast(allocator_id, static_cast<int64_t>(size), attr, origin);
    }
    const malloc_front::Entry& e = malloc_front::static_entry();
    if (align > static_cast<uint64_t>(PAGE_ALIGN) ||
        size > static_cast<uint64_t>(SMALL_OBJECT_MAX) ||
        !static_entry_valid(e, attr, allocator_id)) {
      return nullptr;
    }
    const int sc = class_for_alignment(static_cast<int64_t>(align), static_cast<int64_t>(size));
    if (sc < 0) return nullptr;
    return e.heap->alloc_object_fast_in(sc, static_cast<int64_t>(size),
                                        (e.in_use_header & ~PLAIN_CLASS_BIT) | origin);
  }
  // Unique per instance, never 0.
  uint32_t id() const { return id_; }
  // Grows or shrinks in place when the slot allows, else moves. A shrink to a small size
  // that in place would hold more than twice a fresh slot (ObjectSet::shrink_moves)
  // moves to that slot, and stays in place only when the copy finds no room. size 0
  // frees and returns nullptr. On failure returns nullptr and leaves `ptr` untouched.
  void* realloc(void* ptr, int64_t size, const ObMemAttr& attr);
  // realloc's hit, inline: a slab's object in use with its canary intact (the free's fast
  // checks) resized within its slot to `size` (1..SMALL_OBJECT_MAX), true. Else false,
  // nothing touched, with *sc the object's class and *header its header when it must move
  // (past its slot, or far below it: ObjectSet::shrink_moves) for realloc_moved, or -1.
  __attribute__((always_inline)) static bool resize_in_slot(void* ptr, int64_t size, int* sc,
                                                            uint64_t* header) {
    *sc = -1;
    if (static_cast<uint64_t>(size) - 1 >= static_cast<uint64_t>(SMALL_OBJECT_MAX)) return false;
    const int c = ObjectSet::try_live_class(ptr, header);
    if (c < 0) return false;
    const int64_t slot = class_slot_size(c);
    if (size > slot - AOBJECT_META_SIZE ||
        (size < header_size(*header) && ObjectSet::holds_far_more(slot, size))) {
      *sc = c;
      return false;
    }
    store_header(
        ptr, make_header(ObjectState::IN_USE, header_label(*header), static_cast<uint32_t>(size)));
    write_tail(ptr, size);
    return true;
  }
  // realloc of the object resize_in_slot found must move (its class and header): to a new
  // slot, or, a shrink with no room for the copy, in place.
  void* realloc_moved(void* ptr, int64_t size, int sc, uint64_t header, const ObMemAttr& attr);
  // The largest alignment alloc_align serves.
  static constexpr int64_t MAX_ALIGN = int64_t{1} << 40;
  // `align` must be a power of two up to MAX_ALIGN. A big object aligned to 8 KiB-1 MiB
  // gets a span placed for it (BlockSet::alloc_block_aligned) when it fits a chunk; other
  // alignments below 2 MiB slide within a bigger object; from 2 MiB up it gets a chunk
  // placed for it (AChunkMgr::alloc_chunk).
  void* alloc_align(int64_t align, int64_t size, const ObMemAttr& attr);
  // alloc_align for an `attr` of static storage, as alloc_static: a miss also fills the
  // thread's static entry, so a thread whose first allocations are aligned (posix_memalign
  // of I/O buffers, alignas(64) types) takes the hit from then on, not only after a malloc.
  void* alloc_align_static(int64_t align, int64_t size, const ObMemAttr& attr);
  // The class alloc_align carves an object of `size` (not negative) aligned to `align`
  // (above 16) in, or -1 when it slides the object inside a bigger one instead: up to a
  // cache line an aligned class; up to a page a page class, unless the slide's plain
  // class has the smaller slot.
  __attribute__((always_inline)) static int class_for_alignment(int64_t align, int64_t size) {
    if (size > SMALL_OBJECT_MAX) return -1;
    if (align <= SLAB_ALIGN) return aligned_size_class(size);
    if (align > PAGE_ALIGN) return -1;
    const int sc = page_size_class(size);
    const int64_t slide = size + align - 16;
    if (slide <= SMALL_OBJECT_MAX && class_slot_size(size_class_of(slide)) < class_slot_size(sc)) {
      return -1;
    }
    return sc;
  }
  // Frees an object from any ObMallocAllocator. A pointer achunk never returned, a double
  // free, an overwritten tail canary or an object another call family than `origin`'s
  // allocated (origin_matches) is reported through report_error(). nullptr fails the fast
  // path's registry test (no chunk at address 0), so only the slow path asks. `key`:
  // in_use_key(origin), or in_use_key(MALLOC) where every origin is taken as MALLOC's.
  template <AllocOrigin origin = AllocOrigin::MALLOC>
  static void free(void* ptr, uint64_t key = in_use_key(origin)) {
    ObjectSet::free_fast(
        ptr, [] { return malloc_front::static_entry().heap; }, &free_checked<origin>, key);
  }

  // Requested size of a live object; -1 (and a report) for an invalid pointer.
  static int64_t get_size(void* ptr);
  // Bytes the caller may use (at least the requested size): the object is grown in place
  // to fill its slot or span first. -1 (and a report) for an invalid pointer.
  static int64_t usable_size(void* ptr);
  // The same, a slab's object inline (ObjectSet::try_usable_size_fast) and anything else
  // through usable_size, so the common case saves no register.
  __attribute__((always_inline)) static int64_t usable_size_fast(void* ptr) {
    const int64_t capacity = ObjectSet::try_usable_size_fast(ptr);
    return capacity >= 0 ? capacity : usable_size(ptr);
  }

  ObTenantCtxAllocator* get_tenant_ctx_allocator(uint64_t tenant_id, int ctx_id);
  ObTenantMemory* get_tenant(uint64_t tenant_id);
  bool set_tenant_limit(uint64_t tenant_id, int64_t bytes);
  bool set_tenant_ctx_limit(uint64_t tenant_id, int ctx_id, int64_t bytes);
  // Returns the calling thread's cached slabs of every ctx to the block layer.
  void flush_thread_caches();
  // Gives the calling thread's stashed objects of every ctx back to their slabs, its
  // heaps kept (malloc_trim's first step: slabs they kept from emptying may then go).
  void unstash_thread_caches();
  // ObjectSet::wash_stale_spans(min_free_us) for every ctx, then the thread states exited
  // threads left (wash_idle_thread_states; all with 0); the bytes washed.
  int64_t wash_stale_spans(int64_t min_free_us);
  AChunkMgr& chunk_mgr() { return chunk_mgr_; }
  // span_idle_ms for every ctx's block layer (see ChunkSource::span_idle_us).
  void set_span_idle_ms(int64_t ms) {
    span_idle_us_.store(span_idle_ms_to_us(ms), std::memory_order_relaxed);
  }
  int64_t span_idle_us() const { return span_idle_us_.load(std::memory_order_relaxed); }
  // fork(): the usage printers' scratch lock, then the directory's (the object sets', the
  // label table's and the chunk manager's are their own layers').
  void visit_fork_locks(ForkLockVisitor& v);

  // "[MEMORY] tenant_id= ctx_id= hold= used= limit= free=" per ctx, then one line per
  // label sorted by hold; first, with `overhead`, its "[MEMORY] overhead=" line. Returns
  // the length needed, like snprintf; never allocates.
  int64_t print_usage(char* buf, int64_t len, const AllocatorOverhead* overhead = nullptr);
  int64_t print_usage_json(char* buf, int64_t len, const AllocatorOverhead* overhead = nullptr);
  // What the allocator holds for itself (its stats_region left 0 for the caller): the
  // thread states, every ctx's thread heaps, and a header per mapped chunk. Lock-free.
  AllocatorOverhead overhead();
  // fork(): the printers' scratch lock (usage_printer.cc).
  static void visit_usage_fork_locks(ForkLockVisitor& v);

  // f(ObTenantMemory&, ObTenantCtxAllocator&) for every ctx created so far; lock-free.
  template <typename F>
  void for_each_ctx(F f);

 private:
  // realloc's move of an object shrunk to `size` into a fresh one, or nullptr with the
  // object and the thread's last failure untouched.
  void* move_shrunk(void* ptr, int64_t size, const ObMemAttr& attr);
  // Every other allocation; fills the front entry for the next one.
  // `head_align`: a big object in a placed chunk (ObjectSet::alloc_big).
  // `sc` >= 0: a small object in that class (an aligned one).
  void* alloc_slow(int64_t size, const ObMemAttr& attr, int64_t head_align = 0, int sc = -1);
  // A front hit whose current slab ran dry: refills from the heap, and takes the slow
  // path (limits, retries, the failure reason) only if that fails.
  // `sc` >= 0: in that class (an aligned one).
  void* alloc_refill(ThreadHeap& heap, uint16_t label, int64_t size, const ObMemAttr& attr,
                     int sc = -1);
  // The static entry was filled for this `attr` by the allocator `allocator_id` (a heap
  // given back empties every entry of its thread).
  static bool static_entry_valid(const malloc_front::Entry& e, const ObMemAttr& attr,
                                 uint32_t allocator_id) {
    return e.label == reinterpret_cast<const char*>(&attr) && e.allocator_id == allocator_id;
  }
  void fill_front(ObTenantCtxAllocator& ta, int64_t size, const ObMemAttr& attr, uint16_t label);
  // alloc_slow, then the static entry from the table's entry it filled.
  void* alloc_static_slow(int64_t size, const ObMemAttr& attr);
  // The static entry for `attr` from the table's entry, when a slow path filled that one.
  void adopt_static_entry(const ObMemAttr& attr);
  // alloc_align; `static_attr`: alloc_align_static's.
  void* alloc_align_in(int64_t align, int64_t size, const ObMemAttr& attr, bool static_attr);
  // Every other free: other threads' objects, big and aligned ones, and the reports.
  template <AllocOrigin origin>
  static void free_checked(void* ptr) {
    free_checked_by(ptr, origin);
  }
  static void free_checked_by(void* ptr, AllocOrigin origin);

  struct Tenant {
    std::atomic<bool> ready{false};
    ObTenantMemory* memory = nullptr;
    std::atomic<ObTenantCtxAllocator*> ctx[MAX_CTX_ID] = {};
  };

  Tenant* find_tenant(uint64_t tenant_id, bool create);

  AChunkMgr& chunk_mgr_;
  const uint32_t id_;  // unique per instance: front entries of a destroyed one never match
  SpinLock lock_;      // creation of tenants and ctx allocators
  std::atomic<int64_t> span_idle_us_{SPAN_IDLE_US};
  Tenant tenants_[MAX_TENANTS];
  alignas(ObTenantMemory) unsigned char tenant_storage_[MAX_TENANTS][sizeof(ObTenantMemory)];
  alignas(ObTenantCtxAllocator) unsigned char ctx_storage_[MAX_TENANTS][MAX_CTX_ID]
                                                          [sizeof(ObTenantCtxAllocator)];
};

template <typename F>
void ObMallocAllocator::for_each_ctx(F f) {
  for (Tenant& t : tenants_) {
    if (!t.ready.load(std::memory_order_acquire)) continue;
    for (auto& slot : t.ctx) {
      if (ObTenantCtxAllocator* ta = slot.load(std::memory_order_acquire)) f(*t.memory, *ta);
    }
  }
}

}  // namespace achunk
