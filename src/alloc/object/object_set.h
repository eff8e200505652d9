// Object layer: ObjectSet serves objects of one (tenant, ctx) allocator. Small objects
// come from size-class slabs (spans of whole blocks of a BlockSet); each slab belongs to
// one thread's ThreadHeap, which allocates and frees on it without atomics or locks. A
// free from another thread pushes onto the slab's lock-free remote list; the owning heap
// collects it when the slab is current and runs dry. A slab that runs full, and every
// full slab of an exiting thread, is disowned: it belongs to nobody and sits in no list,
// and the first free into it pushes it onto the set's lock-free ready stack of its class
// (an exiting thread's slabs with room go there at once, its empty ones onto a warm
// stack beside it), where the next heap short of that class adopts it (no back-pointers
// to a heap, so a thread may exit at any moment without leaving dangling references).
// Big objects get a span (or a chunk) of their own. Spans come from the shards of an
// ObjectMgr, so threads refilling at once rarely share a lock.
// Depends on the block layer (through object_mgr.h), slab.h, thread_heap.h, size_class.h
// and the chunk registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "achunk/base/spin_lock.h"
#include "achunk/base/tls.h"
#include "achunk/chunk/chunk_registry.h"
#include "alloc/block/block_set.h"
#include "alloc/block/object_mgr.h"
#include "alloc/object/size_class.h"
#include "alloc/object/slab.h"
#include "alloc/object/thread_heap.h"

namespace achunk {

// Per-label usage found by a scan.
struct LabelUsage {
  uint16_t label = 0;
  int64_t hold = 0;  // slot or span bytes
  int64_t used = 0;  // requested bytes
  int64_t count = 0;
  int64_t blocks = 0;  // big-object spans (slabs are shared between labels)
};

// Where a set's spans go, by kind, from a scan (for dumps). `*_resident` are the bytes
// backed by physical pages, from the caller's residency probe.
struct SpanUsage {
  int64_t slabs = 0;        // slab spans
  int64_t slab_slots = 0;   // of them, slots carved (the rest was never touched)
  int64_t slab_live = 0;    // of the carved slots, those holding a live object
  int64_t empty_slabs = 0;  // slab spans without a live object (spare or not yet given back)
  int64_t slab_resident = 0;
  int64_t big = 0;  // spans of big objects
  int64_t big_resident = 0;
  int64_t other = 0;             // thread heaps and spans lent to memory contexts
  int64_t free_resident = 0;     // free spans' bytes still in RAM
  int64_t spares_reclaimed = 0;  // ObjectSet::spares_reclaimed()
  int64_t warm_slabs = 0;        // ObjectSet::warm_bytes()
};

class ObjectSet {
 public:
  static constexpr int MAX_SETS = object_set_tls::MAX_SETS;

  explicit ObjectSet(ChunkSource& source);
  // Frees everything, live objects included (they are the caller's leak).
  ~ObjectSet();
  ObjectSet(const ObjectSet&) = delete;
  ObjectSet& operator=(const ObjectSet&) = delete;

  // `size` bytes (0 < size <= OBJECT_MAX_SIZE), 16-byte aligned, or nullptr with
  // last_alloc_failure() set by the chunk source.
  inline void* alloc(int64_t size, uint16_t label);  // defined in thread_heap.h
  // An object of `size` (<= SMALL_OBJECT_MAX) in class sc, which holds it (an aligned
  // class); a span of its own, 16-byte aligned, for a thread without a heap.
  inline void* alloc_in_class(int sc, int64_t size, uint16_t label);
  // A big object of its own span, placed for an aligned request with `head_align` (a
  // power of two): from 2 MiB up in a chunk of its own whose second 2 MiB unit starts at
  // a multiple of head_align (see AChunkMgr::alloc_chunk); from ABLOCK_SIZE to 1 MiB at
  // the second block of a span placed so that it does (BlockSet::alloc_block_aligned),
  // its size and header ending the first, which fails for a span that cannot fit a chunk
  // with its slide (see aligned_span_fits).
  void* alloc_big(int64_t size, uint16_t label, int64_t head_align = 0);
  // Whether a big object of `size` bytes fits a span placed for `head_align` below 2 MiB.
  static bool aligned_span_fits(int64_t size, int64_t head_align) {
    return BlockSet::blocks_for_aligned(BIG_PLACED_OFFSET + size + AOBJECT_TAIL_SIZE, head_align) >
           0;
  }
  // Frees an object of any ObjectSet from any thread; the caller validated the header.
  // The header stays FREE with the object's size and label.
  static inline void free(void* ptr);  // defined in thread_heap.h
  // The same when the caller already found the object's span (inline, in thread_heap.h).
  static inline void free(void* ptr, ABlock* block);
  // The common free, every check included at the free itself: a small object in use on
  // a slab of any thread (or of none), its canary intact. Anything else (big objects,
  // aligned pointers, any failed check) goes untouched to `fallback`, the caller's full
  // path, which frees it or reports what is wrong; a tail call, so the fast path saves
  // no register. `ptr` must not be null. An object whose header shifted by ORIGIN_SHIFT
  // is not `key` (in_use_key of the caller's AllocOrigin) goes to the fallback too, at no
  // cost: state and origin are one compare.
  using FreeFallback = void (*)(void* ptr);
  // `bin_of()`: the calling thread's heap whose bins take the frees of its set's objects,
  // or nullptr; asked only for an object the calling thread does not own.
  template <typename BinOf>
  __attribute__((always_inline)) static inline void free_fast(
      void* ptr, BinOf bin_of, FreeFallback fallback,
      uint64_t key = in_use_key(AllocOrigin::MALLOC));
  // Pushes n freed objects of the slab `block` (headers FREE, counted out of the slab),
  // linked from `first` to `last` through their first word, onto its remote list in one
  // compare-and-swap; the one that clears a let-go slab's REMOTE_NOTIFY makes it findable.
  static void push_remote(ABlock* block, void* first, void* last, int64_t n);
  // free_fast for tests: false where it would have called the fallback.
  static bool try_free_fast(void* ptr);
  // malloc_usable_size's common case, every check included: a small object in use with
  // its canary intact grows to fill its slot (the canary moves to the slot's end, so the
  // overrun check stays exact) and its slot's capacity is returned; -1, touching nothing,
  // for anything else (the caller's full path then answers or reports).
  static inline int64_t try_usable_size_fast(void* ptr);
  // realloc's common case, with the checks of the free's fast path: the class of a small
  // object in use that malloc allocated, its canary intact (its header in *header), or
  // -1, touching nothing, for anything else (the full path then resizes or reports).
  static inline int try_live_class(void* ptr, uint64_t* header);
  // Carves the slab's next page of slots onto its free list (owner only); false when the
  // whole slab is carved already.
  static bool carve(ABlock* block);
  // Bytes the object at `ptr` can grow to in place.
  static int64_t usable_size(void* ptr);
  // The requested size of the object at `ptr` whose header is `header`: the header's
  // field, or for a big object the full 64-bit size kept before its header.
  static int64_t object_size(void* ptr, uint64_t header);
  // Whether `ptr` is where an object of the in-use span `block` starts (a carved slot of
  // a slab, or a big object), not inside one.
  static bool is_object_start(const void* ptr, ABlock* block);
  // Whether the object at `ptr` (a live object of any set) read as zero when it was
  // handed out: a big object carved from pages untouched since mapped or washed. calloc
  // asks, right after the allocation, so it need not fault those pages in to zero them.
  static bool born_zero(void* ptr);
  // Makes the first `bytes` of the big object at `ptr` read as zero, deciding by which
  // of its whole pages are in RAM (one mincore per 16 ZERO_PIECEs, one release per run of
  // pieces given back): a piece with an eighth or
  // more in RAM is written (a buffer reused while hot: a release would unmap its pages,
  // flush the TLB and fault back in all the caller fills again); a piece with less is
  // given back (release_pages), so a sparse table never faults in pages it does not
  // touch. An eighth, not a half: a caller that fills a quarter of each buffer keeps it
  // in RAM, where a half would give back and fault in that quarter every time.
  static void zero_big(void* ptr, int64_t bytes);
  static constexpr int64_t ZERO_PIECE = int64_t{1} << 20;
  // Changes the requested size of an object in place when its slot or span allows;
  // returns false (object unchanged) otherwise.
  static bool resize_in_place(void* ptr, int64_t new_size);
  // The object at `ptr` hands out `inner` (an aligned pointer's, whose pad header lies
  // inside it): a big object's span then records the way to its head there too
  // (BlockSet::mark_inner), so the free's fast lookup finds it. A slab's need not.
  static void mark_inner_pointer(void* ptr, void* inner);
  // Grows a big object to `new_size` into the free span just before its span (and the
  // front of the one after, if still short): the object moves down with its bytes, and
  // its span is trimmed to hold at most `keep` (>= new_size) bytes. Returns the new user
  // pointer, or nullptr with the object unchanged. A realloc so reuses the memory around
  // a growing buffer instead of leaving it behind.
  static void* grow_back(void* ptr, int64_t new_size, int64_t keep);
  // Resizes a big object in a dedicated chunk to `new_size` by resizing the chunk's
  // mapping (BlockSet::resize_dedicated: mremap, no copy). Returns the user pointer,
  // maybe moved, or nullptr with the object unchanged (not such an object, a limit).
  // With `only_units_past`, `ptr` back untouched unless the mapping holds whole 2 MiB
  // units past the new size (a shrink that keeps them until idle, see trim_big).
  static void* resize_dedicated(void* ptr, int64_t new_size, bool only_units_past = false);
  // Gives what a big object no longer needs after its end back: the blocks past it to the
  // set (BlockSet::shrink_block), or a dedicated chunk's whole 2 MiB units past it to the
  // OS (resize_dedicated). Returns the object's pointer, which only the latter may move;
  // the object is unchanged for a small one.
  static void* trim_big(void* ptr);
  // Whether a realloc shrinking the object at `ptr` to `new_size` should move it: kept in
  // place, its slot, or its span trimmed to whole blocks (a dedicated chunk's to a 2 MiB
  // unit), would hold more than twice the slot of a fresh small object of that size.
  static bool shrink_moves(void* ptr, int64_t new_size);
  // shrink_moves's rule: whether `held` bytes kept in place would be more than twice the
  // slot of a fresh small object of `new_size`.
  static bool holds_far_more(int64_t held, int64_t new_size) {
    return held > 2 * class_slot_size(size_class_of(new_size));
  }
  // The set an object belongs to.
  static ObjectSet* owner_of(void* ptr) { return ObjectMgr::shard_of(ptr).set_; }

  // Bytes of the chunks this set holds, and of spans in use (slabs + big objects).
  int64_t hold();
  int64_t span_used();
  // Big objects' chunks keeping a tail past their request (BlockSet::slack_chunks).
  int64_t slack_chunks();
  // BlockSet::free_span_bytes over the shards.
  int64_t free_span_bytes(int64_t* washed);
  // f(AChunk*) for every chunk of every shard, each shard under its lock.
  template <typename F>
  void for_each_chunk(F f) {
    mgr_.for_each([&](BlockSet& bs) { bs.for_each_chunk(f); });
  }
  // Scans every object in use; fills up to `cap` entries, one per label, and returns the
  // number of labels found. Also sums all objects into *total.
  int scan_usage(LabelUsage* out, int cap, LabelUsage* total);
  // Sums every span by kind into *u, and the bytes of the set's chunks in RAM into
  // *resident. probe(ctx, addr, len, vec) is Os::resident_pages for at most
  // RESIDENT_PROBE_BYTES (-1 makes a sum -1). One probe per 2 MiB of chunk, however many
  // spans it holds: the scan holds each shard's lock, which the set's threads wait for.
  using ResidentFn = int64_t (*)(void* ctx, void* addr, int64_t len, unsigned char* vec);
  static constexpr int64_t RESIDENT_PROBE_BYTES = ACHUNK_ALIGN;
  void scan_spans(SpanUsage* u, int64_t* resident, ResidentFn probe, void* ctx);

  // The calling thread's heap for this set, created on first use (nullptr if that fails).
  ThreadHeap* heap_for_this_thread() {
    ThreadHeap* heap = existing_heap();
    return heap != nullptr ? heap : create_heap();
  }
  // The calling thread's heap if it already has one.
  ThreadHeap* existing_heap() const {
    if (index_ < 0) return nullptr;
    const ThreadState& state = thread_state();
    ThreadHeap* heap = state.heaps[index_];
    const uint32_t gen = object_set_tls::generation[index_].load(std::memory_order_relaxed);
    return heap != nullptr && state.heap_generation[index_] == gen ? heap : nullptr;
  }
  // The calling thread's ThreadState, taken from the pool on first use and given back at
  // its exit (with its heaps); nullptr when none can be mapped.
  static ThreadState* own_thread_state();
  int index() const { return index_; }
  // Bytes of the spans that hold the threads' heaps of this set: the set's own overhead
  // per thread, beside the thread states (without a lock, as of the last heap made or
  // given back).
  int64_t heap_bytes() const;
  ObjectMgr& object_mgr() { return mgr_; }
  // fork(): every set's locks (after the registry's, which keeps the set list still while
  // it is held). A ThreadHeap's lock_ is not among them: a thread other than the heap's
  // owner holds it only under heaps_lock_, so the child's thread finds its own heap free.
  static void visit_all_fork_locks(ForkLockVisitor& v);
  // The locks visit_all_fork_locks visits per set: its heap list, its classes' ready
  // stacks and shared slabs, and its block shards.
  static constexpr int FORK_LOCKS = 1 + 2 * SIZE_CLASS_COUNT + ObjectMgr::FORK_LOCKS;
  // In a forked child (from the atfork child handler): threads started from now on get
  // markers of a new generation, and every set's usage scan lock is free
  // (ObjectMgr::on_fork_child).
  static void on_fork_child();
  // A function the process wiring has the object layer's slow paths run, with no
  // allocator lock held, while it waits for a moment to act: a thread's first
  // allocation, a slab refill, a big object, and a free that takes a slow path (one its
  // bin cannot take: a child freeing its parent's objects soon fills its bins). The hook returns
  // true once it is done, and is then disarmed; unarmed, a slow path pays one relaxed load. A
  // forked child of the drop-in malloc starts its housekeeping thread there once it is old enough.
  static void arm_slow_path_hook(bool (*hook)()) {
    slow_path_hook_.store(hook, std::memory_order_relaxed);
    slow_path_hook_armed_.store(true, std::memory_order_release);
  }
  static void disarm_slow_path_hook() {
    slow_path_hook_armed_.store(false, std::memory_order_relaxed);
  }
  static bool slow_path_hook_armed() {
    return slow_path_hook_armed_.load(std::memory_order_relaxed);
  }
  static void run_slow_path_hook() {
    if (slow_path_hook_armed_.load(std::memory_order_relaxed)) [[unlikely]] {
      fire_slow_path_hook();
    }
  }
  // Option shared_slab_bytes, for every set: a heap created from now on takes its first
  // `bytes` of objects of the shared classes from the set's shared slabs (shared_alloc).
  static void set_shared_slab_bytes(int64_t bytes) {
    shared_slab_bytes_.store(bytes, std::memory_order_relaxed);
  }
  static int64_t shared_slab_bytes() { return shared_slab_bytes_.load(std::memory_order_relaxed); }
  // Whether the calling thread's next small object may come from a shared slab: it has
  // taken fewer bytes from them than shared_slab_bytes. Such a thread needs no
  // ThreadState yet (ObMallocAllocator::alloc_slow takes none for it).
  static bool within_shared_budget() { return object_set_tls::shared_used < shared_slab_bytes(); }
  // The classes a thread's first objects take from the shared slabs: slots up to 1 KiB,
  // whose own slab would hold many of them on its first page.
  static constexpr int64_t SHARED_SLOT_MAX = 1024;
  static constexpr bool shares(int sc) { return class_slot_size(sc) <= SHARED_SLOT_MAX; }
  // Objects taken from the shared slabs so far, and the bytes of shared slabs the looks
  // gave back (reclaim_idle_spares).
  int64_t shared_allocs() const { return shared_allocs_.load(std::memory_order_relaxed); }
  int64_t shared_reclaimed() const { return shared_reclaimed_.load(std::memory_order_relaxed); }
  // The shared slabs' owner mark: an address of this set, never a thread's TLS address.
  const void* shared_marker() const { return &shared_[0]; }
  // Gives the calling thread's heap back: empty slabs stay warm for the next heaps
  // (keep_warm) or return to the BlockSet, slabs with
  // live objects and free slots go onto the ready stacks for another heap to adopt, full
  // ones are disowned until a free makes room. Runs at thread exit; callers may also run
  // it when a thread goes idle. First settles the ready stacks (settle_ready).
  void flush_thread_heap();
  // A span of the set's blocks for a layer above (memory contexts keep their pages in
  // them); charged like any other, skipped by usage scans, refused by ob_free.
  ABlock* alloc_span(int64_t bytes);
  // Any span of any set, back to the shard that owns it (slabs and big objects too);
  // `wash`: the free span it becomes gives its pages back whatever its length.
  static void free_span(ABlock* block);
  // Washes the free spans of every shard (see BlockSet::wash_free_spans).
  int64_t wash_free_spans();
  // BlockSet::wash_stale_spans: the free spans free for at least `min_free_us`. First
  // gives back the spares of heaps idle since the previous call (reclaim_idle_spares),
  // and the warm slabs if none was kept or adopted since then (all of them when
  // `min_free_us` is 0): they go back once threads stop coming and going.
  int64_t wash_stale_spans(int64_t min_free_us);
  // Gives back the empty spare slabs of every heap that made no slow-path or stash call
  // since the previous look and is not in one now, its kept slabs whose objects other
  // threads freed, its emptied current slabs, and its stashed objects to their slabs (so
  // those may empty); returns the slabs' bytes. Without it a thread that goes idle keeps
  // its last slabs (and their pages, and the chunks they pin) for good. wash_stale_spans
  // (the housekeeping thread) calls it. Then settles the ready stacks (settle_ready).
  int64_t reclaim_idle_spares();
  // Takes every slab off the ready stacks: the empty ones go back to their shard, the
  // others are disowned again (the next free pushes them back). So a slab whose objects
  // were all freed after its owner exited or let it go never stays, and nothing walks
  // the slabs that saw no free since. O(slabs pushed since the last call).
  void settle_ready();
  // Gives every warm slab back to its shard; returns their carved bytes. O(warm slabs).
  int64_t release_warm();
  // Carved bytes the warm stacks may hold: the spares of 128 exited threads (64 MiB), so
  // a pool's threads replaced all at once reuse the pages their predecessors carved.
  static constexpr int64_t WARM_BYTES_MAX = 128 * ThreadHeap::SPARE_BYTES_MAX;
  // Without a housekeeping thread: gives the warm slabs back (release_warm) when none was
  // kept or adopted for the span idle time. A refill that carves a new slab asks.
  void release_idle_warm();
  int64_t warm_bytes() const { return warm_bytes_.load(std::memory_order_relaxed); }
  // Warm slabs kept and adopted so far.
  int64_t warm_kept() const { return warm_kept_.load(std::memory_order_relaxed); }
  int64_t warm_adopted() const { return warm_adopted_.load(std::memory_order_relaxed); }
  // Slabs settled so far (by thread exits and settle_ready), and of them those given back
  // empty: tests check that each settles only slabs it has to.
  int64_t slabs_settled() const { return slabs_settled_.load(std::memory_order_relaxed); }
  int64_t slabs_settled_empty() const {
    return slabs_settled_empty_.load(std::memory_order_relaxed);
  }
  // Bytes of slabs reclaim_idle_spares gave back so far, and stashed objects it took
  // from idle heaps back to their slabs.
  int64_t spares_reclaimed() const { return spares_reclaimed_.load(std::memory_order_relaxed); }
  int64_t stash_reclaimed() const { return stash_reclaimed_.load(std::memory_order_relaxed); }
  // Takes the calling thread's heap off the set's list: no look reaches it or its stash
  // from then on (abandon's first step; the owner's last unstash then finds everything).
  void unlink_heap(ThreadHeap* heap);
  // Gives an unlinked heap back (see flush_thread_heap). `keep_warm`: its empty slabs
  // may stay warm (a thread's exit, not a flush).
  void abandon(ThreadHeap* heap, bool keep_warm);

 private:
  friend class ThreadHeap;
  ThreadHeap* create_heap();
  // source_.process_barrier_available(), asked once.
  bool barrier_available();
  // Idle heaps whose current slabs one process barrier covers (reclaim_idle_spares holds
  // their locks across it).
  static constexpr int HEAPS_PER_BARRIER = 64;
  // A fresh slab owned by `owner` (a thread's marker, or shared_marker()).
  ABlock* new_slab(int sc, const void* owner);
  // The owner lets a slab with no free slot go (see Slab::remote_free_): `owner` is its
  // marker, the calling thread's or shared_marker(). False, the slab still the caller's,
  // when another thread's free landed on it first.
  static bool disown(ABlock* block, const void* owner);
  static bool disown(ABlock* block) { return disown(block, this_thread_marker()); }
  // A slot of class sc (shares(sc)) from the set's shared slab of the class, or nullptr
  // when no span can be had: a heap's refill within its shared budget. The slab's owner
  // is shared_marker(), which no thread's free matches, so every free into it is a
  // remote one (or a stash push) and only shared_alloc, under the class's lock, pops.
  // O(1): a full shared slab is disowned like a heap's, and the next comes from the ready
  // or warm stacks or a fresh span.
  void* shared_alloc(int sc);
  // alloc's and alloc_in_class's path for a thread without a heap in this set: within
  // the thread's shared budget from the shared slab of class sc, else from the heap it
  // creates; with no heap to be had (a set beyond MAX_SETS, or a thread whose ThreadState
  // could not be mapped: vm.max_map_count reached, say), a span of its own, from chunks
  // the cache may still hold; with no memory at all this fails as any allocation does.
  void* alloc_without_heap(int sc, int64_t size, uint16_t label);
  // reclaim_idle_spares's part for the shared slabs: each class's current shared slab
  // whose objects are all freed and which served no allocation since the last look goes
  // onto `chain`. O(classes).
  ABlock* reclaim_idle_shared(ABlock* chain, int64_t* bytes);
  // Whoever holds a slab alone (an exiting owner, settle_ready) gives it back if it is
  // empty, else disowns it; with `ready_if_room` (an exiting owner) a slab with a free
  // slot goes onto the ready stack instead, untagged, so no free pushes it again.
  // With `keep_warm` (a thread's exit) an empty slab stays warm when the budget allows.
  void settle(ABlock* block, bool ready_if_room = false, bool keep_warm = false);
  // An emptied slab of an exiting thread onto the warm stack of its class, carved and
  // resident, for the next heap that refills the class (a thread started in its place
  // reuses its pages instead of carving new ones); false when WARM_BYTES_MAX is reached.
  bool keep_warm(ABlock* block);
  // A warm slab of class sc, or nullptr.
  ABlock* pop_warm(int sc);
  // A free cleared REMOTE_NOTIFY: the slab goes onto the ready stack of its class.
  void push_ready(ABlock* block);
  // One slab off the ready stack of class sc, or nullptr. One per refill, so the slabs an
  // exiting thread left go to the heaps that need them, not all to the first that asks.
  ABlock* pop_ready(int sc);
  // A span from one of the shards, set up by init(block) under the shard's lock (so a
  // usage scan never sees it half written); nullptr when the shard's BlockSet fails.
  // *zeroed (when given): see BlockSet::alloc_block; `lookup`: see BlockSet::Lookup.
  template <typename Init>
  ABlock* take_span(int64_t bytes, Init init, bool* zeroed = nullptr, int64_t head_align = 0,
                    BlockSet::Lookup lookup = BlockSet::Lookup::EVERY_BLOCK);
  // Big objects and frees onto a slab this thread does not own (another thread's, or a
  // disowned one): stashed unless `may_stash` is false, else a remote free.
  static void free_slow(void* ptr, ABlock* block, Slab* slab, bool may_stash = true);
  // free_slow's stash: into this thread's stash of the slab's set if it has one with
  // room, else the remote free. `bin`: the calling thread's heap to try first (see
  // free_fast), or nullptr.
  __attribute__((noinline)) static void free_foreign(void* ptr, ABlock* block, Slab* slab,
                                                     ThreadHeap* bin = nullptr);
  // free_fast's end when its bin cannot take the object (header FREE already): full, being
  // taken, of another set, or no bin. Into its slab if the calling thread owns it, else
  // free_foreign (a full bin gives half back first).
  __attribute__((noinline)) static void free_unbinned(void* ptr, int sc, ThreadHeap* bin);
  // A remote free cleared a disowned slab's REMOTE_NOTIFY: its former owner takes it
  // back, anyone else pushes it onto the ready stack.
  __attribute__((noinline)) static void made_findable(ABlock* block, Slab* slab);

  ChunkSource& source_;
  ObjectMgr mgr_;  // the block layer, sharded
  // Per class, disowned slabs a free made room on, linked via ABlock next_. Pushed by any
  // thread without a lock; taken (one, or all) only under the class's lock, so a pop's
  // CAS cannot meet a head that was taken and pushed again (no ABA). A line per class:
  // the threads refilling and freeing into one class do not stall those of another.
  // `warm` (same lock, same rules but pushed only under it): the empty slabs of exited
  // threads kept for the class's next refills (see keep_warm).
  struct alignas(64) ReadyStack {
    std::atomic<ABlock*> head{nullptr};
    std::atomic<ABlock*> warm{nullptr};
    SpinLock lock;
    // All of `top` (head or warm), chained via next_; nullptr when it is empty.
    ABlock* take_all(std::atomic<ABlock*>& top) {
      if (top.load(std::memory_order_relaxed) == nullptr) return nullptr;
      std::lock_guard<SpinLock> guard(lock);
      return top.exchange(nullptr, std::memory_order_acquire);
    }
  };
  ReadyStack ready_[SIZE_CLASS_COUNT];
  // Per class, the slab the threads within their shared budget allocate from (see
  // shared_alloc), and its allocations, which the look compares with the last it saw.
  struct alignas(64) SharedSlab {
    SpinLock lock;
    ABlock* current = nullptr;
    uint64_t allocs = 0;
    uint64_t seen_allocs = 0;
  };
  SharedSlab shared_[SIZE_CLASS_COUNT];
  std::atomic<int64_t> shared_allocs_{0};
  std::atomic<int64_t> shared_reclaimed_{0};
  static inline std::atomic<int64_t> shared_slab_bytes_{0};
  std::atomic<int64_t> slabs_settled_{0};
  std::atomic<int64_t> slabs_settled_empty_{0};
  std::atomic<int64_t> spares_reclaimed_{0};
  std::atomic<int64_t> stash_reclaimed_{0};
  // Carved bytes of the warm slabs, and warm pushes and adoptions since the last look.
  std::atomic<int64_t> warm_bytes_{0};
  std::atomic<int64_t> warm_activity_{0};
  std::atomic<int64_t> warm_kept_{0};
  std::atomic<int64_t> warm_adopted_{0};
  std::atomic<int64_t> warm_touched_us_{0};  // the last keep or adoption, on source_'s clock
  static inline std::atomic<bool (*)()> slow_path_hook_{nullptr};
  static inline std::atomic<bool> slow_path_hook_armed_{false};
  __attribute__((noinline, cold)) static void fire_slow_path_hook();
  // The live heaps, for reclaim_idle_spares, which takes it with no other lock held and
  // only tries the heaps' locks.
  SpinLock heaps_lock_;
  ThreadHeap* heaps_ = nullptr;
  std::atomic<int64_t> heap_count_{0};         // heaps made and not yet given back (abandon)
  std::atomic<int8_t> barrier_available_{-1};  // -1: not asked yet
  int index_ = -1;
};

template <typename Init>
ABlock* ObjectSet::take_span(int64_t bytes, Init init, bool* zeroed, int64_t head_align,
                             BlockSet::Lookup lookup) {
  SubObjectMgr& shard = mgr_.lock_any();
  std::lock_guard<SpinLock> guard(shard.lock_, std::adopt_lock);
  ABlock* block = nullptr;
  if (head_align >= ACHUNK_ALIGN) {
    block = shard.block_set_.alloc_dedicated(bytes, zeroed, head_align, lookup);
  } else if (head_align > 0) {
    block = shard.block_set_.alloc_block_aligned(bytes, head_align, ABLOCK_SIZE, zeroed, lookup);
  } else {
    block = shard.block_set_.alloc_block(bytes, zeroed, lookup);
  }
  if (block != nullptr) init(block);
  return block;
}

// The inline object paths, here because they need ThreadHeap's definition.

inline void* ObjectSet::alloc(int64_t size, uint16_t label) {
  if (size > SMALL_OBJECT_MAX) return alloc_big(size, label);
  if (ThreadHeap* heap = existing_heap()) return heap->alloc_object(size, label);
  return alloc_without_heap(size_class_of(size), size, label);
}

inline void* ObjectSet::alloc_in_class(int sc, int64_t size, uint16_t label) {
  if (ThreadHeap* heap = existing_heap()) return heap->alloc_object_in(sc, size, label);
  return alloc_without_heap(sc, size, label);
}

inline void ObjectSet::free(void* ptr) {
  free(ptr, BlockSet::ptr2block(header_of(ptr)));
}

inline void ObjectSet::free(void* ptr, ABlock* block) {
  Slab* slab = slab_of(block);
  // FREE, keeping size and label so a later double free can name them.
  const uint64_t h = load_header(ptr);
  store_header(ptr, make_header(ObjectState::FREE, header_label(h), header_size(h)));
  // Only the owner thread stores its own marker, so a relaxed load sees it exactly.
  if (owned_by_this_thread(slab->owner_thread_.load(std::memory_order_relaxed))) {
    ThreadHeap::free_local(block, slab, ptr);
    return;
  }
  free_slow(ptr, block, slab);
}

// The in-use span of an object set that holds a pointer's header, outside dedicated
// chunks, or nullptr: the fast paths' checked lookup, reading no memory outside a chunk
// the registry knows.
__attribute__((always_inline)) inline ABlock* object_span_fast(void* ptr) {
  // The registry before any header read: a unit without a chunk of ours may be unmapped.
  // Its range test rides on the alignment test, and its byte proves the chunk live and an
  // object set's (BlockSet::take_chunk marks it), so no chunk header need be read.
  const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  if ((a & (chunk_registry::OUT_OF_RANGE | 15)) != 0 || !chunk_registry::is_marked_in_range(a)) {
    return nullptr;
  }
  AChunk* chunk = AChunk::ptr2chunk(ptr);
  // BlockSet::ptr2block cut down to slabs, which never live in dedicated chunks, so the
  // header is inside the chunk's block area. Unsigned, so a header before it wraps past
  // the end: one test each for the area and for a distance reaching before the chunk.
  const uint64_t at =
      (reinterpret_cast<uintptr_t>(header_of(ptr)) - reinterpret_cast<uintptr_t>(chunk->data())) /
      ABLOCK_SIZE;
  if (at >= static_cast<uint64_t>(BLOCKS_PER_CHUNK)) return nullptr;
  ABlock* blocks = chunk_block(chunk, 0);
  // BlockSet::span_head, inlined: a non-head block of an in-use span holds minus its
  // distance to the head. Without a branch: a random object is as often in a span's
  // head block as not, and the load may miss.
  const int64_t to_head = blocks[at].nblocks_;
  const int64_t step = to_head & (to_head >> 63);  // to_head if negative, else 0
  const int64_t head = static_cast<int64_t>(at) + step;
  if (head < 0) return nullptr;
  ABlock* block = blocks + head;
  // An in-use span that reaches the header's block (stale distances inside free spans
  // can name a head whose span ends before it): nblocks_ > at - head.
  if (block->magic_ != (ABlock::MAGIC_CODE | ABlock::FLAG_IN_USE) || block->nblocks_ + step <= 0) {
    return nullptr;
  }
  return block;
}

// The span of a small object that was checked live when freed and is still counted out
// of its slab (stashed, or being freed): the span is in use, so the distance its block
// holds is exact and needs none of ptr2block's checks.
inline ABlock* live_slab_block(void* ptr) {
  AChunk* chunk = AChunk::ptr2chunk(ptr);
  const int at = static_cast<int>(
      (reinterpret_cast<char*>(header_of(ptr)) - static_cast<char*>(chunk->data())) / ABLOCK_SIZE);
  return chunk_block(chunk, BlockSet::span_head(chunk, at));
}

// Slot 0's user pointer in a slab of class sc.
inline char* slab_first_user(ABlock* block, int sc) {
  return static_cast<char*>(block_data(block)) + slab_lead(sc) + AOBJECT_HEADER_SIZE;
}

// The canary's line is known only from the header, so it would be a second miss after
// the header's. The class bounds where it is: fetch both ends at once.
__attribute__((always_inline)) inline void prefetch_tail_bounds(void* ptr, int sc) {
  __builtin_prefetch(static_cast<char*>(ptr) + class_slot_size(sc) - AOBJECT_META_SIZE);
  __builtin_prefetch(static_cast<char*>(ptr) + class_tail_min(sc));
}

// The class of the slab whose object `ptr` may be, or -1: the inline checked lookup of
// usable_size's and realloc's fast paths. `prefetch`: its header's and canary's lines
// fetched too (realloc reads both; usable_size mostly the header alone).
template <bool prefetch = true>
__attribute__((always_inline)) inline int slab_class_fast(void* ptr) {
  ABlock* block = object_span_fast(ptr);
  if (block == nullptr) return -1;
  const int sc = slab_of(block)->sc_;
  if (sc >= SIZE_CLASS_COUNT) return -1;  // a big object, a heap or a lent span
  if (prefetch) prefetch_tail_bounds(ptr, sc);
  return sc;
}

// A plain-class object in use (PLAIN_CLASS_BIT, any origin): its header alone names its
// class; state and bit compared as one.
inline constexpr uint64_t PLAIN_STATE_MASK = ~uint64_t{0} << 48 | PLAIN_CLASS_BIT;
inline constexpr uint64_t PLAIN_IN_USE = make_header(ObjectState::IN_USE, 0, 0) | PLAIN_CLASS_BIT;

// The class of the small object in use at ptr, its header in *header, or -1: usable_size's
// and realloc's checked lookup. The registry first, as every fast path: the unit starts a
// live chunk of an object set, mapped in whole units (chunk_aligned_size), and the header
// word lies past its header region, so the read cannot fault. A plain-class object's
// header names its class, its ABlock line left alone; any other's slab does (`prefetch`:
// as slab_class_fast's).
template <bool prefetch>
__attribute__((always_inline)) inline int live_class_fast(void* ptr, uint64_t* header) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  if ((a & (chunk_registry::OUT_OF_RANGE | 15)) != 0 || !chunk_registry::is_marked_in_range(a) ||
      (a & (ACHUNK_ALIGN - 1)) < ACHUNK_HEADER_SIZE + AOBJECT_HEADER_SIZE) {
    return -1;
  }
  const uint64_t h = load_header(ptr);
  *header = h;
  if ((h & PLAIN_STATE_MASK) == PLAIN_IN_USE && header_size(h) <= SMALL_OBJECT_MAX) {
    return size_class_of(header_size(h));
  }
  const int sc = slab_class_fast<prefetch>(ptr);
  return header_state(h) == ObjectState::IN_USE ? sc : -1;
}

inline int64_t ObjectSet::try_usable_size_fast(void* ptr) {
  uint64_t h;
  const int sc = live_class_fast<false>(ptr, &h);
  if (sc < 0) return -1;
  const int64_t capacity = class_slot_size(sc) - AOBJECT_META_SIZE;
  // Grown to its slot already: the canary stays where it is, for the free to check, and
  // its line (a second miss after the header's) is not read here.
  if (header_size(h) == capacity) return capacity;
  if (!tail_intact(ptr, header_size(h))) return -1;
  store_header(ptr, with_size(h, static_cast<uint32_t>(capacity)));
  write_tail(ptr, capacity);
  return capacity;
}

inline int ObjectSet::try_live_class(void* ptr, uint64_t* header) {
  uint64_t h;
  const int sc = live_class_fast<true>(ptr, &h);
  if (sc < 0) return -1;
  if ((h >> ORIGIN_SHIFT) != in_use_key(AllocOrigin::MALLOC) || !tail_intact(ptr, header_size(h))) {
    return -1;
  }
  *header = h;
  return sc;
}

// Whether the object at ptr is in use with the origin of `key` (in_use_key) and its canary
// intact; then marks it FREE, keeping size and label so a later double free can name them.
__attribute__((always_inline)) inline bool take_live(void* ptr, uint64_t key) {
  const uint64_t h = load_header(ptr);
  if ((h >> ORIGIN_SHIFT) != key || !tail_intact(ptr, header_size(h))) return false;
  store_header(ptr, h ^ IN_USE_TO_FREE);
  return true;
}

template <typename BinOf>
inline void ObjectSet::free_fast(void* ptr, BinOf bin_of, FreeFallback fallback, uint64_t key) {
  // The registry before any header read: a unit without a chunk of ours may be unmapped.
  // Its range test rides on the alignment test, and its byte proves the chunk live and an
  // object set's, so the chunk's header may be read.
  const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  if ((a & (chunk_registry::OUT_OF_RANGE | 15)) != 0 || !chunk_registry::is_marked_in_range(a)) {
    return fallback(ptr);
  }
  AChunk* chunk = AChunk::ptr2chunk(ptr);
  // The block of the header, unsigned: a header before the block area wraps past its end.
  const uint64_t at = (a - AOBJECT_HEADER_SIZE - reinterpret_cast<uintptr_t>(chunk->data())) /
                      static_cast<uint64_t>(ABLOCK_SIZE);
  if (at >= static_cast<uint64_t>(BLOCKS_PER_CHUNK)) return fallback(ptr);
  // The block's tag names the slab's class (0: no slab: a big object, a heap, a lent span).
  const unsigned sc = load_block_tag(chunk, at) - 1;
  if (sc >= static_cast<unsigned>(SIZE_CLASS_COUNT)) return fallback(ptr);
  // Header and canary fetched at once: in a large live set a random object misses on both,
  // and the canary's line is known only from the header.
  prefetch_tail_bounds(ptr, static_cast<int>(sc));
  if (!take_live(ptr, key)) return fallback(ptr);
  // Checked, then into the calling thread's bin of its class, whoever allocated it, when
  // the chunk is of the bin's set: no block's ABlock line is read.
  ThreadHeap* bin = bin_of();
  if (bin != nullptr && bin->in_set(chunk_meta(chunk)->context_) && bin->bin_push(sc, ptr)) return;
  return free_unbinned(ptr, static_cast<int>(sc), bin);
}

}  // namespace achunk
