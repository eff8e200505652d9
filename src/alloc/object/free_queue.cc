// ObjectSet's queued frees: the free of an object of a slab its thread disowned (a large
// live set's, likely cold) reads nothing of the object. It fetches the lines the checks
// will read, marks the header's top byte, and the thread's queue (FreeQueue::push) holds
// it while later frees run. The free that pushes it out, FreeQueue::LEN frees on, checks
// and frees it, its lines in the cache by then: the misses of random frees overlap
// instead of stalling one after the other.
#include "achunk/base/buf_writer.h"
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
  const uint64_t h = load_header(ptr);
  if (header_state(h) == ObjectState::QUEUED && tail_intact(ptr, header_size(h))) {
    store_header(ptr, make_header(ObjectState::FREE, header_label(h), header_size(h)));
    return true;
  }
  report_failed_check(ptr, h);
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
  // Only a slot's own user pointer is marked and waits: the byte before any other may be
  // an object's (and an aligned pointer's pad only the fallback frees).
  const int64_t distance = static_cast<char*>(ptr) - slab_first_user(block, sc);
  if (thread_state_owned() && class_slot_size(sc) <= FreeQueue::SLOT_MAX && distance >= 0 &&
      whole_slots(sc, static_cast<uint64_t>(distance)) &&
      free_checks_queued_.load(std::memory_order_relaxed)) {
    __builtin_prefetch(header_of(ptr), 1);
    prefetch_tail_bounds(ptr, sc);
    // Before the push: once queued, a look may check it.
    header_top_byte(ptr).store(QUEUED_MARK, std::memory_order_relaxed);
    void* old = nullptr;
    ABlock* old_block = nullptr;
    if (thread_state().free_queue.push(ptr, block, &old, &old_block)) {
      if (old != nullptr) check_queued(old, old_block);
      return;
    }
    header_top_byte(ptr).store(MAGIC_TOP, std::memory_order_relaxed);
  }
  if (!take_live(ptr)) return fallback(ptr);
  free_taken(ptr, block, slab);
}

void ObjectSet::check_queued(void* ptr, ABlock* block) {
  // The slab's owner may have changed while the free waited: this thread may have
  // adopted it again.
  if (take_queued(ptr)) free_taken(ptr, block, slab_of(block));
}

void ObjectSet::report_failed_check(void* ptr, uint64_t h) {
  // What free_checked reports, said to be found late: the stack of the report is a later
  // free's. Without the mark, an earlier check of the same free (queued twice) freed the
  // slot, which may be in use again, or an underflow overwrote the header.
  constexpr int TOP = 56;
  const char* const late = ", found by a later free's check";
  char what[96];
  if ((h >> TOP) != QUEUED_MARK) {
    const ObjectState s = header_state(h);
    if (s == ObjectState::IN_USE || s == ObjectState::FREE) {
      BufWriter(what, sizeof(what)).str("object was freed twice").str(late);
      return report_object(ErrorKind::DOUBLE_FREE, ptr, h, what);
    }
    BufWriter(what, sizeof(what)).str("object header overwritten").str(late);
    return report_error(ErrorKind::CORRUPTION, ptr, what);
  }
  // The header as the free found it; the object stays as it is.
  h = (h & ~(uint64_t{0xFF} << TOP)) | uint64_t{MAGIC_TOP} << TOP;
  header_top_byte(ptr).store(MAGIC_TOP, std::memory_order_relaxed);
  switch (header_state(h)) {
    case ObjectState::IN_USE:
      BufWriter(what, sizeof(what)).str("tail canary overwritten").str(late);
      return report_object(ErrorKind::CORRUPTION, ptr, h, what);
    case ObjectState::FREE:
      BufWriter(what, sizeof(what)).str("object is already free").str(late);
      return report_object(ErrorKind::DOUBLE_FREE, ptr, h, what);
    default:
      BufWriter(what, sizeof(what)).str("no object header (bad magic)").str(late);
      return report_error(ErrorKind::INVALID_FREE, ptr, what);
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

}  // namespace achunk
