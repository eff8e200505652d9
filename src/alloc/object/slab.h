// Object layer: a slab's state (Slab, kept in its span's ABlock owner area) and the
// per-thread identity and heap generations the fast paths read: what ThreadHeap and ObjectSet
// both build on. Depends on the block layer's ablock.h, aobject.h, thread_state.h and the base
// layer's tls.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "achunk/base/tls.h"
#include "alloc/block/ablock.h"
#include "alloc/object/aobject.h"
#include "alloc/object/thread_state.h"

namespace achunk {

class ThreadHeap;

// The per-set generations a thread's heap pointers (ThreadState::heaps) are checked
// against and the thread's identity. Declared here so the lookups inline
// into the allocation and free paths.
namespace object_set_tls {
extern std::atomic<uint32_t> generation[MAX_SETS];
// Names the calling thread among the threads of this process, 1 (no slab's owner) until
// the thread's first this_thread_marker(): its TLS address with the process's fork
// generation in the top bits. A thread started in a forked child may be given the stack
// and TLS block of one of the parent's threads, which the child lacks; the generation
// keeps it from matching that thread's slabs. A slab records its owner by it, so a free
// recognises its own thread's slab without finding the heap first.
extern ACHUNK_TLS uintptr_t thread_marker;
// Slot bytes the calling thread took from shared slabs (the option shared_slab_bytes).
extern ACHUNK_TLS int64_t shared_used;
// Pushes onto slabs' remote lists the calling thread made (ObjectSet::push_remote), each
// one compare-and-swap that succeeded: what a test counts a drain's atomics by.
extern ACHUNK_TLS int64_t remote_pushes;
// Bumped in a forked child (ObjectSet::on_fork_child).
extern std::atomic<uint32_t> fork_generation;
const void* init_thread_marker();
}  // namespace object_set_tls

inline const void* this_thread_marker() {
  const uintptr_t m = object_set_tls::thread_marker;
  if (__builtin_expect(m == 1, 0)) return object_set_tls::init_thread_marker();
  return reinterpret_cast<const void*>(m);
}
// For the free fast path: an owner is a set marker, so an unset one (1) matches none.
inline bool owned_by_this_thread(const void* owner) {
  return reinterpret_cast<uintptr_t>(owner) == object_set_tls::thread_marker;
}

// A big object's user pointer sits 16 bytes into its span: its 64-bit size at 0, its
// header at 8, the user bytes 16-aligned. One placed for an alignment starts a block in
// (BIG_PLACED_OFFSET), its size and header ending the first block.
inline constexpr int64_t BIG_OBJECT_OFFSET = 2 * AOBJECT_HEADER_SIZE;
inline constexpr int64_t BIG_PLACED_OFFSET = ABLOCK_SIZE;

// A slab is carved (its slots' headers written and listed) this many bytes at a time.
inline constexpr int64_t CARVE_BYTES = 4096;

// A slab's state, kept in its ABlock's owner area.
struct Slab {
  // remote_free_'s word: the list head (a 16-aligned user pointer below 2^48), the
  // REMOTE_NOTIFY bit, and the list's length in the top 16 bits.
  static constexpr uintptr_t REMOTE_NOTIFY = 1;
  static constexpr int REMOTE_COUNT_SHIFT = 48;
  static constexpr uintptr_t REMOTE_HEAD_MASK =
      ((uintptr_t{1} << REMOTE_COUNT_SHIFT) - 1) & ~REMOTE_NOTIFY;
  static constexpr uint16_t BIG = 0xFFFF;      // sc_ of a span holding one big object
  static constexpr uint16_t HEAP = 0xFFFE;     // sc_ of a span holding a ThreadHeap
  static constexpr uint16_t FOREIGN = 0xFFFD;  // sc_ of a span lent out by alloc_span

  // The owning heap's thread (this_thread_marker()); nullptr: settled or not a slab (big
  // objects, heaps, lent spans), so such spans never take the fast free. A slab its
  // owner disowned keeps that marker with DISOWNED set (matching no thread), so the
  // free that makes it ready can tell whether its former owner is the one freeing.
  std::atomic<const void*> owner_thread_{nullptr};
  static constexpr uintptr_t DISOWNED = 1;
  void* local_free_ = nullptr;  // owner only: free slots (user pointers)
  // Other threads' frees: the list head with the list's length in the top 16 bits, so
  // the owner takes the list without walking it. A slab nobody owns (disowned, or
  // settled with live objects) has the REMOTE_NOTIFY bit set, on an empty list or on
  // the frees still pending when it was settled: the free that clears the bit pushes
  // the slab onto the set's ready stack, so exactly one free per disowning does.
  std::atomic<uintptr_t> remote_free_{0};
  // Objects out, net of frees seen. Written by the owner only; another thread's look reads
  // it to tell an emptied current slab (ThreadHeap::take_emptied_current).
  std::atomic<int32_t> used_{0};
  uint16_t sc_ = 0;
  uint16_t capacity_ = 0;
  // Slots carved so far (header FREE, on a list or handed out). A slab is carved a page
  // at a time as its owner needs slots, so the pages of a partly used slab that no
  // object ever reached stay untouched (and, in fresh memory, out of the RSS). Stored by
  // the owner after the headers, read by usage scans.
  std::atomic<uint16_t> carved_{0};
  // A big object's span was untouched (fresh or washed) when the object was carved, so
  // its bytes read as zero then (see ObjectSet::born_zero).
  bool born_zero_ = false;
  bool in_full_ = false;   // owner only: on its heap's full_ list
  bool in_spare_ = false;  // owner only: on its heap's spare stack
  // Owner only (read by another thread only under its heap's lock): its heap's current
  // slab, which stays current when its last object is freed (ThreadHeap::pop).
  bool in_current_ = false;
  // A big object's span: its user pointer starts at BIG_PLACED_OFFSET, not at
  // BIG_OBJECT_OFFSET (big_offset()).
  bool big_placed_ = false;
  // A slab's: its set's index (ObjectSet::index()), NO_SET for a set without one. A free
  // puts an object into a thread's bin only when it matches the bin's set, read from the
  // line the class comes from.
  uint8_t set_index_ = NO_SET;
  static constexpr uint8_t NO_SET = 0xFF;

  int64_t big_offset() const { return big_placed_ ? BIG_PLACED_OFFSET : BIG_OBJECT_OFFSET; }
};
static_assert(sizeof(Slab) <= sizeof(ABlock::owner_area_));

// The owner mark of a slab the calling thread disowns (see Slab::owner_thread_).
inline const void* disowned_by_this_thread() {
  return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(this_thread_marker()) |
                                       Slab::DISOWNED);
}
// For the free fast path, as owned_by_this_thread: a thread without a marker (1) disowned
// nothing, and no slab's owner reads 1.
inline bool disowned_by_this_thread(const void* owner) {
  return reinterpret_cast<uintptr_t>(owner) == (object_set_tls::thread_marker | Slab::DISOWNED);
}

// The block tag (chunk_block_tags) of every block of a slab of class sc; 0 for every other
// block. Written for a slab's blocks when it is made (ObjectSet::new_slab) and cleared
// when its span is given back (ObjectSet::free_span), so a tag is exact while the span is
// a slab.
inline uint8_t slab_tag(int sc) {
  return static_cast<uint8_t>(sc + 1);
}
inline void write_block_tags(ABlock* block, int nblocks, uint8_t tag) {
  uint8_t* tags = chunk_block_tags(AChunk::ptr2chunk(block)) + block_index(block);
  for (int i = 0; i < nblocks; ++i) {
    std::atomic_ref<uint8_t>(tags[i]).store(tag, std::memory_order_relaxed);
  }
}
// The tag of the block holding the header of the object at `ptr`: the class plus one of
// its slab, or 0. `at` must be below BLOCKS_PER_CHUNK.
inline unsigned load_block_tag(AChunk* chunk, uint64_t at) {
  return std::atomic_ref<uint8_t>(chunk_block_tags(chunk)[at]).load(std::memory_order_relaxed);
}

inline Slab* slab_of(ABlock* block) {
  return reinterpret_cast<Slab*>(block->owner_area_);
}
inline ABlock* block_of(Slab* slab) {
  return reinterpret_cast<ABlock*>(reinterpret_cast<char*>(slab) - offsetof(ABlock, owner_area_));
}

}  // namespace achunk
