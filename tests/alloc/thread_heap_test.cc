#include "alloc/thread_heap.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "achunk/chunk_mgr_fixture.h"
#include "alloc/size_class.h"

namespace achunk::testing {
namespace {

constexpr int64_t SLAB = 16 * 1024;  // the slab of every class up to 1 KiB

class ThreadHeapTest : public ChunkMgrTest {
 protected:
  // `slabs` full slabs of 100-byte objects (127 to a slab), in allocation order.
  std::vector<std::vector<void*>> fill_slabs(ObjectSet& set, int slabs) {
    std::vector<std::vector<void*>> out(slabs);
    for (auto& slab : out) {
      for (int i = 0; i < PER_SLAB; ++i) slab.push_back(set.alloc(100, 0));
    }
    return out;
  }
  static constexpr int PER_SLAB = 127;

  DirectChunkSource source_{mgr_};
};

TEST_F(ThreadHeapTest, ARunOfEmptiedSlabsGivesBackEveryEmptySlabTheHeapKeeps) {
  ObjectSet set(source_);
  ASSERT_EQ(slab_size(size_class_of(100)), SLAB);
  ASSERT_EQ(slab_size(size_class_of(300)), SLAB);
  ASSERT_EQ(slab_size(size_class_of(400)), SLAB);
  // A 400-byte slab whose objects another thread frees (its owner has not looked since),
  // beside a current 400-byte slab that keeps one object.
  std::vector<void*> remote;
  void* kept = nullptr;
  while (true) {
    void* p = set.alloc(400, 0);
    if (!remote.empty() && BlockSet::ptr2block(p) != BlockSet::ptr2block(remote[0])) {
      kept = p;
      break;
    }
    remote.push_back(p);
  }
  std::thread([&] {
    for (void* p : remote) ObjectSet::free(p);
  }).join();
  // An empty current 300-byte slab.
  ObjectSet::free(set.alloc(300, 0));
  auto slabs = fill_slabs(set, ThreadHeap::TRIM_RUN + 1);
  const int64_t full = set.span_used();

  // Slab 0 empties first and stays as the spare; the next six go back as they empty.
  for (int s = 0; s < ThreadHeap::TRIM_RUN - 1; ++s) {
    for (void* p : slabs[s]) ObjectSet::free(p);
  }
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN - 2) * SLAB);
  EXPECT_EQ(set.heap_trims(), 0);
  // The eighth in the run: the slab, the spare, the empty current 300-byte slab and the
  // 400-byte slab emptied remotely all go back.
  for (void* p : slabs[ThreadHeap::TRIM_RUN - 1]) ObjectSet::free(p);
  EXPECT_EQ(set.heap_trims(), 1);
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN + 2) * SLAB);
  // Until the next refill even the current slab goes back as it empties.
  for (void* p : slabs[ThreadHeap::TRIM_RUN]) ObjectSet::free(p);
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN + 3) * SLAB);
  // A refill ends that: a current slab that empties is kept again.
  ObjectSet::free(set.alloc(100, 0));
  EXPECT_EQ(set.span_used(), full - (ThreadHeap::TRIM_RUN + 2) * SLAB);
  EXPECT_EQ(set.heap_trims(), 1);
  ObjectSet::free(kept);
}

TEST_F(ThreadHeapTest, AThreadThatFillsAndEmptiesSlabsInASteadyStateNeverTrims) {
  ObjectSet set(source_);
  // An object that cycles on its current slab empties it at every free.
  for (int i = 0; i < 10 * ThreadHeap::TRIM_RUN; ++i) ObjectSet::free(set.alloc(100, 0));
  // Rounds that fill three slabs and empty them: each round refills from its spare, so
  // no run reaches TRIM_RUN, over many more empties than that in total.
  for (int round = 0; round < 10 * ThreadHeap::TRIM_RUN; ++round) {
    for (auto& slab : fill_slabs(set, 3)) {
      for (void* p : slab) ObjectSet::free(p);
    }
  }
  EXPECT_EQ(set.heap_trims(), 0);
  // So the heap keeps its current slab and the spare, and refills without the block layer.
  const int64_t steady = set.span_used();
  for (auto& slab : fill_slabs(set, 2)) {
    for (void* p : slab) ObjectSet::free(p);
  }
  EXPECT_EQ(set.span_used(), steady);
}

}  // namespace
}  // namespace achunk::testing
