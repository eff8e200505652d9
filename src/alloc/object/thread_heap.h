// Object layer: ThreadHeap, one thread's slabs of one ObjectSet. Only its thread touches
// its current slabs, so the common alloc and free are a few plain loads and stores.
// A heap owns per class its current slab, one spare, the slabs with room it adopted or
// freed into (partial_) and its last FULL_SLABS_KEPT full slabs (full_, so its own frees
// into them stay plain stores); an older full slab is disowned (ObjectSet::disown) and
// comes back through the set's ready stack. No slow path walks slabs without room.
// Other threads compare a slab's owner with their own thread, never with a heap; the one
// exception, another thread's trim taking an idle heap's empty spares, goes through the
// set's heap list and the heap's lock_, which the owner holds on its slow paths only.
// Depends on slab.h, size_class.h and the base layer's spin_lock.h.
#pragma once

#include <atomic>

#include "achunk/base/spin_lock.h"
#include "alloc/object/size_class.h"
#include "alloc/object/slab.h"

namespace achunk {

class ObjectSet;

class ThreadHeap {
 public:
  // Slabs up to this size always stay as a class's empty spare (see spare_).
  static constexpr int64_t SPARE_SLAB_MAX = 16 * 1024;
  // Empty slabs bigger than SPARE_SLAB_MAX (spares, parked or not) a heap keeps, in bytes:
  // the biggest such slab, so a thread cycling objects of any one class keeps its slab,
  // while an idle thread's emptied slabs, which would keep their pages for good, hold
  // at most this much.
  static constexpr int64_t EMPTY_BIG_SLAB_MAX = 104 * 1024;
  // Distinct slabs emptied with no refill of any class between, after which the heap
  // gives back every empty slab it keeps, washes the set's free spans (those slabs
  // included) and keeps no slab that empties until its next refill. A thread in a steady state
  // refills about once per slab it empties (the spare it keeps becomes current again), so a run of
  // them means its memory is shrinking: a closing connection tearing down its session, most likely
  // the thread's last calls before it waits, idle, for the next one. A trim followed by a refill
  // within span_idle_ms was early: that heap's run doubles, up to TRIM_RUN_MAX; a later
  // one halves it back.
  static constexpr int TRIM_RUN = 8;
  static constexpr int TRIM_RUN_MAX = 1024;
  // Full slabs per class a heap keeps owned; a free into one of them, by its thread, makes
  // it partial again without an atomic. Bounds what thread exit and a trim walk.
  static constexpr int FULL_SLABS_KEPT = 16;

  explicit ThreadHeap(ObjectSet* set) : set_(set) {}

  // A free slot of class sc from the current slab, without a call; nullptr when it has
  // none. The caller writes header and tail.
  __attribute__((always_inline)) void* pop(int sc) {
    ABlock* block = current_[sc];
    if (block == nullptr) return nullptr;
    Slab* slab = slab_of(block);
    void* p = slab->local_free_;
    if (p != nullptr) {
      slab->local_free_ = *static_cast<void**>(p);
      ++slab->used_;
    }
    return p;
  }
  // A free slot of class sc, refilling the current slab when needed, or nullptr.
  void* alloc(int sc) {
    if (void* p = pop(sc)) return p;
    return alloc_slow(sc);
  }
  // An object of `size` (<= SMALL_OBJECT_MAX) bytes with header and canary from the
  // current slab, or nullptr when it needs a refill. No call at all, so a caller whose
  // other paths are tail calls saves no registers. `in_use_header` is
  // make_header(IN_USE, label, 0), precomputed by the caller.
  __attribute__((always_inline)) void* alloc_object_fast(int64_t size, uint64_t in_use_header) {
    void* p = pop(size_class_of(size));
    if (p != nullptr) init_object(p, size, in_use_header);
    return p;
  }
  // The same, refilling when needed.
  void* alloc_object(int64_t size, uint16_t label) {
    void* p = alloc(size_class_of(size));
    if (p != nullptr) init_object(p, size, make_header(ObjectState::IN_USE, label, 0));
    return p;
  }
  // A free of an object on one of the calling thread's slabs.
  static void free_local(ABlock* block, Slab* slab, void* p) {
    void* next = slab->local_free_;
    *static_cast<void**>(p) = next;
    slab->local_free_ = p;
    // Emptied, or the first free slot of a slab that was out of them (maybe a full_ one).
    if (--slab->used_ == 0 || next == nullptr) slab_freed_slow(block, slab);
  }

  ObjectSet* set() const { return set_; }
  // Refills so far, and the slabs they looked at (each adopted, collected or carved slab
  // counts once): their ratio stays flat however large the live set grows.
  uint64_t refills() const { return refills_; }
  uint64_t slabs_visited() const { return slabs_visited_; }

 private:
  friend class ObjectSet;
  void* alloc_slow(int sc);
  static void slab_freed_slow(ABlock* block, Slab* slab);
  void on_slab_unfull(ABlock* block, Slab* slab);
  static void init_object(void* p, int64_t size, uint64_t in_use_header) {
    store_header(p, in_use_header | static_cast<uint32_t>(size));
    write_tail(p, static_cast<uint32_t>(size));
  }
  void on_slab_empty(ABlock* block, Slab* slab);
  // Unlinks every spare onto `chain` (through next_) for the caller to give back; the
  // caller holds lock_ and the set's heaps_lock_.
  ABlock* give_up_spares(ABlock* chain, int64_t* bytes);
  // Gives back every empty slab (spares, empty current slabs, partial slabs emptied by
  // other threads' frees: O(partial slabs)) and the spares of other heaps idle since the last look,
  // washes every free span of the set that is not washed, and sets draining_.
  void trim();
  void release(int sc, ABlock* block, bool wash = false);
  // At a refill: ends a run, and judges the last trim if there was one since.
  void end_run();
  // Makes `block` (which has a free slot) current and takes a slot from it.
  void* take(int sc, ABlock* block);
  // Moves the slab's remote frees to its local list (owner, or whoever holds the slab
  // alone); the slab is never tagged REMOTE_NOTIFY then.
  static void collect(Slab* slab);
  // partial_ list operations (ABlock prev_/next_).
  void link(int sc, ABlock* block);
  void unlink(int sc, ABlock* block);
  // Takes an owned slab out of whichever role it has (current, spare, partial or full).
  void detach(int sc, ABlock* block);
  // full_ list operations; push_full disowns the oldest beyond FULL_SLABS_KEPT.
  void push_full(int sc, ABlock* block);
  void unlink_full(int sc, ABlock* block);
  // Takes the set's notified slabs of class sc into partial_.
  void adopt_ready(int sc);

  ObjectSet* set_;
  ABlock* current_[SIZE_CLASS_COUNT] = {};
  // Owned slabs with room that are neither current nor spare (adopted, or freed into
  // after filling), linked via ABlock prev_/next_; a refill takes the head.
  ABlock* partial_[SIZE_CLASS_COUNT] = {};
  // The last full slabs, newest at the head (ABlock prev_/next_), up to FULL_SLABS_KEPT.
  ABlock* full_[SIZE_CLASS_COUNT] = {};
  ABlock* full_tail_[SIZE_CLASS_COUNT] = {};
  uint8_t full_count_[SIZE_CLASS_COUNT] = {};
  uint64_t refills_ = 0;
  uint64_t slabs_visited_ = 0;
  // Bytes of this heap's empty slabs bigger than SPARE_SLAB_MAX, `except` aside.
  int64_t empty_big_slab_bytes(const ABlock* except) const;
  // One empty slab per class is kept for the next refill (a bigger one than
  // SPARE_SLAB_MAX only within EMPTY_BIG_SLAB_MAX), so a thread that frees and allocates
  // around a slab boundary does not hand the same slab back and forth.
  ABlock* spare_[SIZE_CLASS_COUNT] = {};
  int empty_run_ = 0;         // slabs emptied since the last refill (each counted once)
  int trim_run_ = TRIM_RUN;   // the run that trims, for this heap
  uint16_t refill_mark_ = 0;  // refills so far (wrapping): Slab::empty_mark_ compares it
  bool draining_ = false;     // trimmed since the last refill: emptied slabs go back at once
  int64_t trimmed_us_ = -1;   // when the last trim ran, until the refill after it
  // Held by the owner through alloc_slow, on_slab_empty and on_slab_unfull, the only
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

}  // namespace achunk
