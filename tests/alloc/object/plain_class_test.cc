// PLAIN_CLASS_BIT: malloc's front marks an object of the plain class of its size, so
// malloc_usable_size and realloc take its class from the header. Every object that sits
// in another class (an aligned one, or a slot resized to another size) must not carry
// it: its usable size would be the wrong slot's.
#include <gtest/gtest.h>

#include <vector>

#include "alloc/object/malloc_front.h"
#include "ob_malloc_fixture.h"

namespace achunk {
namespace {

using testing::TENANT;

class PlainClassTest : public testing::ObMallocTest {
 protected:
  static int64_t capacity_of(int sc) { return class_slot_size(sc) - AOBJECT_META_SIZE; }
  static bool plain(void* p) { return (load_header(p) & PLAIN_CLASS_BIT) != 0; }
  // The drop-in's static entry, filled and then hit.
  void* hit(int64_t size) {
    ObMallocAllocator::free(alloc_->alloc_static(size, attr_));
    void* p = ObMallocAllocator::alloc_static_fast(alloc_->id(), size, attr_);
    EXPECT_NE(p, nullptr);
    return p;
  }
  const ObMemAttr attr_{TENANT, "t_plain"};
};

TEST_F(PlainClassTest, MallocsHitAndRefillMarkAPlainObjectAndUsableSizeIsItsSlot) {
  void* p = hit(100);
  EXPECT_TRUE(plain(p));
  EXPECT_EQ(ObMallocAllocator::usable_size(p), capacity_of(size_class_of(100)));
  EXPECT_TRUE(plain(p));  // grown to its slot, still the plain class of its new size
  ObMallocAllocator::free(p);
  // A slab run dry: the refill marks its object too.
  std::vector<void*> objs;
  for (int i = 0; i < 300; ++i) objs.push_back(alloc_->alloc_static(700, attr_));
  for (void* o : objs) EXPECT_TRUE(plain(o));
  for (void* o : objs) ObMallocAllocator::free(o);
}

// An aligned class whose slot differs from the plain class of the same size.
TEST_F(PlainClassTest, AnAlignedObjectIsNotMarkedAndReportsItsOwnSlot) {
  int64_t size = 0;
  for (int64_t s = 17; s <= 1024 && size == 0; ++s) {
    if (class_slot_size(aligned_size_class(s)) != class_slot_size(size_class_of(s))) size = s;
  }
  ASSERT_GT(size, 0);
  // The static entry, and a current slab of the aligned class.
  ObMallocAllocator::free(alloc_->alloc_align_static(64, size, attr_));
  void* p = ObMallocAllocator::alloc_align_static_fast(alloc_->id(), 64, size, attr_);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(plain(p));
  EXPECT_EQ(ObMallocAllocator::usable_size(p), capacity_of(aligned_size_class(size)));
  ObMallocAllocator::free(p);
  void* q = alloc_->alloc_align(64, size, attr_);
  EXPECT_FALSE(plain(q));
  ObMallocAllocator::free(q);
}

// A realloc within the slot to a size of another plain class drops the mark, and so does
// an in-place resize on the full path: the slot is still the first size's.
TEST_F(PlainClassTest, AResizeWithinTheSlotDropsTheMark) {
  int64_t from = 0;
  int64_t to = 0;
  for (int64_t s = 200; s <= 4000 && from == 0; s += 8) {
    const int64_t slot = class_slot_size(size_class_of(s));
    const int64_t smaller = s - 24;
    if (size_class_of(smaller) != size_class_of(s) && !ObjectSet::holds_far_more(slot, smaller)) {
      from = s;
      to = smaller;
    }
  }
  ASSERT_GT(from, 0);
  void* p = hit(from);
  ASSERT_TRUE(plain(p));
  ASSERT_EQ(alloc_->realloc(p, to, attr_), p);  // in its slot
  EXPECT_FALSE(plain(p));
  EXPECT_EQ(ObMallocAllocator::usable_size(p), capacity_of(size_class_of(from)));
  ObMallocAllocator::free(p);

  void* q = hit(from);
  ASSERT_TRUE(ObjectSet::resize_in_place(q, to));
  EXPECT_FALSE(plain(q));
  EXPECT_EQ(ObMallocAllocator::usable_size(q), capacity_of(size_class_of(from)));
  ObMallocAllocator::free(q);
}

}  // namespace
}  // namespace achunk
