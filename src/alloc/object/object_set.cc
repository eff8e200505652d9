#include "alloc/object/object_set.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <new>

#include "achunk/base/tls.h"

namespace achunk {

namespace object_set_tls {
ACHUNK_TLS uintptr_t thread_marker = 1;
ACHUNK_TLS int64_t shared_used = 0;
ACHUNK_TLS int64_t remote_pushes = 0;
std::atomic<uint32_t> fork_generation{0};

const void* init_thread_marker() {
  // User-space addresses fit in 48 bits; the generation wraps after 65536 nested forks.
  const uint64_t gen = fork_generation.load(std::memory_order_relaxed) & 0xFFFF;
  thread_marker = reinterpret_cast<uintptr_t>(&thread_marker) | (gen << 48);
  return reinterpret_cast<const void*>(thread_marker);
}
std::atomic<uint32_t> generation[MAX_SETS];
}  // namespace object_set_tls

namespace {

std::atomic<ObjectSet*> g_sets[ObjectSet::MAX_SETS];  // live sets by index
ACHUNK_STATIC_SPIN_LOCK(g_sets_lock, ForkRole::HELD);

auto& g_generation = object_set_tls::generation;

pthread_key_t g_exit_key;
pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;  // libc's: no libstdc++ in the drop-in

// Thread exit: hand every heap of the thread back to its set, then its state to the
// pool. pthread keys (not a thread_local destructor) because registering those may call
// malloc. A later destructor that allocates takes a state again and re-arms the key.
void on_thread_exit(void*) {
  if (!thread_state_owned()) return;
  ThreadState& state = thread_state();
  // The sets whose heaps this thread still has, by index (nullptr: none, or gone).
  ObjectSet* sets[ObjectSet::MAX_SETS];
  for (int i = 0; i < ObjectSet::MAX_SETS; ++i) {
    sets[i] = nullptr;
    ThreadHeap* heap = state.heaps[i];
    if (heap == nullptr ||
        state.heap_generation[i] != g_generation[i].load(std::memory_order_acquire)) {
      state.heaps[i] = nullptr;
      continue;
    }
    sets[i] = g_sets[i].load(std::memory_order_acquire);
    // First out of the lists: a look that closed the heap's stash and backed off would
    // leave the calls below empty-handed, and what they missed would go with the heap.
    if (sets[i] != nullptr) sets[i]->unlink_heap(heap);
  }
  for (int i = 0; i < ObjectSet::MAX_SETS; ++i) {
    ThreadHeap* heap = state.heaps[i];
    if (heap == nullptr) continue;
    // While the heap is still the thread's: the stashed objects go back into its slabs.
    heap->unstash_all();
    state.heaps[i] = nullptr;
    if (sets[i] != nullptr) sets[i]->abandon(heap, true);
  }
  tl_thread_state = const_cast<ThreadState*>(&thread_state_detail::EMPTY);
  release_thread_state(&state);
}

void arm_thread_exit() {
  pthread_once(&g_exit_key_once, [] { pthread_key_create(&g_exit_key, &on_thread_exit); });
  // Any non-null value makes the destructor run at exit.
  if (pthread_getspecific(g_exit_key) == nullptr) pthread_setspecific(g_exit_key, &g_exit_key);
}

}  // namespace

ObjectSet::ObjectSet(ChunkSource& source) : source_(source), mgr_(source, this) {
  std::lock_guard<SpinLock> guard(g_sets_lock);
  // Below Slab::NO_SET: a slab records its set's index in a byte.
  for (int i = 0; i < MAX_SETS && i < Slab::NO_SET; ++i) {
    if (g_sets[i].load(std::memory_order_relaxed) == nullptr) {
      index_ = i;
      g_sets[i].store(this, std::memory_order_release);
      return;
    }
  }
  // Out of indices (MAX_SETS sets alive): the set still works, but without thread heaps,
  // so every object, small ones too, takes a span of its own (alloc).
}

ObjectSet::~ObjectSet() {
  // The destroying thread's front entries stop naming its heap here: the drop-in free
  // takes the static entry's heap as its bin without a check. (Another thread's entries
  // are the caller's to retire: no thread may use a set while it is destroyed.)
  if (ThreadHeap* mine = existing_heap()) {
    for (malloc_front::Entry& e : thread_state().entries) {
      if (e.heap == mine) {
        e.allocator_id = 0;
        e.heap = nullptr;
      }
    }
  }
  if (index_ >= 0) {
    std::lock_guard<SpinLock> guard(g_sets_lock);
    g_generation[index_].fetch_add(1, std::memory_order_acq_rel);
    g_sets[index_].store(nullptr, std::memory_order_release);
  }
  // The shards' BlockSets return every chunk, heaps and live objects included.
}

ThreadState* ObjectSet::own_thread_state() {
  if (thread_state_owned()) return &thread_state();
  ThreadState* state = acquire_thread_state();
  if (state == nullptr) return nullptr;
  tl_thread_state = state;
  arm_thread_exit();
  return state;
}

ThreadHeap* ObjectSet::create_heap() {
  if (index_ < 0) return nullptr;
  ThreadState* state = own_thread_state();
  if (state == nullptr) return nullptr;
  const uint32_t gen = g_generation[index_].load(std::memory_order_relaxed);
  ABlock* block = take_span(sizeof(ThreadHeap), [&](ABlock* block) {
    new (block->owner_area_) Slab();
    slab_of(block)->sc_ = Slab::HEAP;  // not a slab: usage scans skip it
  });
  if (block == nullptr) return nullptr;
  // Built after the shard lock: its pages may be fresh (see new_slab).
  ThreadHeap* heap =
      new (block_data(block)) ThreadHeap(this, static_cast<uint8_t>(index_), &mgr_.shard(0),
                                         sizeof(SubObjectMgr) * ObjectMgr::MAX_SHARDS);
  heap->keep_emptied_current_ = barrier_available();
  {
    std::lock_guard<SpinLock> guard(heaps_lock_);
    heap->next_heap_ = heaps_;
    if (heaps_ != nullptr) heaps_->prev_heap_ = heap;
    heaps_ = heap;
    heap_count_.fetch_add(1, std::memory_order_relaxed);
  }
  state->heaps[index_] = heap;
  state->heap_generation[index_] = gen;
  return heap;
}

void ObjectSet::flush_thread_heap() {
  ThreadHeap* heap = existing_heap();
  if (heap != nullptr) unlink_heap(heap);  // first, as at thread exit
  if (heap != nullptr) {
    heap->unstash_all();
    ThreadState& state = thread_state();
    state.heaps[index_] = nullptr;
    // Front entries may name the heap: the thread forgets them all (a rare call), so a
    // hit needs no check that its heap is still the thread's, and the drop-in free,
    // which takes the static entry's heap as its bin unchecked, finds none.
    for (malloc_front::Entry& e : state.entries) {
      e.allocator_id = 0;
      e.heap = nullptr;
    }
    abandon(heap, false);
    return;
  }
  settle_ready();
}

ABlock* ObjectSet::alloc_span(int64_t bytes) {
  return take_span(bytes, [](ABlock* block) {
    new (block->owner_area_) Slab();
    slab_of(block)->sc_ = Slab::FOREIGN;  // usage scans and ob_free leave it alone
  });
}

void ObjectSet::free_span(ABlock* block) {
  // Whatever the span was: only a slab's blocks carry tags, and a dedicated chunk's head
  // counts no blocks.
  if (!block->dedicated()) write_block_tags(block, block->nblocks_, 0);
  SubObjectMgr& shard = ObjectMgr::shard_of(block);
  std::lock_guard<SpinLock> guard(shard.lock_);
  shard.block_set_.free_block(block);
}

int64_t ObjectSet::wash_free_spans() {
  return mgr_.sum([](BlockSet& bs) { return bs.wash_free_spans(); });
}

bool ObjectSet::barrier_available() {
  int8_t known = barrier_available_.load(std::memory_order_relaxed);
  if (known < 0) {
    known = source_.process_barrier_available() ? 1 : 0;
    barrier_available_.store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

int64_t ObjectSet::reclaim_idle_spares() {
  ABlock* chain = nullptr;
  void* stolen = nullptr;  // stashed objects of idle heaps
  int64_t bytes = 0;
  {
    std::lock_guard<SpinLock> guard(heaps_lock_);
    // Idle heaps with current slabs or stashed objects, held locked until one barrier
    // covers them all.
    ThreadHeap* held[HEAPS_PER_BARRIER];
    ABlock* unhooked[HEAPS_PER_BARRIER];
    int n = 0;
    auto take_held = [&] {
      const bool barrier = source_.process_barrier();
      for (int i = 0; i < n; ++i) {
        stolen = held[i]->take_stash(barrier, stolen);
        chain = held[i]->take_emptied_current(unhooked[i], barrier, chain, &bytes);
        held[i]->lock_.unlock();
      }
      n = 0;
    };
    for (ThreadHeap* heap = heaps_; heap != nullptr; heap = heap->next_heap_) {
      // A heap whose lock is held is in a slow path: busy, not idle.
      if (!heap->lock_.try_lock()) continue;
      const uint64_t stash_ops = heap->stash_ops_.load(std::memory_order_relaxed);
      const bool idle =
          heap->activity_ == heap->seen_activity_ && stash_ops == heap->seen_stash_ops_;
      heap->seen_activity_ = heap->activity_;
      heap->seen_stash_ops_ = stash_ops;
      if (idle) {
        chain = heap->give_up_spares(chain, &bytes);
        chain = heap->give_up_freed_slabs(chain, &bytes);
        ABlock* current = heap->unhook_current();
        if (heap->close_stash() || current != nullptr) {
          held[n] = heap;
          unhooked[n++] = current;
          if (n == HEAPS_PER_BARRIER) take_held();
          continue;
        }
      }
      heap->lock_.unlock();
    }
    if (n > 0) take_held();
  }
  int64_t shared_bytes = 0;
  chain = reclaim_idle_shared(chain, &shared_bytes);
  if (shared_bytes > 0) shared_reclaimed_.fetch_add(shared_bytes, std::memory_order_relaxed);
  bytes += shared_bytes;
  // After the locks: giving spans back takes shard locks, which a heap's owner takes
  // under its own lock.
  while (chain != nullptr) {
    ABlock* next = chain->next_;
    chain->next_ = nullptr;
    free_span(chain);
    chain = next;
  }
  if (bytes > 0) spares_reclaimed_.fetch_add(bytes, std::memory_order_relaxed);
  if (const int64_t n = ThreadHeap::release_stolen(stolen); n > 0) {
    stash_reclaimed_.fetch_add(n, std::memory_order_relaxed);
  }
  settle_ready();
  return bytes;
}

int64_t ObjectSet::wash_stale_spans(int64_t min_free_us) {
  reclaim_idle_spares();
  const bool busy = warm_activity_.exchange(0, std::memory_order_relaxed) != 0;
  if (min_free_us == 0 || !busy) release_warm();
  return mgr_.wash_stale_spans(min_free_us);
}

int64_t ObjectSet::heap_bytes() const {
  // take_span's rounding: whole blocks.
  constexpr int64_t span =
      (int64_t{sizeof(ThreadHeap)} + ABLOCK_SIZE - 1) / ABLOCK_SIZE * ABLOCK_SIZE;
  return heap_count_.load(std::memory_order_relaxed) * span;
}

void ObjectSet::unlink_heap(ThreadHeap* heap) {
  // A look holds heaps_lock_ from the heaps it closes to the end of its takes, so once
  // this has it no look is under way on the heap, and none comes again.
  std::lock_guard<SpinLock> guard(heaps_lock_);
  if (heap->prev_heap_ != nullptr) {
    heap->prev_heap_->next_heap_ = heap->next_heap_;
  } else {
    heaps_ = heap->next_heap_;
  }
  if (heap->next_heap_ != nullptr) heap->next_heap_->prev_heap_ = heap->prev_heap_;
  heap->prev_heap_ = heap->next_heap_ = nullptr;
}

void ObjectSet::abandon(ThreadHeap* heap, bool keep_warm) {
  // Before this heap's slabs join the ready stacks: settling them at once would tag those
  // with room again.
  settle_ready();
  // The heap owns its current slab, spare, partial slabs and up to FULL_SLABS_KEPT full
  // ones per class, so this is O(classes + partial slabs), each partial slab paid for by
  // the refill that adopted it or the free that made room on it.
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    if (ABlock* block = heap->current_[sc].load(std::memory_order_relaxed)) {
      slab_of(block)->in_current_ = false;
      settle(block, true, keep_warm);
    }
    while (ABlock* block = heap->pop_spare(sc)) settle(block, false, keep_warm);
    for (ABlock* list : {heap->partial_[sc], heap->full_[sc]}) {
      for (ABlock* block = list; block != nullptr;) {
        ABlock* next = block->next_;
        block->prev_ = block->next_ = nullptr;
        slab_of(block)->in_full_ = false;
        settle(block, true, keep_warm);
        block = next;
      }
    }
  }
  free_span(BlockSet::ptr2block(heap));
  heap_count_.fetch_sub(1, std::memory_order_relaxed);
}

bool ObjectSet::disown(ABlock* block, const void* owner) {
  Slab* slab = slab_of(block);
  // Before the tag: once tagged, a free may hand the slab to another heap at once.
  slab->owner_thread_.store(
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(owner) | Slab::DISOWNED),
      std::memory_order_relaxed);
  uintptr_t expected = 0;
  if (slab->remote_free_.compare_exchange_strong(
          expected, Slab::REMOTE_NOTIFY, std::memory_order_release, std::memory_order_relaxed)) {
    return true;
  }
  slab->owner_thread_.store(owner, std::memory_order_relaxed);
  return false;
}

void ObjectSet::settle(ABlock* block, bool ready_if_room, bool keep_warm) {
  Slab* slab = slab_of(block);
  slab->owner_thread_.store(nullptr, std::memory_order_relaxed);
  slabs_settled_.fetch_add(1, std::memory_order_relaxed);
  ThreadHeap::collect(slab);
  // Frees still pending (the slab kept local slots) stay listed under the tag, and count
  // as frees: settling never walks a list.
  uintptr_t word = slab->remote_free_.load(std::memory_order_acquire);
  while (true) {
    const int32_t live = slab->used_.load(std::memory_order_relaxed) -
                         static_cast<int32_t>(word >> Slab::REMOTE_COUNT_SHIFT);
    if (live == 0) {
      if (keep_warm && this->keep_warm(block)) return;
      free_span(block);
      slabs_settled_empty_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // Useful to a refill now, not only after the next free into it.
    if (ready_if_room && live < slab->capacity_) {
      push_ready(block);
      return;
    }
    if (slab->remote_free_.compare_exchange_weak(word, word | Slab::REMOTE_NOTIFY,
                                                 std::memory_order_release,
                                                 std::memory_order_acquire)) {
      return;
    }
  }
}

void ObjectSet::push_ready(ABlock* block) {
  std::atomic<ABlock*>& stack = ready_[slab_of(block)->sc_].head;
  ABlock* head = stack.load(std::memory_order_relaxed);
  do {
    block->next_ = head;
  } while (!stack.compare_exchange_weak(head, block, std::memory_order_release,
                                        std::memory_order_relaxed));
}

ABlock* ObjectSet::pop_ready(int sc) {
  std::atomic<ABlock*>& stack = ready_[sc].head;
  if (stack.load(std::memory_order_relaxed) == nullptr) return nullptr;
  std::lock_guard<SpinLock> guard(ready_[sc].lock);
  ABlock* head = stack.load(std::memory_order_acquire);
  // Only pushes race with this: a failed CAS reloads a head they put on top.
  while (head != nullptr &&
         !stack.compare_exchange_weak(head, head->next_, std::memory_order_acquire,
                                      std::memory_order_acquire)) {
  }
  if (head != nullptr) head->next_ = nullptr;
  return head;
}

bool ObjectSet::keep_warm(ABlock* block) {
  const Slab* slab = slab_of(block);
  const int64_t bytes = ThreadHeap::carved_bytes(slab);
  if (warm_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes > WARM_BYTES_MAX) {
    warm_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  ReadyStack& stack = ready_[slab->sc_];
  {
    std::lock_guard<SpinLock> guard(stack.lock);
    block->next_ = stack.warm.load(std::memory_order_relaxed);
    stack.warm.store(block, std::memory_order_release);
  }
  warm_kept_.fetch_add(1, std::memory_order_relaxed);
  warm_activity_.fetch_add(1, std::memory_order_relaxed);
  warm_touched_us_.store(source_.now_us(), std::memory_order_relaxed);
  return true;
}

ABlock* ObjectSet::pop_warm(int sc) {
  ReadyStack& stack = ready_[sc];
  if (stack.warm.load(std::memory_order_relaxed) == nullptr) return nullptr;
  ABlock* block;
  {
    std::lock_guard<SpinLock> guard(stack.lock);
    block = stack.warm.load(std::memory_order_relaxed);
    if (block == nullptr) return nullptr;
    stack.warm.store(block->next_, std::memory_order_relaxed);
  }
  block->next_ = nullptr;
  warm_bytes_.fetch_sub(ThreadHeap::carved_bytes(slab_of(block)), std::memory_order_relaxed);
  warm_adopted_.fetch_add(1, std::memory_order_relaxed);
  warm_activity_.fetch_add(1, std::memory_order_relaxed);
  warm_touched_us_.store(source_.now_us(), std::memory_order_relaxed);
  return block;
}

void ObjectSet::release_idle_warm() {
  if (warm_bytes_.load(std::memory_order_relaxed) == 0) return;
  const int64_t idle_us = source_.span_idle_us();
  if (idle_us < 0 ||
      source_.now_us() - warm_touched_us_.load(std::memory_order_relaxed) < idle_us) {
    return;
  }
  release_warm();
}

int64_t ObjectSet::release_warm() {
  int64_t bytes = 0;
  for (ReadyStack& stack : ready_) {
    for (ABlock* block = stack.take_all(stack.warm); block != nullptr;) {
      ABlock* next = block->next_;
      block->next_ = nullptr;
      const int64_t carved = ThreadHeap::carved_bytes(slab_of(block));
      warm_bytes_.fetch_sub(carved, std::memory_order_relaxed);
      bytes += carved;
      free_span(block);
      block = next;
    }
  }
  return bytes;
}

void ObjectSet::settle_ready() {
  for (ReadyStack& ready : ready_) {
    for (ABlock* block = ready.take_all(ready.head); block != nullptr;) {
      ABlock* next = block->next_;  // before settle: once disowned it may be pushed again
      block->next_ = nullptr;
      settle(block);
      block = next;
    }
  }
}

// size_class.h sizes slabs in whole blocks without depending on the block layer.
static_assert(SLAB_UNIT == ABLOCK_SIZE);

ABlock* ObjectSet::new_slab(int sc, const void* owner) {
  release_idle_warm();  // before the span is taken: the warm slabs' spans may serve it
  const int64_t bytes = slab_bytes(sc);
  ABlock* block = take_span(bytes, [&](ABlock* block) {
    Slab* slab = new (block->owner_area_) Slab();
    slab->sc_ = static_cast<uint16_t>(sc);
    slab->set_index_ = index_ < 0 ? Slab::NO_SET : static_cast<uint8_t>(index_);
    slab->capacity_ = static_cast<uint16_t>((bytes - slab_lead(sc)) / class_slot_size(sc));
    write_block_tags(block, block->nblocks_, slab_tag(sc));
  });
  if (block == nullptr) return nullptr;
  // After the shard lock, as every later carve is: the first page may be fresh, and its
  // fault would hold every thread of the shard. Scans read only carved slots.
  carve(block);
  slab_of(block)->owner_thread_.store(owner, std::memory_order_release);
  return block;
}

bool ObjectSet::carve(ABlock* block) {
  Slab* slab = slab_of(block);
  const int from = slab->carved_.load(std::memory_order_relaxed);
  if (from >= slab->capacity_) return false;
  const int64_t slot = class_slot_size(slab->sc_);
  // Slots start slab_lead bytes into the span, so user pointers (after the 8-byte header)
  // are 16-byte aligned, or 64 in an aligned class. Up to the end of the page the first
  // new slot starts in (at least one slot), so each carve touches about one more page.
  char* base = static_cast<char*>(block_data(block)) + slab_lead(slab->sc_);
  const uintptr_t first = reinterpret_cast<uintptr_t>(base) + from * slot;
  const uintptr_t page_end = (first | (CARVE_BYTES - 1)) + 1;
  int to = from + 1 + static_cast<int>((page_end - first - 1) / slot);
  if (to > slab->capacity_) to = slab->capacity_;
  void* head = slab->local_free_;
  for (int i = to - 1; i >= from; --i) {
    char* user = base + i * slot + AOBJECT_HEADER_SIZE;
    store_header(user, make_header(ObjectState::FREE, 0, 0));
    *reinterpret_cast<void**>(user) = head;
    head = user;
  }
  slab->local_free_ = head;
  // After the headers: a usage scan reads only carved slots, and never garbage.
  slab->carved_.store(static_cast<uint16_t>(to), std::memory_order_release);
  return true;
}

void ObjectSet::fire_slow_path_hook() {
  if (!slow_path_hook_armed_.load(std::memory_order_acquire)) return;
  bool (*hook)() = slow_path_hook_.load(std::memory_order_relaxed);
  if (hook == nullptr || hook()) slow_path_hook_armed_.store(false, std::memory_order_relaxed);
}

// Cold: with the child's other fork code, so a forked child faults in few text pages.
__attribute__((cold)) void ObjectSet::on_fork_child() {
  object_set_tls::fork_generation.fetch_add(1, std::memory_order_relaxed);
  // Only this thread runs in the child: the list cannot change.
  for (auto& slot : g_sets) {
    if (ObjectSet* set = slot.load(std::memory_order_acquire)) set->mgr_.on_fork_child();
  }
}

void ObjectSet::visit_all_fork_locks(ForkLockVisitor& v) {
  v.visit(g_sets_lock, "object_set.registry");
  for (auto& slot : g_sets) {
    if (ObjectSet* set = slot.load(std::memory_order_acquire)) {
      v.visit(set->heaps_lock_, "object_set.heaps");
      // In nesting order: shared_alloc takes a ready stack's lock and a shard's under its own.
      for (SharedSlab& shared : set->shared_) v.visit(shared.lock, "object_set.shared");
      for (ReadyStack& ready : set->ready_) v.visit(ready.lock, "object_set.ready");
      set->mgr_.visit_fork_locks(v);
    }
  }
}

int64_t ObjectSet::hold() {
  return mgr_.sum([](BlockSet& bs) { return bs.hold(); });
}

int64_t ObjectSet::span_used() {
  return mgr_.sum([](BlockSet& bs) { return bs.used(); });
}

int64_t ObjectSet::slack_chunks() {
  return mgr_.sum([](BlockSet& bs) { return bs.slack_chunks(); });
}

int64_t ObjectSet::free_span_bytes(int64_t* washed) {
  *washed = 0;
  return mgr_.sum([&](BlockSet& bs) { return bs.free_span_bytes(washed); });
}

}  // namespace achunk
