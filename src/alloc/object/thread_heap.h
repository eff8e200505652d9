// Object layer: ThreadHeap, one thread's slabs of one ObjectSet. Only its thread touches
// its current slabs, so the common alloc and free are a few plain loads and stores.
// A heap owns per class its current slab, its spares, the slabs with room it adopted or
// freed into (partial_) and its last FULL_SLABS_KEPT full slabs (full_, so its own frees
// into them stay plain stores); an older full slab is disowned (ObjectSet::disown) and
// comes back through the set's ready stack. No slow path walks slabs without room.
// Other threads compare a slab's owner with their own thread, never with a heap; the one
// exception, another thread's look taking an idle heap's spares, emptied current slabs
// and stash, goes through the set's heap list and the heap's lock_, which the owner holds
// on its slow paths only, and for a current slab or the stash through a handshake with
// the pops (pop, enter_stash).
// The stash is the heap's bins: the drop-in free puts every checked object there, its own
// or another thread's (ObjectSet::free_fast), the object layer's free one that would make
// a slab without free slots partial again or that another thread owns; a pop takes from
// it before the current slab: a thread reuses its last frees, and objects other threads
// allocated, without handing slabs back and forth (jemalloc's tcache).
// Depends on slab.h, size_class.h and the base layer's spin_lock.h.
#pragma once

#include <atomic>

#include "achunk/base/spin_lock.h"
#include "alloc/object/size_class.h"
#include "alloc/object/slab.h"

namespace achunk {

class ObjectSet;

namespace thread_heap_detail {
inline constexpr int64_t STASH_BYTES = 8192;
inline constexpr int STASH_MAX_COUNT = 64;
// A page class (page-aligned buffers: direct I/O, valloc) has slots above the byte budget
// from an 8 KiB buffer up, and 3-8 of them a slab: without a stash each free into a full
// slab and the malloc after it are slab hand-offs. Up to a 16 KiB buffer (an InnoDB page,
// a 20 KiB slot) it stashes two objects whatever their bytes.
inline constexpr int PAGE_STASH_FLOOR = 2;
inline constexpr int64_t PAGE_STASH_SLOT_MAX = 20480;
// Per class, from a table: every stash push asks, and a division costs more than the push.
struct StashCapTable {
  uint8_t n[SIZE_CLASS_COUNT];
  constexpr StashCapTable() : n() {
    for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
      int64_t slots = STASH_BYTES / class_slot_size(sc);
      if (is_page_class(sc) && class_slot_size(sc) <= PAGE_STASH_SLOT_MAX &&
          slots < PAGE_STASH_FLOOR) {
        slots = PAGE_STASH_FLOOR;
      }
      n[sc] = static_cast<uint8_t>(slots > STASH_MAX_COUNT ? STASH_MAX_COUNT : slots);
    }
  }
};
inline constexpr StashCapTable STASH_CAP{};
}  // namespace thread_heap_detail

class ThreadHeap {
 public:
  // Per class, the stash (the bin): freed objects (linked through their first word, newest
  // first) and the room left (see bins_).
  struct alignas(16) Bin {
    std::atomic<void*> head{nullptr};
    std::atomic<uint8_t> room{0};  // stash_cap less the count, so a push tests it alone
  };

  // What a heap may keep of slabs that may sit empty, over all classes: its spares, and
  // the current slabs it keeps current when they empty (counted while current, empty or
  // not). A thread that frees and allocates a batch across slab boundaries takes its
  // slabs back rather than handing them to the set's free spans and carving new ones each
  // round, and one that cycles a lone object in each of many classes keeps every class's
  // slab. Counted twice: their carved bytes (the pages they can hold in RAM; a slab is
  // carved a page at a time) within SPARE_BYTES_MAX, and their whole spans within
  // SPARE_SPAN_BYTES_MAX (the ctx's hold); one carving of every class fits both. They go
  // back by idle time: another thread's look (ObjectSet::reclaim_idle_spares, the
  // housekeeping thread's each interval) takes them from a heap that has made no
  // slow-path call since the last one.
  static constexpr int64_t SPARE_BYTES_MAX = 512 * 1024;
  static constexpr int64_t SPARE_SPAN_BYTES_MAX = 1536 * 1024;
  // Full slabs per class a heap keeps owned; a free into one of them, by its thread, makes
  // it partial again without an atomic. Bounds what thread exit walks.
  static constexpr int FULL_SLABS_KEPT = 16;
  // Bytes of freed objects a heap may stash per class (and at most STASH_MAX_COUNT
  // objects); a class whose slot is larger has no stash, but for the page classes up to
  // PAGE_STASH_SLOT_MAX, which keep PAGE_STASH_FLOOR. A full stash takes no more of the
  // thread's own objects (they go to their slabs) and gives its newest half back for
  // another thread's. All classes together hold at most 509 KiB, which another thread's
  // look takes back from an idle heap.
  static constexpr int64_t STASH_BYTES = thread_heap_detail::STASH_BYTES;
  static constexpr int STASH_MAX_COUNT = thread_heap_detail::STASH_MAX_COUNT;
  static constexpr int PAGE_STASH_FLOOR = thread_heap_detail::PAGE_STASH_FLOOR;
  static constexpr int64_t PAGE_STASH_SLOT_MAX = thread_heap_detail::PAGE_STASH_SLOT_MAX;
  static int stash_cap(int sc) { return thread_heap_detail::STASH_CAP.n[sc]; }

  // `shards`, `shards_bytes`: where the set's block shards lie (see in_set).
  ThreadHeap(ObjectSet* set, uint8_t set_index, const void* shards, uintptr_t shards_bytes)
      : set_(set),
        set_index_(set_index),
        shards_(reinterpret_cast<uintptr_t>(shards)),
        shards_bytes_(shards_bytes) {
    for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) set_stash_count(sc, 0);
  }

  // A free slot of class sc from the current slab, without a call; nullptr when it has
  // none. The caller writes header and tail. popping_ is up around the pop: another thread
  // taking an idle heap's emptied current slab (take_emptied_current) unhooks it, makes
  // every thread pass a barrier, and backs off if it then sees the flag up.
  // The bin (stash) first: the thread's last frees of the class, whatever slab they are
  // on, hot in its cache and never counted back into their slabs.
  __attribute__((always_inline)) void* pop(int sc) {
    popping_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    void* p = pop_stashed(sc);
    if (p == nullptr) {
      ABlock* block = current_[sc].load(std::memory_order_acquire);
      if (block != nullptr) {
        Slab* slab = slab_of(block);
        p = slab->local_free_;
        if (p != nullptr) {
          void* next = *static_cast<void**>(p);
          slab->local_free_ = next;
          // Slots another core freed are cold here: the next pop reads the link and
          // writes the header beside it.
          __builtin_prefetch(next, 1);
          slab->used_.store(slab->used_.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
        }
      }
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    popping_.store(false, std::memory_order_release);
    return p;
  }
  // A free slot of class sc, refilling the current slab when needed, or nullptr.
  void* alloc(int sc) {
    if (void* p = pop(sc)) return p;
    stash_gc();
    return alloc_slow(sc);
  }
  // An object of `size` (<= SMALL_OBJECT_MAX) bytes with header and canary from the
  // current slab, or nullptr when it needs a refill. No call at all, so a caller whose
  // other paths are tail calls saves no registers. `in_use_header` is
  // make_header(IN_USE, label, 0), precomputed by the caller.
  __attribute__((always_inline)) void* alloc_object_fast(int64_t size, uint64_t in_use_header) {
    return alloc_object_fast_in(size_class_of(size), size, in_use_header);
  }
  // The same in class sc, which holds `size` (an aligned class, say).
  __attribute__((always_inline)) void* alloc_object_fast_in(int sc, int64_t size,
                                                            uint64_t in_use_header) {
    void* p = pop(sc);
    if (p != nullptr) init_object(p, size, in_use_header);
    return p;
  }
  // The same, refilling when needed.
  void* alloc_object(int64_t size, uint16_t label) {
    return alloc_object_in(size_class_of(size), size, label);
  }
  // The same in class sc, which holds `size` (an aligned class, say).
  void* alloc_object_in(int sc, int64_t size, uint16_t label) {
    return alloc_object_with(sc, size, make_header(ObjectState::IN_USE, label, 0));
  }
  // The same with the header `in_use_header | size` (PLAIN_CLASS_BIT for a plain class).
  void* alloc_object_with(int sc, int64_t size, uint64_t in_use_header) {
    void* p = alloc(sc);
    if (p != nullptr) init_object(p, size, in_use_header);
    return p;
  }
  // A free of an object on one of the calling thread's slabs; `may_stash` false when the
  // object leaves the stash.
  static void free_local(ABlock* block, Slab* slab, void* p, bool may_stash = true) {
    void* next = slab->local_free_;
    const int32_t used = slab->used_.load(std::memory_order_relaxed) - 1;
    // Emptied, or the first free slot of a slab that was out of them (maybe a full_ one):
    // the slow path frees p itself, into the stash or the slab. The current slab stays as
    // it is either way.
    if ((used == 0 || next == nullptr) && !slab->in_current_) {
      slab_freed_slow(block, slab, p, may_stash);
      return;
    }
    *static_cast<void**>(p) = next;
    slab->local_free_ = p;
    // Stored last (release): a thread that finds used_ 0 after the barrier knows this free
    // is done.
    slab->used_.store(used, std::memory_order_release);
  }

  ObjectSet* set() const { return set_; }
  // Whether `shard` (a chunk's BlockChunkMeta::context_) is one of this heap's set's block
  // shards: an object there may go into this heap's bins. Read from the chunk header and
  // the heap, no span's ABlock.
  bool in_set(const void* shard) const {
    return reinterpret_cast<uintptr_t>(shard) - shards_ < shards_bytes_;
  }
  uint8_t set_index() const { return set_index_; }
  // Refills so far, and the slabs they looked at (each adopted, collected or carved slab
  // counts once): their ratio stays flat however large the live set grows.
  uint64_t refills() const { return refills_; }
  uint64_t slabs_visited() const { return slabs_visited_; }
  // Disowned slabs this thread took back by freeing into them (take_back).
  uint64_t taken_back() const { return taken_back_; }
  int stash_count(int sc) const {
    return stash_cap(sc) - bins_[sc].room.load(std::memory_order_relaxed);
  }

  // The owner stashes a freed object (header FREE, still counted in its slab's used_) of
  // class sc from slab `block`, its own or another thread's; false when the class has no
  // stash or the look is taking the stash now: the caller frees it into its slab. Without
  // the process barrier no look takes a stash, and the owner's works the same. Inline while the
  // stash has room (every free that lands in a full or foreign slab comes here); a full one first
  // gives half back, out of line.
  __attribute__((always_inline)) bool stash_push(int sc, void* p, const ABlock* block) {
    // Read again inside the handshake: the look may empty the stash in between, never
    // fill it, so this test only sends a push out of line too often.
    if (bins_[sc].room.load(std::memory_order_relaxed) == 0) {
      return stash_push_full(sc, p, block);
    }
    if (!stash_push_room(sc, p)) return false;
    stash_top_block_[sc] = block;
    return true;
  }
  // The free's bin hit, which knows no slab: false when class sc's stash is full or the
  // look is taking it.
  __attribute__((always_inline)) bool bin_push(unsigned sc, void* p) {
    Bin& bin = bins_[sc];
    if (bin.room.load(std::memory_order_relaxed) == 0) return false;
    const bool open = enter_stash();
    if (open) push_to(bin, p);
    leave_stash();
    return open;
  }
  // A stashed object of class sc, or nullptr: pop's first choice, inside its popping_
  // window.
  __attribute__((always_inline)) void* pop_stashed(int sc) {
    void* p = bins_[sc].head.load(std::memory_order_relaxed);
    if (p == nullptr || stash_closed_.load(std::memory_order_relaxed)) return nullptr;
    void* next = *static_cast<void**>(p);
    bins_[sc].head.store(next, std::memory_order_relaxed);
    __builtin_prefetch(next, 1);  // as a slab's pop: the next pop's link and header
    bins_[sc].room.store(bins_[sc].room.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
    return p;
  }
  // The owner gives every stashed object back to its slab (before the thread lets the
  // heap go).
  void unstash_all();

 private:
  friend class ObjectSet;
  friend struct ThreadHeapTestPeer;  // holds popping_ up, as a pop stopped midway would
  void* alloc_slow(int sc);
  // free_local's rest, p not yet listed: the first free slot of a full_ slab goes to the
  // stash when it can, the slab staying full; anything else is listed here, and an
  // emptied or no longer full slab moves.
  static void slab_freed_slow(ABlock* block, Slab* slab, void* p, bool may_stash);
  // Whether class sc's stash holds objects and the last one pushed came from `block`
  // (the owner's view).
  bool stash_top_in(int sc, const ABlock* block) const {
    return bins_[sc].head.load(std::memory_order_relaxed) != nullptr &&
           stash_top_block_[sc] == block;
  }
  // The stash handshake (see pop): false when the look is taking the stash.
  bool enter_stash() {
    popping_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return !stash_closed_.load(std::memory_order_relaxed);
  }
  void leave_stash() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    popping_.store(false, std::memory_order_release);
  }
  // A stash call off the hit paths (a full stash's drain, a gc turn): the look counts
  // them as activity, with activity_. The hits count nothing: a heap that only hits may
  // lose its stash to a look once an interval, and refills.
  void count_stash_op() {
    stash_ops_.store(stash_ops_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // stash_push once the stash has room. The count is read inside the handshake: a look
  // that took the stash before it began has left it empty.
  __attribute__((always_inline)) bool stash_push_room(int sc, void* p) {
    const bool open = enter_stash();
    if (open) push_to(bins_[sc], p);
    leave_stash();
    return open;
  }
  // Inside the handshake, where the room is read again: the look may have emptied the bin
  // since the caller's test, never filled it.
  __attribute__((always_inline)) static void push_to(Bin& bin, void* p) {
    *static_cast<void**>(p) = bin.head.load(std::memory_order_relaxed);
    bin.head.store(p, std::memory_order_relaxed);
    bin.room.store(bin.room.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  // stash_push for a class with no stash, or a full stash (whose newest half goes back
  // first).
  __attribute__((noinline)) bool stash_push_full(int sc, void* p, const ABlock* block);
  // Gives the newest half of class sc's stash back to the slabs.
  void unstash_half(int sc);
  // Gives all of class sc's stash back to the slabs.
  void unstash_class(int sc);
  // At each refill, one class in turn: its stash goes back to the slabs if neither a malloc
  // nor a free used it since the class's last turn (its head did not move). A class the thread
  // stopped asking for (a buffer grown by realloc left it behind) so does not keep its slabs from
  // emptying.
  void stash_gc();
  // Frees a chain of stashed objects (linked through their first word) into their slabs,
  // as the owner: into its own slabs directly, into others' as a remote free.
  static void unstash(void* chain);
  // Another thread's look, under lock_: close_stash closes a stash holding objects (the
  // owner's stash calls then fail); after the barrier, take_stash chains every stashed
  // object onto `chain` unless a stash call is under way, and opens the stash again. The
  // caller frees the chain with release_stolen once it holds no lock.
  bool close_stash();
  void* take_stash(bool barrier, void* chain);
  static int64_t release_stolen(void* chain);
  static void init_object(void* p, int64_t size, uint64_t in_use_header) {
    store_header(p, in_use_header | static_cast<uint32_t>(size));
    write_tail(p, static_cast<uint32_t>(size));
  }
  // slab_freed_slow's end for a slab that moves, under lock_: lists p, stores `used`, then
  // an emptied slab is parked (keep_empty) and a full_ one becomes partial.
  void move_freed(ABlock* block, Slab* slab, void* p, int32_t used);
  static void list_freed(Slab* slab, void* p, int32_t used) {
    *static_cast<void**>(p) = slab->local_free_;
    slab->local_free_ = p;
    // Last (release), as free_local's: a look that finds the slab's objects all free
    // after this store knows the free is done.
    slab->used_.store(used, std::memory_order_release);
  }
  // Whether every object out of the slab was freed: counted out by used_, pending on its
  // remote list (frees in a stash are still counted out).
  static bool all_freed(const Slab* slab) {
    const uintptr_t word = slab->remote_free_.load(std::memory_order_acquire);
    return slab->used_.load(std::memory_order_acquire) ==
           static_cast<int32_t>(word >> Slab::REMOTE_COUNT_SHIFT);
  }
  // Another thread's look at this idle heap, under lock_: unlinks every partial and full_
  // slab whose objects other threads freed onto `chain` (through next_) for the caller to
  // give back, O(classes + kept slabs). The owner's fast paths touch only current slabs
  // and slabs holding its live objects, and its own emptying free moves the slab under
  // lock_ (move_freed), so none of these can be in use.
  ABlock* give_up_freed_slabs(ABlock* chain, int64_t* bytes);
  static ABlock* give_up(ABlock* block, ABlock* chain, int64_t* bytes);
  // Unlinks every spare onto `chain` (through next_) for the caller to give back; the
  // caller holds lock_ and the set's heaps_lock_.
  ABlock* give_up_spares(ABlock* chain, int64_t* bytes);
  // The spare stack of class sc (ABlock next_, Slab::in_spare_), under lock_.
  void push_spare(int sc, ABlock* block);
  ABlock* pop_spare(int sc);
  // Makes `block` (which has a free slot) current and takes a slot from it.
  void* take(int sc, ABlock* block);
  // Makes the slab's remote frees its local list when that is empty (owner, or whoever
  // holds the slab alone); the slab is never tagged REMOTE_NOTIFY then. Never walks a
  // list: with local slots left, the remote frees stay pending.
  static void collect(Slab* slab);
  // partial_ list operations (ABlock prev_/next_).
  void link(int sc, ABlock* block);
  void unlink(int sc, ABlock* block);
  // Takes an owned slab out of whichever role it has (current, partial or full).
  void detach(int sc, ABlock* block);
  // full_ list operations; push_full disowns the oldest beyond FULL_SLABS_KEPT.
  void push_full(int sc, ABlock* block);
  void unlink_full(int sc, ABlock* block);
  // Takes one of the set's ready slabs of class sc, if any, into partial_.
  void adopt_ready(int sc);
  // Owns again a slab this thread disowned and has just freed into: partial, or, emptied
  // by the frees it gathers, kept as any emptied slab is (keep_empty).
  void take_back(ABlock* block);
  // An emptied slab, in no list: a spare within SPARE_BYTES_MAX (with the kept current
  // slabs), else a free span.
  void keep_empty(int sc, ABlock* block);
  // Another thread's look at this idle heap, under lock_: unhook_current takes every
  // current slab out of current_ (chained through next_); after a process barrier
  // (`barrier`: it passed), take_emptied_current chains those still empty, with no pop
  // under way, onto `chain` for the caller to give back, and puts the others back.
  // Between the two the owner's pops find no current slab and wait for lock_ in alloc_slow.
  ABlock* unhook_current();
  ABlock* take_emptied_current(ABlock* unhooked, bool barrier, ABlock* chain, int64_t* bytes);
  // The bytes of a slab its pages can hold in RAM: the slots carved so far.
  static int64_t carved_bytes(const Slab* slab) {
    return int64_t{slab->carved_.load(std::memory_order_relaxed)} * class_slot_size(slab->sc_);
  }
  // Whether one more slab, kept, stays within both budgets.
  bool within_budget(const Slab* slab) const {
    return kept_carved_ + carved_bytes(slab) <= SPARE_BYTES_MAX &&
           kept_span_ + slab_bytes(slab->sc_) <= SPARE_SPAN_BYTES_MAX;
  }
  void count_kept(const Slab* slab, int64_t sign) {
    kept_carved_ += sign * carved_bytes(slab);
    kept_span_ += sign * slab_bytes(slab->sc_);
  }
  // A slab leaving current_: no longer kept when emptied.
  void unkeep(Slab* slab) {
    if (!slab->in_current_) return;
    slab->in_current_ = false;
    count_kept(slab, -1);
  }

  // Per class, the stash (Bin): one line holds four classes' bins. First, so a pop or push
  // indexes it straight off the heap pointer. The owner's stash calls go through
  // enter_stash; another thread's look takes them from an idle heap (take_stash).
  void set_stash_count(int sc, int n) {
    bins_[sc].room.store(static_cast<uint8_t>(stash_cap(sc) - n), std::memory_order_relaxed);
  }
  Bin bins_[SIZE_CLASS_COUNT];
  // Written by the owner under lock_, and by another thread's look under lock_; read by
  // the owner's pops without it.
  std::atomic<ABlock*> current_[SIZE_CLASS_COUNT] = {};
  ObjectSet* set_;
  std::atomic<bool> popping_{false};
  std::atomic<bool> stash_closed_{false};  // see close_stash; beside popping_, which pops read too
  const uint8_t set_index_;  // set_'s index, as its slabs record it (Slab::set_index_)
  const uintptr_t shards_;   // in_set's range
  const uintptr_t shards_bytes_;
  // Whether an emptied current slab stays current: only where the look can take it from
  // an idle heap (Os::process_barrier), else it is parked as a spare like any emptied slab.
  bool keep_emptied_current_ = false;
  // Carved and span bytes of the spares and of the current slabs with in_current_ (under
  // lock_), within SPARE_BYTES_MAX and SPARE_SPAN_BYTES_MAX. A spare is never carved, and
  // a kept current slab's carving is counted as it happens (alloc_slow).
  int64_t kept_carved_ = 0;
  int64_t kept_span_ = 0;
  // Owned slabs with room that are neither current nor spare (adopted, or freed into
  // after filling), linked via ABlock prev_/next_; a refill takes the head.
  ABlock* partial_[SIZE_CLASS_COUNT] = {};
  // The last full slabs, newest at the head (ABlock prev_/next_), up to FULL_SLABS_KEPT.
  ABlock* full_[SIZE_CLASS_COUNT] = {};
  ABlock* full_tail_[SIZE_CLASS_COUNT] = {};
  uint8_t full_count_[SIZE_CLASS_COUNT] = {};
  uint64_t refills_ = 0;
  uint64_t slabs_visited_ = 0;
  uint64_t taken_back_ = 0;
  void* gc_seen_[SIZE_CLASS_COUNT] = {};  // owner only: each class's head at its gc turn
  const ABlock* stash_top_block_[SIZE_CLASS_COUNT] = {};  // owner only: see stash_top_in
  int stash_cursor_ = 0;                                  // the class whose turn is next (stash_gc)
  // Stash calls so far (the owner's): the look counts them as activity, with activity_.
  std::atomic<uint64_t> stash_ops_{0};
  uint64_t seen_stash_ops_ = UINT64_MAX;
  // Empty slabs kept for the next refills, per class a stack (newest first), within the
  // budgets with the kept current slabs.
  ABlock* spare_[SIZE_CLASS_COUNT] = {};
  // Held by the owner through alloc_slow and move_freed, the only
  // places that touch spare_ and the slab lists, and tried by another thread taking this heap's
  // spares. The fast paths never take it: they touch current slabs and slabs holding live objects,
  // never a spare, and nobody else takes those. Not held for fork: others only try it, so a
  // child that inherits it held merely skips that (dead) thread's heap.
  SpinLock lock_{ForkRole::NOT_HELD};
  uint64_t activity_ = 0;                // slow-path calls so far (under lock_)
  uint64_t seen_activity_ = UINT64_MAX;  // activity_ at the last look by another thread
  ThreadHeap* prev_heap_ = nullptr;      // the set's heaps (ObjectSet::heaps_lock_)
  ThreadHeap* next_heap_ = nullptr;
};

// The budgets hold one carving of every plain class (a lone object cycled in each keeps its
// slab).
// A fresh slab's first carving, as ObjectSet::carve makes it: slots up to the end of the
// first page (slot 0 starts slab_lead(sc) in), at least one, at most the capacity.
constexpr int64_t first_carving_bytes(int sc) {
  const int64_t slot = class_slot_size(sc);
  const int64_t carved = 1 + (CARVE_BYTES - slab_lead(sc) - 1) / slot;
  const int64_t capacity = (slab_size(sc) - slab_lead(sc)) / slot;
  return (carved < capacity ? carved : capacity) * slot;
}
constexpr bool every_class_fits_the_spare_budgets() {
  int64_t carved = 0;
  int64_t spans = 0;
  // The plain classes; the aligned ones share the budgets as they come.
  for (int sc = 0; sc < PLAIN_CLASS_COUNT; ++sc) {
    carved += first_carving_bytes(sc);
    spans += slab_size(sc);
  }
  return carved <= ThreadHeap::SPARE_BYTES_MAX && spans <= ThreadHeap::SPARE_SPAN_BYTES_MAX;
}
static_assert(every_class_fits_the_spare_budgets());

}  // namespace achunk
