// ObjectSet's object paths: alloc (small through the thread heap, big as its own span),
// free from any thread, in-place resize, and the usage scan.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "alloc/object/object_set.h"
#include "alloc/object/remote_free_batch.h"

namespace achunk {

namespace {

constexpr int64_t BIG_OFFSET = BIG_OBJECT_OFFSET;

int64_t* big_size_word(void* ptr) {
  return reinterpret_cast<int64_t*>(static_cast<char*>(ptr) - BIG_OFFSET);
}
void store_big_size(void* ptr, int64_t size) {
  std::atomic_ref<int64_t>(*big_size_word(ptr)).store(size, std::memory_order_relaxed);
}

void* slot_start_user(ABlock* block) {
  return static_cast<char*>(block_data(block)) + slab_of(block)->big_offset();
}

// The span bytes a big object of `size` needs, its user pointer `offset` bytes in.
int64_t big_span_bytes(int64_t offset, int64_t size) {
  return offset + size + AOBJECT_TAIL_SIZE;
}

}  // namespace

void* ObjectSet::alloc_big(int64_t size, uint16_t label, int64_t head_align) {
  run_slow_path_hook();
  bool zeroed = false;
  // A span placed for an alignment: the user bytes start at its second block.
  const int64_t offset =
      head_align > 0 && head_align < ACHUNK_ALIGN ? BIG_PLACED_OFFSET : BIG_OFFSET;
  ABlock* block = take_span(
      big_span_bytes(offset, size),
      [&](ABlock* block) {
        new (block->owner_area_) Slab();
        slab_of(block)->sc_ = Slab::BIG;
        slab_of(block)->born_zero_ = zeroed;
        slab_of(block)->big_placed_ = offset == BIG_PLACED_OFFSET;
      },
      // The header is in the first block; a pad header further in, or a bad pointer,
      // takes ptr2block's second look.
      &zeroed, head_align, BlockSet::Lookup::HEAD_BLOCK);
  if (block == nullptr) return nullptr;
  // After the shard lock: the header and canary pages may be fresh, and their faults
  // would hold every thread of the shard. A usage scan meanwhile sees no BIG header and
  // skips the span; the release pairs with its acquire, so it reads the size with it.
  void* p = slot_start_user(block);
  store_big_size(p, size);
  write_tail(p, size);
  std::atomic_ref<uint64_t>(*header_of(p))
      .store(make_header(ObjectState::BIG, label, header_size_field(size)),
             std::memory_order_release);
  return p;
}

void ObjectSet::mark_inner_pointer(void* ptr, void* inner) {
  ABlock* block = BlockSet::ptr2block(header_of(ptr));
  if (slab_of(block)->sc_ == Slab::BIG) BlockSet::mark_inner(block, header_of(inner));
}

int64_t ObjectSet::object_size(void* ptr, uint64_t header) {
  if (header_state(header) != ObjectState::BIG) return header_size(header);
  return std::atomic_ref<int64_t>(*big_size_word(ptr)).load(std::memory_order_relaxed);
}

bool ObjectSet::is_object_start(const void* ptr, ABlock* block) {
  const Slab* slab = slab_of(block);
  if (slab->sc_ == Slab::BIG) return ptr == slot_start_user(block);
  if (slab->sc_ == Slab::HEAP || slab->sc_ == Slab::FOREIGN) return false;
  const int64_t off = static_cast<const char*>(ptr) - slab_first_user(block, slab->sc_);
  const int64_t slot = class_slot_size(slab->sc_);
  return off >= 0 && off % slot == 0 && off / slot < slab->carved_.load(std::memory_order_acquire);
}

bool ObjectSet::born_zero(void* ptr) {
  const Slab* slab = slab_of(BlockSet::ptr2block(header_of(ptr)));
  return slab->sc_ == Slab::BIG && slab->born_zero_;
}

namespace {

constexpr int64_t PAGE = 4096;
// A piece with fewer than 1/ZERO_IN_RAM_SHARE of its pages in RAM is given back.
constexpr int64_t ZERO_IN_RAM_SHARE = 8;

// Pieces one residency probe covers: a 4 KiB vector on the stack.
constexpr int64_t PROBE_PIECES = 16;

// zero_big's whole pages, decided piece by piece: one probe a PROBE_PIECES window, and
// one release a run of pieces to give back (a run the OS refuses is written). False when
// the OS cannot tell which pages are in RAM (the caller writes them all).
bool zero_by_residency(BlockSet& set, char* first, char* last) {
  constexpr int64_t PIECE_PAGES = ObjectSet::ZERO_PIECE / PAGE;
  unsigned char vec[PIECE_PAGES * PROBE_PIECES];
  char* run = nullptr;  // the pieces to give back so far, from `run` to the current one
  auto release_run = [&](char* end) {
    if (run != nullptr && set.release_pages(run, end - run) != 0) {
      std::memset(run, 0, static_cast<size_t>(end - run));
    }
    run = nullptr;
  };
  for (char* window = first; window < last; window += PIECE_PAGES * PROBE_PIECES * PAGE) {
    const int64_t window_pages =
        std::min<int64_t>((last - window) / PAGE, PIECE_PAGES * PROBE_PIECES);
    if (set.resident_pages(window, window_pages * PAGE, vec) != PAGE) {
      release_run(window);
      return false;
    }
    for (int64_t at = 0; at < window_pages; at += PIECE_PAGES) {
      char* piece = window + at * PAGE;
      const int64_t pages = std::min<int64_t>(window_pages - at, PIECE_PAGES);
      int64_t in_ram = 0;
      for (int64_t i = 0; i < pages; ++i) in_ram += vec[at + i] & 1;
      if (in_ram * ZERO_IN_RAM_SHARE < pages) {
        if (run == nullptr) run = piece;
        continue;
      }
      release_run(piece);
      std::memset(piece, 0, static_cast<size_t>(pages * PAGE));
    }
  }
  release_run(last);
  return true;
}

}  // namespace

void ObjectSet::zero_big(void* ptr, int64_t bytes) {
  char* const start = static_cast<char*>(ptr);
  char* const end = start + bytes;
  char* const first = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(start) + PAGE - 1) &
                                              ~static_cast<uintptr_t>(PAGE - 1));
  char* const last =
      reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(end) & ~static_cast<uintptr_t>(PAGE - 1));
  BlockSet& set = ObjectMgr::shard_of(BlockSet::ptr2block(header_of(ptr))).block_set_;
  const bool zeroed = last > first && zero_by_residency(set, first, last);
  if (!zeroed) {
    std::memset(ptr, 0, static_cast<size_t>(bytes));
    return;
  }
  // The partial pages at both ends share bytes with the header and the tail canary.
  std::memset(start, 0, static_cast<size_t>(first - start));
  std::memset(last, 0, static_cast<size_t>(end - last));
}

void ObjectSet::free_slow(void* ptr, ABlock* block, Slab* slab, bool may_stash) {
  if (slab->sc_ == Slab::BIG) {
    free_span(block);
    return;
  }
  // Into this thread's stash when it can: a tail call, so the remote free below, what a
  // stash that cannot take it comes back to, stays a leaf that saves no register.
  if (may_stash) {
    free_foreign(ptr, block, slab);
    return;
  }
  // Another thread's slab (or a disowned one): a lock-free push its owner collects.
  push_remote(block, ptr, ptr, 1);
}

void ObjectSet::push_remote(ABlock* block, void* first, void* last, int64_t n) {
  Slab* slab = slab_of(block);
  // Acquire too: clearing REMOTE_NOTIFY hands the slab, as its disowner left it, on.
  uintptr_t head = slab->remote_free_.load(std::memory_order_relaxed);
  uintptr_t word;
  do {
    *static_cast<void**>(last) = reinterpret_cast<void*>(head & Slab::REMOTE_HEAD_MASK);
    const uintptr_t count = (head >> Slab::REMOTE_COUNT_SHIFT) + static_cast<uintptr_t>(n);
    word = reinterpret_cast<uintptr_t>(first) | count << Slab::REMOTE_COUNT_SHIFT;
  } while (!slab->remote_free_.compare_exchange_weak(head, word, std::memory_order_acq_rel,
                                                     std::memory_order_relaxed));
  ++object_set_tls::remote_pushes;
  if ((head & Slab::REMOTE_NOTIFY) != 0) made_findable(block, slab);
}

void RemoteFreeBatch::flush() {
  for (int i = 0; i < count_; ++i) {
    ObjectSet::push_remote(groups_[i].block, groups_[i].head, groups_[i].tail, groups_[i].n);
  }
  count_ = 0;
}

void ObjectSet::free_unbinned(void* ptr, int sc, ThreadHeap* bin) {
  run_slow_path_hook();
  ABlock* block = live_slab_block(ptr);
  Slab* slab = slab_of(block);
  if (owned_by_this_thread(slab->owner_thread_.load(std::memory_order_relaxed))) {
    // Straight back to its own slab: a burst of frees (a teardown) past the bin's room
    // neither walks nor drains it.
    ThreadHeap::free_local(block, slab, ptr, false);
    return;
  }
  // Another thread's object, or one of a slab let go: a full bin of its set gives half
  // back (one atomic per slab) and takes it; a bin that cannot (no stash for the class,
  // or the look taking it) leaves it a remote free. Another set's goes to free_foreign.
  if (bin != nullptr && slab->set_index_ == bin->set_index()) {
    if (!bin->stash_push_full(sc, ptr, block)) free_slow(ptr, block, slab, false);
    return;
  }
  free_foreign(ptr, block, slab, bin);
}

void ObjectSet::made_findable(ABlock* block, Slab* slab) {
  // This free made a disowned slab findable. Its former owner takes it straight back, so
  // a thread freeing its own objects keeps its slabs (and their cache lines) rather than
  // handing them to whichever heap refills next; any other thread's free makes it ready.
  ObjectSet* set = ObjectMgr::shard_of(block).set_;
  if (slab->owner_thread_.load(std::memory_order_relaxed) == disowned_by_this_thread()) {
    if (ThreadHeap* heap = set->existing_heap()) {
      heap->take_back(block);
      return;
    }
  }
  set->push_ready(block);
}

void ObjectSet::free_foreign(void* ptr, ABlock* block, Slab* slab, ThreadHeap* bin) {
  // A slab this thread let go when it filled, or another thread's: the object waits in
  // this thread's stash for its next malloc of the class, as tcmalloc's per-CPU lists
  // take any object. The slab stays as it is, its owner's counts untouched; the stash
  // gives the object back as a remote free when it overflows, is collected, or is taken
  // from an idle heap. A thread with no heap in the set (one that only frees) does not
  // get one for it.
  run_slow_path_hook();
  ThreadHeap* heap = bin != nullptr && slab->set_index_ == bin->set_index()
                         ? bin
                         : ObjectMgr::shard_of(block).set_->existing_heap();
  if (heap != nullptr && heap->stash_push(slab->sc_, ptr, block)) return;
  free_slow(ptr, block, slab, false);
}

namespace {

ACHUNK_TLS bool g_fast_free_missed;
void note_missed(void*) {
  g_fast_free_missed = true;
}

}  // namespace

bool ObjectSet::try_free_fast(void* ptr) {
  g_fast_free_missed = false;
  free_fast(
      ptr, []() -> ThreadHeap* { return nullptr; }, &note_missed);
  return !g_fast_free_missed;
}

int64_t ObjectSet::usable_size(void* ptr) {
  ABlock* block = BlockSet::ptr2block(header_of(ptr));
  const Slab* slab = slab_of(block);
  if (slab->sc_ == Slab::BIG) {
    return BlockSet::span_bytes(block) - slab->big_offset() - AOBJECT_TAIL_SIZE;
  }
  return class_slot_size(slab->sc_) - AOBJECT_META_SIZE;
}

bool ObjectSet::resize_in_place(void* ptr, int64_t new_size) {
  if (new_size <= 0) return false;
  const uint64_t h = load_header(ptr);
  if (new_size > usable_size(ptr)) {
    // A big object may take the free blocks right after its span (no copy).
    if (header_state(h) != ObjectState::BIG || new_size > OBJECT_MAX_SIZE) return false;
    ABlock* block = BlockSet::ptr2block(header_of(ptr));
    SubObjectMgr& shard = ObjectMgr::shard_of(block);
    std::lock_guard<SpinLock> guard(shard.lock_);
    if (!shard.block_set_.grow_block(block,
                                     big_span_bytes(slab_of(block)->big_offset(), new_size))) {
      return false;
    }
  }
  if (header_state(h) == ObjectState::BIG) store_big_size(ptr, new_size);
  // The origin stays; another size in the slot may be of another plain class.
  store_header(ptr, with_size(h, header_size_field(new_size)) & ~PLAIN_CLASS_BIT);
  write_tail(ptr, new_size);
  return true;
}

void* ObjectSet::grow_back(void* ptr, int64_t new_size, int64_t keep) {
  const uint64_t h = load_header(ptr);
  if (header_state(h) != ObjectState::BIG || new_size > OBJECT_MAX_SIZE) return nullptr;
  const int64_t old_size = object_size(ptr, h);
  ABlock* block = BlockSet::ptr2block(header_of(ptr));
  SubObjectMgr& shard = ObjectMgr::shard_of(block);
  void* moved = nullptr;
  ABlock* head = nullptr;
  {
    std::lock_guard<SpinLock> guard(shard.lock_);
    head = shard.block_set_.grow_block_back(block, big_span_bytes(BIG_OFFSET, new_size));
    if (head == nullptr) return nullptr;
    slab_of(head)->born_zero_ = false;
    slab_of(head)->big_placed_ = false;  // it moves to the new head's start
    // A valid object at the span's start before the lock goes: a usage scan may look.
    moved = slot_start_user(head);
    store_big_size(moved, old_size);
    store_header(moved, h);
  }
  std::memmove(moved, ptr, static_cast<size_t>(old_size));
  {
    std::lock_guard<SpinLock> guard(shard.lock_);
    shard.block_set_.shrink_block(head, big_span_bytes(BIG_OFFSET, keep));
  }
  store_big_size(moved, new_size);
  store_header(moved, make_header(ObjectState::BIG, header_label(h), header_size_field(new_size)));
  write_tail(moved, new_size);
  return moved;
}

void* ObjectSet::resize_dedicated(void* ptr, int64_t new_size, bool only_units_past) {
  const uint64_t h = load_header(ptr);
  if (header_state(h) != ObjectState::BIG || new_size <= 0 || new_size > OBJECT_MAX_SIZE) {
    return nullptr;
  }
  ABlock* block = BlockSet::ptr2block(header_of(ptr));
  if (!block->dedicated()) return nullptr;
  SubObjectMgr& shard = ObjectMgr::shard_of(block);
  // Held across the syscall, as a dedicated chunk's map is: a usage scan walks the set's
  // chunk list, which the chunk leaves while it may move.
  std::lock_guard<SpinLock> guard(shard.lock_);
  // The mapped size is read under the lock: the washer's trim_chunk shrinks the mapping
  // of an idle tail meanwhile (BlockSet::trim_idle_slack).
  if (only_units_past &&
      chunk_aligned_size(big_span_bytes(slab_of(block)->big_offset(), new_size)) >=
          AChunk::ptr2chunk(block)->aligned()) {
    return ptr;
  }
  ABlock* head = shard.block_set_.resize_dedicated(block, big_span_bytes(BIG_OFFSET, new_size));
  if (head == nullptr) return nullptr;
  void* moved = slot_start_user(head);
  slab_of(head)->born_zero_ = false;
  store_big_size(moved, new_size);
  store_header(moved, make_header(ObjectState::BIG, header_label(h), header_size_field(new_size)));
  write_tail(moved, new_size);
  return moved;
}

void* ObjectSet::trim_big(void* ptr) {
  const uint64_t h = load_header(ptr);
  if (header_state(h) != ObjectState::BIG) return ptr;
  ABlock* block = BlockSet::ptr2block(header_of(ptr));
  const int64_t bytes = big_span_bytes(slab_of(block)->big_offset(), object_size(ptr, h));
  if (block->dedicated()) {
    // Only whole 2 MiB units: the pages of the last one stay charged until the free. The
    // mapping keeps its tail until the block layer finds it idle (trim_idle_slack).
    void* moved = resize_dedicated(ptr, object_size(ptr, h), true);
    return moved != nullptr ? moved : ptr;
  }
  SubObjectMgr& shard = ObjectMgr::shard_of(block);
  std::lock_guard<SpinLock> guard(shard.lock_);
  shard.block_set_.shrink_block(block, bytes);
  return ptr;
}

bool ObjectSet::shrink_moves(void* ptr, int64_t new_size) {
  if (new_size <= 0 || new_size > SMALL_OBJECT_MAX) return false;
  ABlock* block = BlockSet::ptr2block(header_of(ptr));
  const Slab* slab = slab_of(block);
  int64_t held = 0;
  if (slab->sc_ == Slab::BIG) {
    // A dedicated chunk keeps its mapping: a packet buffer shrunk after each request
    // grows back into it without a syscall, and its tail goes back once idle.
    if (block->dedicated()) return false;
    held = align_up(big_span_bytes(slab->big_offset(), new_size), ABLOCK_SIZE);
  } else {
    held = class_slot_size(slab->sc_);
  }
  return holds_far_more(held, new_size);
}

int ObjectSet::scan_usage(LabelUsage* out, int cap, LabelUsage* total) {
  int n = 0;
  *total = LabelUsage{};
  auto account = [&](void* p, uint64_t h, int64_t hold, bool big) {
    const uint16_t label = header_label(h);
    int i = 0;
    while (i < n && out[i].label != label) ++i;
    if (i == n) {
      if (n == cap) return;  // more labels than room: the total still counts it
      out[n++] = LabelUsage{label, 0, 0, 0, 0};
    }
    for (LabelUsage* u : {&out[i], total}) {
      u->hold += hold;
      u->used += object_size(p, h);
      u->count += 1;
      u->blocks += big ? 1 : 0;
    }
  };
  mgr_.for_each_chunk_in_turn([&](BlockSet&, AChunk* chunk) {
    BlockSet::for_each_span_of(chunk, [&](ABlock* block, int64_t) {
      if (!block->in_use()) return;
      const Slab* slab = slab_of(block);
      if (slab->sc_ == Slab::HEAP || slab->sc_ == Slab::FOREIGN) return;
      if (slab->sc_ == Slab::BIG) {
        // Not BIG: an object being born (alloc_big) or freed; not a live one.
        void* p = slot_start_user(block);
        const uint64_t h = std::atomic_ref<uint64_t>(*header_of(p)).load(std::memory_order_acquire);
        if (header_state(h) == ObjectState::BIG) account(p, h, BlockSet::span_bytes(block), true);
        return;
      }
      const int64_t slot = class_slot_size(slab->sc_);
      char* user = slab_first_user(block, slab->sc_);
      const int carved = slab->carved_.load(std::memory_order_acquire);
      for (int i = 0; i < carved; ++i, user += slot) {
        const uint64_t h = load_header(user);
        if (header_state(h) == ObjectState::IN_USE) account(user, h, slot, false);
      }
    });
  });
  return n;
}

namespace {

// The pages of one piece of a chunk (at most RESIDENT_PROBE_BYTES) from one probe, for
// the spans inside it to count without probing again.
class PiecePages {
 public:
  PiecePages(ObjectSet::ResidentFn probe, void* ctx) : probe_(probe), ctx_(ctx) {}
  // Probes [base, base + len); false when the OS cannot tell.
  bool load(char* base, int64_t len) {
    base_ = base;
    end_ = base + len;
    page_ = probe_(ctx_, base, len, vec_);
    return page_ >= MIN_PAGE;
  }
  // The bytes in RAM of [addr, addr + len) clipped to the piece.
  int64_t bytes(const char* addr, int64_t len) const {
    const char* from = addr > base_ ? addr : base_;
    const char* to = addr + len < end_ ? addr + len : end_;
    int64_t pages = 0;
    for (int64_t i = (from - base_) / page_; base_ + i * page_ < to; ++i) pages += vec_[i] & 1;
    return pages * page_;
  }

 private:
  static constexpr int64_t MIN_PAGE = 4096;
  ObjectSet::ResidentFn probe_;
  void* ctx_;
  char* base_ = nullptr;
  const char* end_ = nullptr;
  int64_t page_ = 0;
  unsigned char vec_[ObjectSet::RESIDENT_PROBE_BYTES / MIN_PAGE];
};

void add_to(int64_t* sum, int64_t bytes) {
  *sum = bytes < 0 || *sum < 0 ? -1 : *sum + bytes;
}

// The bytes in RAM of [base, base + len) (len may be 0), probed a piece at a time, or -1;
// on_piece(pages) runs once each piece is loaded.
template <typename F>
int64_t probe_pieces(PiecePages& pages, char* base, int64_t len, F on_piece) {
  int64_t in_ram = 0;
  for (int64_t off = 0; off < len; off += ObjectSet::RESIDENT_PROBE_BYTES) {
    const int64_t piece = std::min(len - off, ObjectSet::RESIDENT_PROBE_BYTES);
    if (!pages.load(base + off, piece)) return -1;
    in_ram += pages.bytes(base + off, piece);
    on_piece(pages);
  }
  return in_ram;
}

}  // namespace

void ObjectSet::scan_spans(SpanUsage* u, int64_t* resident, ResidentFn probe, void* ctx) {
  *u = SpanUsage{};
  *resident = 0;
  u->spares_reclaimed = spares_reclaimed();
  u->warm_slabs = warm_bytes();
  PiecePages pages(probe, ctx);
  // A span in use, by kind; `in_ram` its resident bytes (-1: unknown).
  auto count_used = [&](ABlock* block, int64_t bytes, int64_t in_ram) {
    const Slab* slab = slab_of(block);
    if (slab->sc_ == Slab::HEAP || slab->sc_ == Slab::FOREIGN) {
      u->other += bytes;
    } else if (slab->sc_ == Slab::BIG) {
      u->big += bytes;
      add_to(&u->big_resident, in_ram);
    } else {
      const int64_t slot = class_slot_size(slab->sc_);
      char* user = slab_first_user(block, slab->sc_);
      const int carved = slab->carved_.load(std::memory_order_acquire);
      int64_t live = 0;
      for (int i = 0; i < carved; ++i, user += slot) {
        if (header_state(load_header(user)) == ObjectState::IN_USE) live += slot;
      }
      u->slabs += bytes;
      u->slab_slots += carved * slot;
      u->slab_live += live;
      u->empty_slabs += live == 0 ? bytes : 0;
      add_to(&u->slab_resident, in_ram);
    }
  };
  mgr_.for_each_chunk_in_turn([&](BlockSet&, AChunk* chunk) {
    char* base = reinterpret_cast<char*>(chunk);
    const int64_t mapped = chunk->aligned();
    ABlock* head = chunk_block(chunk, 0);
    if (head->dedicated()) {
      // One span, the whole chunk, probed a piece at a time.
      char* data = static_cast<char*>(block_data(head));
      const int64_t bytes = BlockSet::span_bytes(head);
      int64_t in_span = 0;
      const int64_t in_chunk = probe_pieces(
          pages, base, mapped, [&](const PiecePages& p) { in_span += p.bytes(data, bytes); });
      add_to(resident, in_chunk);
      if (head->in_use()) count_used(head, bytes, in_chunk < 0 ? -1 : in_span);
      return;
    }
    // The header and every block in one probe; what lies past them (a mapping kept
    // bigger) only counts for the chunk.
    const int64_t first = std::min(mapped, RESIDENT_PROBE_BYTES);
    const bool known = pages.load(base, first);
    BlockSet::for_each_span_of(chunk, [&](ABlock* block, int64_t bytes) {
      const int64_t in_ram = known ? pages.bytes(static_cast<char*>(block_data(block)), bytes) : -1;
      if (block->in_use()) {
        count_used(block, bytes, in_ram);
      } else {
        add_to(&u->free_resident, in_ram);
      }
    });
    int64_t in_chunk = known ? pages.bytes(base, first) : -1;
    add_to(&in_chunk, probe_pieces(pages, base + first, mapped - first, [](const PiecePages&) {}));
    add_to(resident, in_chunk);
  });
}

}  // namespace achunk
