// ObjectSet's queued frees: the free of an object that is likely cold (another thread's
// slab, or one of this thread's past its current slab) reads nothing of the object. It
// fetches the lines the checks will read, and the thread's queue (ThreadHeap::queue_push)
// holds it while later frees run. The free that pushes it out, QUEUE_LEN frees on,
// checks and frees it, its lines in the cache by then: the misses of random frees
// overlap instead of stalling one after the other.
#include "alloc/object/object_check.h"
#include "alloc/object/object_set.h"

namespace achunk {

namespace {

ACHUNK_TLS bool g_fast_free_missed;
void note_missed(void*) {
  g_fast_free_missed = true;
}

}  // namespace

bool ObjectSet::try_free_fast(void* ptr) {
  g_fast_free_missed = false;
  free_fast(ptr, &note_missed);
  return !g_fast_free_missed;
}

inline bool ObjectSet::take_queued(void* ptr) {
  if (take_live(ptr)) return true;
  report_failed_check(ptr);
  return false;
}

inline void ObjectSet::free_taken(void* ptr, ABlock* block, Slab* slab) {
  if (owned_by_this_thread(slab->owner_thread_.load(std::memory_order_relaxed))) {
    ThreadHeap::free_local(block, slab, ptr);
  } else {
    free_foreign(ptr, block, slab);
  }
}

void ObjectSet::free_queued(void* ptr, ABlock* block, Slab* slab, FreeFallback fallback) {
  const int sc = slab->sc_;
  // Only a slot's own user pointer waits: any other fails its check or is an aligned
  // object's, which only the fallback frees.
  const int64_t distance = static_cast<char*>(ptr) - slab_first_user(block, sc);
  FreeQueue::Pushed pushed = FreeQueue::Pushed::CLOSED;
  if (thread_state_owned() && distance >= 0 && whole_slots(sc, static_cast<uint64_t>(distance)) &&
      free_checks_queued_.load(std::memory_order_relaxed)) {
    __builtin_prefetch(header_of(ptr), 1);
    prefetch_tail_bounds(ptr, sc);
    void* old = nullptr;
    ABlock* old_block = nullptr;
    pushed = thread_state().free_queue.push(ptr, block, &old, &old_block);
    if (pushed == FreeQueue::Pushed::YES) {
      if (old != nullptr) check_queued(old, old_block);
      return;
    }
  }
  if (pushed == FreeQueue::Pushed::TWICE) {
    return report_object(ErrorKind::DOUBLE_FREE, ptr, load_header(ptr), "object is already free");
  }
  if (!take_live(ptr)) return fallback(ptr);
  free_taken(ptr, block, slab);
}

void ObjectSet::check_queued(void* ptr, ABlock* block) {
  // The slab's owner may have changed while the free waited: this thread may have
  // adopted it again.
  if (take_queued(ptr)) free_taken(ptr, block, slab_of(block));
}

void ObjectSet::report_failed_check(void* ptr) {
  // What free_checked reports for a slot's pointer, said to be found late: the stack of
  // the report is a later free's.
  const uint64_t h = load_header(ptr);
  switch (header_state(h)) {
    case ObjectState::IN_USE:
      return report_object(ErrorKind::CORRUPTION, ptr, h,
                           "tail canary overwritten, found by a later free's check");
    case ObjectState::FREE:
      return report_object(ErrorKind::DOUBLE_FREE, ptr, h,
                           "object is already free, found by a later free's check");
    default:
      return report_error(ErrorKind::INVALID_FREE, ptr,
                          "no object header (bad magic), found by a later free's check");
  }
}

void* ObjectSet::take_queue(FreeQueue& queue, bool barrier, void* chain) {
  void* taken[FreeQueue::LEN];
  ABlock* blocks[FreeQueue::LEN];
  const int n = queue.take(barrier, taken, blocks);
  if (n > 0) queue_reclaimed_.fetch_add(n, std::memory_order_relaxed);
  // Chained as stashed objects are (release_stolen frees them); one that fails its
  // checks is reported and left.
  for (int i = 0; i < n; ++i) {
    if (!take_queued(taken[i])) continue;
    *static_cast<void**>(taken[i]) = chain;
    chain = taken[i];
  }
  return chain;
}

void ObjectSet::check_queued_frees() {
  if (!thread_state_owned()) return;
  void* taken[FreeQueue::LEN];
  ABlock* blocks[FreeQueue::LEN];
  const int n = thread_state().free_queue.take_all(taken, blocks);
  for (int i = 0; i < n; ++i) check_queued(taken[i], blocks[i]);
}

bool ObjectSet::queued_by_this_thread(void* ptr) {
  return thread_state_owned() && thread_state().free_queue.holds(ptr);
}

}  // namespace achunk
