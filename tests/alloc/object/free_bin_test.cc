// The free's bin hit (ObjectSet::free_fast with a bin): the class from the block tags, the
// object checked, then into the freeing thread's bin whoever allocated it; past the bin's
// room, the thread's own objects go to their slab and another's make the bin give half
// back.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "alloc/object/malloc_front.h"
#include "alloc/object/object_set.h"
#include "alloc/object/size_class.h"
#include "alloc/object/thread_heap.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

constexpr int64_t SIZE = 100;
const int SC = size_class_of(SIZE);

ABlock* block_of_object(void* p) {
  return BlockSet::ptr2block(header_of(p));
}
unsigned tag_of(void* p) {
  AChunk* chunk = AChunk::ptr2chunk(p);
  const int64_t at =
      (static_cast<char*>(p) - AOBJECT_HEADER_SIZE - static_cast<char*>(chunk->data())) /
      ABLOCK_SIZE;
  return load_block_tag(chunk, static_cast<uint64_t>(at));
}

// The calling thread's static front entry, its ThreadState taken first.
malloc_front::Entry& thread_state_entry() {
  ObjectSet::own_thread_state();
  return thread_state().entries[malloc_front::ENTRIES];
}

int g_fallbacks = 0;
void count_fallback(void*) {
  ++g_fallbacks;
}

class FreeBinTest : public ChunkMgrTest {
 protected:
  void SetUp() override { g_fallbacks = 0; }
  // The free of the drop-in and ob_free, with `bin` as the calling thread's bin.
  static void free_into(void* p, ThreadHeap* bin) {
    ObjectSet::free_fast(
        p, [bin] { return bin; }, &count_fallback);
  }
  DirectChunkSource source_{mgr_};
};

// Every block of a slab carries its class; the span given back carries none, and a chunk
// that comes back from the cache has its stale tags cleared when the block layer takes it.
TEST_F(FreeBinTest, ASlabsBlocksAreTaggedWithItsClassUntilItsSpanGoesBack) {
  {
    ObjectSet set(source_);
    const int big_sc = size_class_of(8000);  // a slab of several blocks
    void* p = set.alloc(8000, 0);
    ABlock* block = block_of_object(p);
    ASSERT_GT(block->nblocks_, 1);
    AChunk* chunk = AChunk::ptr2chunk(p);
    const int head = block_index(block);
    for (int i = 0; i < block->nblocks_; ++i) {
      EXPECT_EQ(chunk_block_tags(chunk)[head + i], slab_tag(big_sc)) << i;
    }
    EXPECT_EQ(tag_of(p), static_cast<unsigned>(big_sc + 1));
    const int nblocks = block->nblocks_;
    ObjectSet::free(p);
    set.flush_thread_heap();  // the emptied slab goes back to the block layer
    for (int i = 0; i < nblocks; ++i) EXPECT_EQ(chunk_block_tags(chunk)[head + i], 0) << i;
    // A big object's span carries none either.
    void* big = set.alloc(SMALL_OBJECT_MAX + 1, 0);
    EXPECT_EQ(tag_of(big), 0u);
    ObjectSet::free(big);
  }
  // The chunk went to the cache with its tags as the set left them; write one stale tag
  // and take the chunk again: the block layer clears it.
  ObjectSet set(source_);
  void* p = set.alloc(SIZE, 0);
  AChunk* chunk = AChunk::ptr2chunk(p);
  ASSERT_FALSE(chunk->fresh_);
  ObjectSet::free(p);
  set.flush_thread_heap();
  set.wash_stale_spans(0);
  chunk_block_tags(chunk)[BLOCKS_PER_CHUNK - 1] = 7;
  ObjectSet again(source_);
  void* q = again.alloc(SIZE, 0);
  ASSERT_EQ(AChunk::ptr2chunk(q), chunk);
  EXPECT_EQ(chunk_block_tags(chunk)[BLOCKS_PER_CHUNK - 1], 0);
  ObjectSet::free(q);
}

// Another thread's object goes into the freeing thread's bin, its slab untouched, and is
// the next object of its class that thread allocates.
TEST_F(FreeBinTest, AnotherThreadsObjectGoesIntoTheFreeingThreadsBin) {
  ObjectSet set(source_);
  void* theirs = nullptr;
  std::thread([&] { theirs = set.alloc(SIZE, 0); }).join();
  Slab* slab = slab_of(block_of_object(theirs));
  void* mine = set.alloc(SIZE, 0);  // may come from that slab, which the exit made ready
  const int32_t used = slab->used_.load();
  ThreadHeap* heap = set.heap_for_this_thread();
  const int before = heap->stash_count(SC);
  free_into(theirs, heap);
  EXPECT_EQ(g_fallbacks, 0);
  EXPECT_EQ(heap->stash_count(SC), before + 1);
  EXPECT_EQ(slab->used_.load(), used);  // still counted out of its slab
  EXPECT_EQ(header_state(load_header(theirs)), ObjectState::FREE);
  EXPECT_EQ(set.alloc(SIZE, 0), theirs);
  free_into(theirs, heap);
  free_into(mine, heap);
  set.flush_thread_heap();
  set.reclaim_idle_spares();
  set.settle_ready();
  set.wash_stale_spans(0);
  EXPECT_EQ(set.span_used(), 0);
}

// A double free is caught at the second free, not when the bin hands the object out; a
// pointer inside an object, or of a big object, is no bin's.
TEST_F(FreeBinTest, TheChecksComeBeforeTheBin) {
  ObjectSet set(source_);
  void* p = set.alloc(SIZE, 0);
  ThreadHeap* heap = set.heap_for_this_thread();
  free_into(p, heap);
  const int count = heap->stash_count(SC);
  free_into(p, heap);
  EXPECT_EQ(g_fallbacks, 1);
  EXPECT_EQ(heap->stash_count(SC), count);
  void* q = set.alloc(SIZE, 0);
  EXPECT_EQ(q, p);
  free_into(static_cast<char*>(q) + 16, heap);
  EXPECT_EQ(g_fallbacks, 2);
  void* big = set.alloc(SMALL_OBJECT_MAX + 1, 0);
  free_into(big, heap);
  EXPECT_EQ(g_fallbacks, 3);
  ObjectSet::free(big);
  free_into(q, heap);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

// A full bin takes no more of the thread's own objects: they go to their slab, and the bin
// keeps what it holds. Another thread's object makes it give its newest half back.
TEST_F(FreeBinTest, AFullBinSendsOwnObjectsToTheirSlabAndDrainsHalfForOthers) {
  ObjectSet set(source_);
  const int cap = ThreadHeap::stash_cap(SC);
  std::vector<void*> mine;
  for (int i = 0; i < cap + 4; ++i) mine.push_back(set.alloc(SIZE, 0));
  ThreadHeap* heap = set.heap_for_this_thread();
  for (void* p : mine) free_into(p, heap);
  EXPECT_EQ(heap->stash_count(SC), cap);
  // The last four went to their slab: its free list starts with them.
  Slab* slab = slab_of(block_of_object(mine.back()));
  EXPECT_EQ(slab->local_free_, mine.back());
  void* theirs = nullptr;
  std::thread([&] { theirs = set.alloc(SIZE, 0); }).join();
  free_into(theirs, heap);
  EXPECT_EQ(heap->stash_count(SC), cap - (cap - cap / 2) + 1);
  EXPECT_EQ(set.alloc(SIZE, 0), theirs);  // the newest first
  free_into(theirs, heap);
  EXPECT_EQ(g_fallbacks, 0);
  set.flush_thread_heap();
  set.reclaim_idle_spares();
  set.settle_ready();
  set.wash_stale_spans(0);
  EXPECT_EQ(set.span_used(), 0);
}

// The bin is the static front entry's heap, taken without a check: a set destroyed by the
// thread leaves no entry of that thread naming its heap.
TEST_F(FreeBinTest, ADestroyedSetLeavesNoEntryOfItsThreadNamingItsHeap) {
  malloc_front::Entry& e = thread_state_entry();
  {
    ObjectSet set(source_);
    void* p = set.alloc(SIZE, 0);
    e.heap = set.heap_for_this_thread();
    e.allocator_id = 7;
    ObjectSet::free(p);
  }
  EXPECT_EQ(e.heap, nullptr);
  EXPECT_EQ(e.allocator_id, 0u);
}

}  // namespace
}  // namespace achunk::testing
