#include "alloc/object/thread_heap.h"

#include <algorithm>
#include <mutex>

#include "alloc/object/object_set.h"

namespace achunk {

void ThreadHeap::collect(Slab* slab) {
  // Joining the two lists would walk one of them, a cache miss per object another core
  // freed: while local slots remain, the remote ones wait for the next refill.
  if (slab->local_free_ != nullptr) return;
  // A plain load first: most refills find no remote frees, and the exchange is a locked
  // instruction.
  if (slab->remote_free_.load(std::memory_order_relaxed) == 0) return;
  const uintptr_t word = slab->remote_free_.exchange(0, std::memory_order_acquire);
  if (word == 0) return;
  slab->used_.store(slab->used_.load(std::memory_order_relaxed) -
                        static_cast<int32_t>(word >> Slab::REMOTE_COUNT_SHIFT),
                    std::memory_order_relaxed);
  // The list becomes the local one as it is: its objects are touched only when handed out.
  slab->local_free_ = reinterpret_cast<void*>(word & Slab::REMOTE_HEAD_MASK);
}

void ThreadHeap::link(int sc, ABlock* block) {
  block->prev_ = nullptr;
  block->next_ = partial_[sc];
  if (partial_[sc] != nullptr) partial_[sc]->prev_ = block;
  partial_[sc] = block;
}

void ThreadHeap::unlink(int sc, ABlock* block) {
  if (block->prev_ != nullptr) {
    block->prev_->next_ = block->next_;
  } else {
    partial_[sc] = block->next_;
  }
  if (block->next_ != nullptr) block->next_->prev_ = block->prev_;
  block->prev_ = block->next_ = nullptr;
}

void ThreadHeap::detach(int sc, ABlock* block) {
  if (current_[sc].load(std::memory_order_relaxed) == block) {
    current_[sc].store(nullptr, std::memory_order_relaxed);
    unkeep(slab_of(block));
  } else if (slab_of(block)->in_full_) {
    unlink_full(sc, block);
  } else {
    unlink(sc, block);
  }
}

void ThreadHeap::push_full(int sc, ABlock* block) {
  slab_of(block)->in_full_ = true;
  block->prev_ = nullptr;
  block->next_ = full_[sc];
  if (full_[sc] != nullptr) full_[sc]->prev_ = block;
  full_[sc] = block;
  if (full_tail_[sc] == nullptr) full_tail_[sc] = block;
  if (++full_count_[sc] <= FULL_SLABS_KEPT) return;
  ABlock* oldest = full_tail_[sc];
  unlink_full(sc, oldest);
  if (!ObjectSet::disown(oldest)) link(sc, oldest);  // other threads' frees made room
}

void ThreadHeap::unlink_full(int sc, ABlock* block) {
  slab_of(block)->in_full_ = false;
  if (block->prev_ != nullptr) {
    block->prev_->next_ = block->next_;
  } else {
    full_[sc] = block->next_;
  }
  if (block->next_ != nullptr) {
    block->next_->prev_ = block->prev_;
  } else {
    full_tail_[sc] = block->prev_;
  }
  block->prev_ = block->next_ = nullptr;
  --full_count_[sc];
}

void ThreadHeap::slab_freed_slow(ABlock* block, Slab* slab, void* p, bool may_stash) {
  ThreadHeap* heap = nullptr;
  // The slab is this thread's, so this thread's heap of the slab's set is alive. A free
  // into the slab the class's last stashed object came from is one of a batch freed
  // together (a request's objects): the slab takes them as plain local frees.
  if (may_stash && slab->in_full_ && slab->used_.load(std::memory_order_relaxed) != 1) {
    heap = ObjectSet::owner_of(block)->existing_heap();
    if (heap != nullptr && !heap->stash_top_in(slab->sc_, block) &&
        heap->stash_push(slab->sc_, p, block)) {
      return;
    }
  }
  // A stash that could not take p may have given older objects back to this slab.
  const int32_t used = slab->used_.load(std::memory_order_relaxed) - 1;
  // A slab that moves (emptied, or no longer full) is freed into under the heap's lock,
  // with its move: another thread's look takes an idle heap's slabs whose objects are all
  // free (give_up_freed_slabs), and must not take one this free is about to move.
  if (used == 0 || slab->in_full_) {
    if (heap == nullptr) heap = ObjectSet::owner_of(block)->existing_heap();
    if (heap != nullptr) {
      heap->move_freed(block, slab, p, used);
      return;
    }
  }
  list_freed(slab, p, used);
}

void ThreadHeap::move_freed(ABlock* block, Slab* slab, void* p, int32_t used) {
  std::lock_guard<SpinLock> guard(lock_);
  list_freed(slab, p, used);
  const int sc = slab->sc_;
  if (used != 0) {
    unlink_full(sc, block);
    link(sc, block);
    return;
  }
  ++activity_;
  if (slab->in_spare_) return;
  // Parked even when current: only a spare can be taken by another thread when this one
  // goes idle, never a slab the fast path uses.
  detach(sc, block);
  keep_empty(sc, block);
}

ABlock* ThreadHeap::give_up_freed_slabs(ABlock* chain, int64_t* bytes) {
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    for (const bool full : {false, true}) {
      for (ABlock* block = full ? full_[sc] : partial_[sc]; block != nullptr;) {
        ABlock* next = block->next_;
        if (all_freed(slab_of(block))) {
          if (full) {
            unlink_full(sc, block);
          } else {
            unlink(sc, block);
          }
          chain = give_up(block, chain, bytes);
        }
        block = next;
      }
    }
  }
  return chain;
}

ABlock* ThreadHeap::give_up(ABlock* block, ABlock* chain, int64_t* bytes) {
  Slab* slab = slab_of(block);
  // No object is out, so no free can come: the slab is the caller's alone.
  collect(slab);
  slab->owner_thread_.store(nullptr, std::memory_order_relaxed);
  block->next_ = chain;
  *bytes += slab_bytes(slab->sc_);
  return block;
}

void ThreadHeap::push_spare(int sc, ABlock* block) {
  slab_of(block)->in_spare_ = true;
  block->prev_ = nullptr;
  block->next_ = spare_[sc];
  spare_[sc] = block;
  count_kept(slab_of(block), 1);
}

ABlock* ThreadHeap::pop_spare(int sc) {
  ABlock* block = spare_[sc];
  if (block == nullptr) return nullptr;
  spare_[sc] = block->next_;
  block->next_ = nullptr;
  slab_of(block)->in_spare_ = false;
  count_kept(slab_of(block), -1);
  return block;
}

ABlock* ThreadHeap::give_up_spares(ABlock* chain, int64_t* bytes) {
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    while (ABlock* block = pop_spare(sc)) {
      slab_of(block)->owner_thread_.store(nullptr, std::memory_order_relaxed);
      block->next_ = chain;
      chain = block;
      *bytes += slab_bytes(sc);
    }
  }
  return chain;
}

void ThreadHeap::keep_empty(int sc, ABlock* block) {
  // Over the budget the slab joins the set's free spans, where any thread can take it
  // and idle time washes it.
  if (within_budget(slab_of(block))) {
    push_spare(sc, block);
  } else {
    ObjectSet::free_span(block);
  }
}

void ThreadHeap::adopt_ready(int sc) {
  // A slab with live objects first (its room would otherwise wait), then an exited
  // thread's warm one.
  ABlock* block = set_->pop_ready(sc);
  if (block == nullptr) block = set_->pop_warm(sc);
  if (block != nullptr) {
    slab_of(block)->owner_thread_.store(this_thread_marker(), std::memory_order_relaxed);
    link(sc, block);
    ++slabs_visited_;
  }
}

void ThreadHeap::take_back(ABlock* block) {
  std::lock_guard<SpinLock> guard(lock_);
  Slab* slab = slab_of(block);
  slab->owner_thread_.store(this_thread_marker(), std::memory_order_relaxed);
  ++taken_back_;
  // Its frees are seen now, not at the class's next refill, which may never come (a
  // buffer that grew into the next class leaves its slab behind): an emptied slab goes
  // where any emptied slab goes.
  collect(slab);
  if (slab->used_.load(std::memory_order_relaxed) != 0) {
    link(slab->sc_, block);
  } else {
    keep_empty(slab->sc_, block);
  }
}

void* ThreadHeap::alloc_slow(int sc) {
  ObjectSet::run_slow_path_hook();  // before lock_: the hook may allocate
  std::lock_guard<SpinLock> guard(lock_);
  ++activity_;
  ++refills_;
  // Other threads' frees on the current slab first, then its uncarved pages; a slab with
  // neither is full: kept on full_ a while, then disowned (the first free into it makes
  // it findable again).
  if (ABlock* block = current_[sc].load(std::memory_order_relaxed)) {
    ++slabs_visited_;
    Slab* slab = slab_of(block);
    collect(slab);
    if (slab->local_free_ != nullptr) return take(sc, block);
    const int64_t carved = carved_bytes(slab);
    if (ObjectSet::carve(block)) {
      if (slab->in_current_) {
        // A kept slab's new pages count; past the budget it is kept no longer.
        kept_carved_ += carved_bytes(slab) - carved;
        if (kept_carved_ > SPARE_BYTES_MAX) unkeep(slab);
      }
      return take(sc, block);
    }
    current_[sc].store(nullptr, std::memory_order_relaxed);
    unkeep(slab);
    push_full(sc, block);
  }
  if (ABlock* block = pop_spare(sc)) return take(sc, block);
  // Other threads' frees into the kept full slabs raise no notice: look at the oldest
  // one at each refill, so they are found before it is disowned.
  if (ABlock* block = full_tail_[sc]) {
    ++slabs_visited_;
    Slab* slab = slab_of(block);
    if (slab->remote_free_.load(std::memory_order_relaxed) != 0) {
      unlink_full(sc, block);
      collect(slab);
      return take(sc, block);
    }
  }
  // The ready stack only when no partial slab is left: each slab adopted waits its turn
  // here, while others' frees may empty it, and on the stack settling can give it back.
  if (partial_[sc] == nullptr) adopt_ready(sc);
  // A partial slab has room (a slab is adopted with room on it, and only a current slab
  // loses slots), so this loop looks at one slab but for a race it cannot lose twice.
  while (ABlock* block = partial_[sc]) {
    ++slabs_visited_;
    unlink(sc, block);
    Slab* slab = slab_of(block);
    collect(slab);
    if (slab->local_free_ != nullptr || ObjectSet::carve(block)) return take(sc, block);
    if (!ObjectSet::disown(block)) {
      collect(slab);
      return take(sc, block);
    }
  }
  ABlock* block = set_->new_slab(sc, this_thread_marker());
  if (block == nullptr) return nullptr;
  ++slabs_visited_;
  return take(sc, block);
}

void* ThreadHeap::take(int sc, ABlock* block) {
  Slab* slab = slab_of(block);
  if (keep_emptied_current_ && !slab->in_current_ && within_budget(slab)) {
    slab->in_current_ = true;
    count_kept(slab, 1);
  }
  current_[sc].store(block, std::memory_order_release);
  return pop(sc);
}

ABlock* ThreadHeap::unhook_current() {
  ABlock* unhooked = nullptr;
  for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
    ABlock* block = current_[sc].load(std::memory_order_relaxed);
    if (block == nullptr || !slab_of(block)->in_current_) continue;
    current_[sc].store(nullptr, std::memory_order_relaxed);
    block->next_ = unhooked;
    unhooked = block;
  }
  return unhooked;
}

ABlock* ThreadHeap::take_emptied_current(ABlock* unhooked, bool barrier, ABlock* chain,
                                         int64_t* bytes) {
  // After the barrier a pop that read current_ before it has its flag up; one that reads
  // it after finds nothing. Either way no pop can touch an unhooked slab unseen. Without
  // the barrier every slab goes back.
  const bool popping = !barrier || popping_.load(std::memory_order_acquire);
  while (unhooked != nullptr) {
    ABlock* block = unhooked;
    unhooked = block->next_;
    block->next_ = nullptr;
    Slab* slab = slab_of(block);
    // Every object out freed, here or by other threads, and the free that emptied it has
    // finished (it stores used_ last). No object, so no free can come.
    if (!popping && all_freed(slab)) {
      unkeep(slab);
      chain = give_up(block, chain, bytes);
    } else {
      current_[slab->sc_].store(block, std::memory_order_release);
    }
  }
  return chain;
}

}  // namespace achunk
