// ob_malloc's aligned allocations over a fake OS: aligned classes for alignments up to a
// page, a slide within a bigger object, and spans placed for big aligned objects.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "achunk/base/alloc_failure.h"
#include "alloc/object/malloc_allocator.h"
#include "alloc/object/ob_malloc_fixture.h"

namespace achunk::testing {
namespace {

TEST_F(ObMallocTest, AlignedAllocations) {
  const ObMemAttr attr(TENANT, "t_align");
  for (int64_t align : {8, 16, 32, 64, 4096, 65536}) {
    void* p = alloc_->alloc_align(align, 100, attr);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align), 0u) << align;
    EXPECT_EQ(ObMallocAllocator::get_size(p), 100);
    std::memset(p, 1, 100);
    ObMallocAllocator::free(p);
  }
  EXPECT_EQ(alloc_->alloc_align(48, 100, attr), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_ARGUMENT);
}

// alignas(64) types and cache-line buffers: an alignment up to 64 is met by an aligned
// class's slot, so the object has no pad (its header is its own, IN_USE), its free takes
// the fast path, and it costs no more than the plain class rounded up to 64.
TEST_F(ObMallocTest, AnAlignmentUpTo64IsAPlainObjectOfAnAlignedClass) {
  const ObMemAttr attr(TENANT, "t_align64");
  for (int64_t align : {32, 64}) {
    for (int64_t size = 0; size <= SMALL_OBJECT_MAX; size += 1 + size / 8) {
      void* p = alloc_->alloc_align(align, size, attr);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align), 0u)
          << align << " " << size;
      ASSERT_EQ(header_state(load_header(p)), ObjectState::IN_USE) << align << " " << size;
      ASSERT_EQ(ObMallocAllocator::get_size(p), size);
      const int sc = slab_of(BlockSet::ptr2block(header_of(p)))->sc_;
      ASSERT_TRUE(is_aligned_class(sc));
      ASSERT_LE(class_slot_size(sc), (class_slot_size(size_class_of(size)) + 63) / 64 * 64 + 64);
      std::memset(p, 1, static_cast<size_t>(size));
      ASSERT_TRUE(ObjectSet::try_free_fast(p)) << align << " " << size;
    }
  }
}

// A plain object's header shares the cache line of its first bytes in every class whose
// slot is a multiple of 64 (the user pointer is 16 bytes past a line): slots placed for
// 64-byte alignment cost replace1 21% more last-level misses (cachegrind).
TEST_F(ObMallocTest, APlainObjectsHeaderSharesTheLineOfItsFirstBytes) {
  const ObMemAttr attr(TENANT, "t_plain_line");
  std::vector<void*> objs;
  for (int sc = 0; sc < PLAIN_CLASS_COUNT; ++sc) {
    if (class_slot_size(sc) % 64 != 0) continue;
    for (int i = 0; i < 3; ++i) {
      void* p = alloc_->alloc(class_slot_size(sc) - AOBJECT_META_SIZE, attr);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 16u) << sc;
      objs.push_back(p);
    }
  }
  for (void* p : objs) ObMallocAllocator::free(p);
}

// Above 64 the object slides inside a bigger one by at most align - 16 (both pointers are
// 16-byte aligned), unless a page class's slot is no larger: a 1000-byte object aligned
// to 128 takes a 1280-byte slot, not a 4 KiB one.
TEST_F(ObMallocTest, AnAlignedObjectSlidesByAtMostAlignMinus16) {
  const ObMemAttr attr(TENANT, "t_align_slide");
  for (int64_t align : {128, 1024, 4096}) {
    for (int64_t size : {align, 3 * align + 16, int64_t{1000}}) {
      void* p = alloc_->alloc_align(align, size, attr);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align), 0u);
      EXPECT_EQ(ObMallocAllocator::get_size(p), size);
      const int sc = slab_of(BlockSet::ptr2block(header_of(p)))->sc_;
      const int slide = size_class_of(size + align - 16);
      if (ObMallocAllocator::class_for_alignment(align, size) < 0) {
        EXPECT_EQ(sc, slide) << align << " " << size;
      } else {
        EXPECT_TRUE(is_page_class(sc)) << align << " " << size;
        EXPECT_LE(class_slot_size(sc), class_slot_size(slide)) << align << " " << size;
      }
      std::memset(p, 1, static_cast<size_t>(size));
      ObMallocAllocator::free(p);
    }
  }
  EXPECT_EQ(ObMallocAllocator::class_for_alignment(128, 1000), -1);
  EXPECT_EQ(ObMallocAllocator::class_for_alignment(4096, 100), PAGE_CLASS_BASE);
}

// Direct I/O buffers: page-aligned objects up to a slab's largest are plain objects of a
// page class (IN_USE header, the fast free), in a slot no larger than the slide's, whose
// header shares a page with the canary of the slot before.
TEST_F(ObMallocTest, APageAlignedObjectIsAPlainObjectOfAPageClass) {
  const ObMemAttr attr(TENANT, "t_align_page");
  std::vector<void*> objs;
  for (int64_t size = 0; size <= SMALL_OBJECT_MAX; size += 1 + size / 5) {
    for (int i = 0; i < 3; ++i) {
      void* p = alloc_->alloc_align(PAGE_ALIGN, size, attr);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % PAGE_ALIGN, 0u) << size;
      ASSERT_EQ(header_state(load_header(p)), ObjectState::IN_USE) << size;
      ASSERT_EQ(ObMallocAllocator::get_size(p), size);
      const int sc = slab_of(BlockSet::ptr2block(header_of(p)))->sc_;
      ASSERT_TRUE(is_page_class(sc)) << size;
      const int64_t slide = size + PAGE_ALIGN - 16;
      if (slide <= SMALL_OBJECT_MAX) {
        ASSERT_LE(class_slot_size(sc), class_slot_size(size_class_of(slide))) << size;
      }
      std::memset(p, 1, static_cast<size_t>(size));
      objs.push_back(p);
    }
  }
  EXPECT_EQ(usage_of("t_align_page").count, static_cast<int64_t>(objs.size()));
  for (void* p : objs) ASSERT_TRUE(ObjectSet::try_free_fast(p));
  EXPECT_EQ(usage_of("t_align_page").count, 0);
}

// A big object aligned to 8 KiB-1 MiB starts at the second block of a span placed for
// it, its size and header ending the first: no pad, and the span holds the object and
// that block, not the `align` bytes sliding within a bigger object would keep (a
// 64 KiB-aligned 100 KiB buffer held 168 KiB, a 1 MiB-aligned one 1.1 MiB).
TEST_F(ObMallocTest, ABigAlignedObjectStartsAtTheSecondBlockOfASpanPlacedForIt) {
  const ObMemAttr attr(TENANT, "t_align_span");
  const int64_t KB = 1024;
  std::vector<void*> objs;
  for (int64_t align : {8 * KB, 64 * KB, 256 * KB, 1024 * KB}) {
    for (int64_t size : {int64_t{100}, 64 * KB - 8, 100 * KB, 900 * KB}) {
      if (size + align - 16 <= SMALL_OBJECT_MAX) continue;  // a slab's slot: see below
      void* p = alloc_->alloc_align(align, size, attr);
      ASSERT_NE(p, nullptr) << align << " " << size;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align), 0u);
      EXPECT_EQ(ObMallocAllocator::get_size(p), size);
      EXPECT_EQ(header_state(load_header(p)), ObjectState::BIG);
      ABlock* span = BlockSet::ptr2block(header_of(p));
      ASSERT_NE(span, nullptr);
      EXPECT_FALSE(span->dedicated());
      EXPECT_EQ(static_cast<char*>(block_data(span)) + ABLOCK_SIZE, p);
      EXPECT_LE(BlockSet::span_bytes(span), ABLOCK_SIZE + size + ABLOCK_SIZE)
          << align << " " << size;
      EXPECT_GE(ObMallocAllocator::usable_size(p), size);
      std::memset(p, 1, static_cast<size_t>(size));
      objs.push_back(p);
    }
  }
  EXPECT_EQ(usage_of("t_align_span").count, static_cast<int64_t>(objs.size()));
  for (void* p : objs) ObMallocAllocator::free(p);
  EXPECT_EQ(usage_of("t_align_span").count, 0);
}

// Such an object is a big object like any other: it grows in place and moves, shrinks,
// and a second free or an interior pointer is reported.
TEST_F(ObMallocTest, APlacedAlignedObjectReallocsAndItsBadFreesAreReported) {
  const ObMemAttr attr(TENANT, "t_align_placed");
  const int64_t size = int64_t{100} << 10;
  char* p = static_cast<char*>(alloc_->alloc_align(int64_t{64} << 10, size, attr));
  ASSERT_NE(p, nullptr);
  for (int64_t i = 0; i < size; ++i) p[i] = static_cast<char>(i);
  // Within its span's last block, then past it (in place or moved), then shrunk.
  for (int64_t to : {size + 1000, 3 * size, size / 2}) {
    p = static_cast<char*>(alloc_->realloc(p, to, attr));
    ASSERT_NE(p, nullptr) << to;
    EXPECT_EQ(ObMallocAllocator::get_size(p), to);
    for (int64_t i = 0; i < std::min(size / 2, to); i += 4099) {
      ASSERT_EQ(p[i], static_cast<char>(i)) << to << " " << i;
    }
  }
  ObMallocAllocator::free(p);

  Captured::reports.clear();
  ErrorHandler previous = set_error_handler(&Captured::handler);
  char* q = static_cast<char*>(alloc_->alloc_align(int64_t{64} << 10, size, attr));
  ASSERT_NE(q, nullptr);
  ObMallocAllocator::free(q + 64);  // interior: no object header there
  ObMallocAllocator::free(q);
  ObMallocAllocator::free(q);
  set_error_handler(previous);
  ASSERT_EQ(Captured::reports.size(), 2u);
  EXPECT_EQ(Captured::reports[0].first, ErrorKind::INVALID_FREE);
  EXPECT_EQ(Captured::reports[1].first, ErrorKind::DOUBLE_FREE);
}

// An alignment too big for a placed span slides within a dedicated chunk, whose blocks
// hold no distances (BlockSet::Lookup::HEAD_BLOCK): the pad header's block gets its own,
// so a lookup of the aligned pointer reads no stale one; realloc, size and free work.
TEST_F(ObMallocTest, ADeepPadHeadersBlockLeadsToItsSpan) {
  const ObMemAttr attr(TENANT, "t_align_deep");
  constexpr int64_t MIB = int64_t{1} << 20;
  char* p = static_cast<char*>(alloc_->alloc_align(MIB, 3 * MIB / 2, attr));
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % MIB, 0u);
  AChunk* chunk = AChunk::ptr2chunk(header_of(p));
  const int at = static_cast<int>(
      (reinterpret_cast<char*>(header_of(p)) - static_cast<char*>(chunk->data())) / ABLOCK_SIZE);
  ASSERT_GT(at, 0);
  ABlock* head = BlockSet::ptr2block(header_of(p));
  ASSERT_NE(head, nullptr);
  EXPECT_TRUE(head->dedicated());
  EXPECT_EQ(BlockSet::span_head(chunk, at), block_index(head));
  EXPECT_EQ(ObMallocAllocator::get_size(p), 3 * MIB / 2);
  std::memset(p, 3, 3 * MIB / 2);
  ObMallocAllocator::free(p);
  EXPECT_EQ(usage_of("t_align_deep").count, 0);
}

// Buffers aligned to 4 MiB or more, freed and asked again: the chunk placed for the first
// is cached where it was placed and serves every later request its place meets, so the
// loop maps once (each round used to map, fault in and unmap a chunk of its own). A
// buffer in such a reused chunk reallocs and frees as any other.
TEST_F(ObMallocTest, BuffersAlignedToMegabytesReuseTheirPlacedChunks) {
  const ObMemAttr attr(TENANT, "t_align_huge");
  constexpr int64_t MIB = int64_t{1} << 20;
  const int64_t size = 3 * MIB;
  char* p = static_cast<char*>(alloc_->alloc_align(16 * MIB, size, attr));
  ASSERT_NE(p, nullptr);
  ObMallocAllocator::free(p);
  const int64_t maps = os_.map_calls();
  for (int64_t align : {16 * MIB, 8 * MIB, 4 * MIB, 16 * MIB, 2 * MIB}) {
    p = static_cast<char*>(alloc_->alloc_align(align, size - align / 64, attr));
    ASSERT_NE(p, nullptr) << align;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align), 0u) << align;
    EXPECT_EQ(ObMallocAllocator::get_size(p), size - align / 64);
    p[0] = 1;
    p[size - align / 64 - 1] = 2;
    ObMallocAllocator::free(p);
  }
  EXPECT_EQ(os_.map_calls(), maps);
  p = static_cast<char*>(alloc_->alloc_align(8 * MIB, size, attr));
  ASSERT_NE(p, nullptr);
  for (int64_t i = 0; i < size; i += 4096) p[i] = static_cast<char>(i / 4096);
  p = static_cast<char*>(alloc_->realloc(p, 3 * size, attr));
  ASSERT_NE(p, nullptr);
  for (int64_t i = 0; i < size; i += 4096) ASSERT_EQ(p[i], static_cast<char>(i / 4096)) << i;
  EXPECT_EQ(ObMallocAllocator::get_size(p), 3 * size);
  ObMallocAllocator::free(p);
  EXPECT_EQ(usage_of("t_align_huge").count, 0);
  expect_consistent();
}

// One that cannot fit a chunk with its slide (a 1 MiB alignment of 1.5 MiB) still
// slides within a bigger object, and a small one whose slide fits a slab's slot slides
// within that.
TEST_F(ObMallocTest, AnAlignedObjectThatFitsNoPlacedSpanSlides) {
  const ObMemAttr attr(TENANT, "t_align_big_slide");
  for (auto [align, size] : {std::pair{int64_t{1} << 20, int64_t{1536} << 10},
                             std::pair{int64_t{16} << 10, int64_t{100}}}) {
    void* p = alloc_->alloc_align(align, size, attr);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align), 0u);
    EXPECT_EQ(ObMallocAllocator::get_size(p), size);
    std::memset(p, 1, static_cast<size_t>(size));
    void* q = alloc_->realloc(p, size + 4096, attr);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(static_cast<char*>(q)[size - 1], 1);
    ObMallocAllocator::free(q);
  }
  EXPECT_FALSE(ObjectSet::aligned_span_fits(int64_t{1536} << 10, int64_t{1} << 20));
  EXPECT_TRUE(ObjectSet::aligned_span_fits(int64_t{900} << 10, int64_t{1} << 20));
  EXPECT_FALSE(ObjectSet::aligned_span_fits(100, int64_t{2} << 20));
}

}  // namespace
}  // namespace achunk::testing
