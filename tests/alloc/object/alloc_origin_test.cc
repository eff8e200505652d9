// The allocation's origin in its header: a free by another call family (free of operator
// new's object, delete of new[]'s, realloc of new's) is reported at the free naming both
// calls and frees nothing; the option turns the report off; nothing else loses it.
#include <gtest/gtest.h>

#include <string>

#include "alloc/object/malloc_front.h"
#include "alloc/object/object_check.h"
#include "ob_malloc_fixture.h"

namespace achunk {
namespace {

using testing::Captured;
using testing::TENANT;

class AllocOriginTest : public testing::ObMallocTest {
 protected:
  void SetUp() override {
    Captured::reports.clear();
    previous_ = set_error_handler(&Captured::handler);
  }
  void TearDown() override {
    set_report_dealloc_mismatch(true);
    set_error_handler(previous_);
    ObMallocTest::TearDown();
  }
  // An object of `size` bytes (aligned to `align` when non-zero) marked as `origin`'s, as
  // the drop-in malloc's operators new mark theirs after a miss.
  void* alloc_as(AllocOrigin origin, int64_t size, int64_t align = 0) {
    void* p = align == 0 ? alloc_->alloc(size, attr_) : alloc_->alloc_align(align, size, attr_);
    store_header(p, load_header(p) | origin_bits(origin));
    return p;
  }
  int64_t live() { return usage_of("t_origin").count; }
  static void free_as(void* p, AllocOrigin origin) {
    switch (origin) {
      case AllocOrigin::MALLOC:
        return ObMallocAllocator::free<AllocOrigin::MALLOC>(p);
      case AllocOrigin::NEW:
        return ObMallocAllocator::free<AllocOrigin::NEW>(p);
      case AllocOrigin::NEW_ARRAY:
        return ObMallocAllocator::free<AllocOrigin::NEW_ARRAY>(p);
    }
  }

  const ObMemAttr attr_{TENANT, "t_origin"};
  ErrorHandler previous_ = nullptr;
};

constexpr AllocOrigin ORIGINS[] = {AllocOrigin::MALLOC, AllocOrigin::NEW, AllocOrigin::NEW_ARRAY};

TEST(AllocOriginHeaderTest, TheOriginSitsBesideTheLabelAndLeavesStateLabelAndSizeAlone) {
  const uint64_t h = make_header(ObjectState::IN_USE, 4095, 123) | origin_bits(AllocOrigin::NEW);
  EXPECT_EQ(header_state(h), ObjectState::IN_USE);
  EXPECT_EQ(header_label(h), 4095);
  EXPECT_EQ(header_size(h), 123u);
  EXPECT_EQ(header_origin(h), AllocOrigin::NEW);
  EXPECT_EQ(h >> ORIGIN_SHIFT, in_use_key(AllocOrigin::NEW));
  EXPECT_NE(h >> ORIGIN_SHIFT, in_use_key(AllocOrigin::MALLOC));
  EXPECT_EQ(header_origin(with_size(h, 7)), AllocOrigin::NEW);
  EXPECT_EQ(header_origin(h ^ IN_USE_TO_FREE), AllocOrigin::NEW);
  EXPECT_EQ(header_state(h ^ IN_USE_TO_FREE), ObjectState::FREE);
}

// Small, big and aligned objects of each family, freed by each other family: one report
// naming both calls, the object left live; then its own family frees it without a word.
TEST_F(AllocOriginTest, AFreeByAnotherFamilyIsReportedNamingBothAndFreesNothing) {
  const char* const ALLOC[] = {"malloc", "operator new", "operator new[]"};
  const char* const FREE[] = {"free", "operator delete", "operator delete[]"};
  struct Shape {
    int64_t size;
    int64_t align;
  };
  for (const Shape shape : {Shape{64, 0}, Shape{100000, 0}, Shape{200, 256}}) {
    for (int a = 0; a < 3; ++a) {
      for (int f = 0; f < 3; ++f) {
        if (a == f) continue;
        SCOPED_TRACE(std::to_string(shape.size) + " " + ALLOC[a] + " / " + FREE[f]);
        Captured::reports.clear();
        void* p = alloc_as(ORIGINS[a], shape.size, shape.align);
        free_as(p, ORIGINS[f]);
        ASSERT_EQ(Captured::reports.size(), 1u);
        EXPECT_EQ(Captured::reports[0].first, ErrorKind::DEALLOC_MISMATCH);
        const std::string want = std::string("allocated by ") + ALLOC[a] + ", freed by " + FREE[f];
        EXPECT_NE(Captured::reports[0].second.find(want), std::string::npos)
            << Captured::reports[0].second;
        if (shape.align == 0) {
          const std::string named = "size=" + std::to_string(shape.size) + " label=t_origin";
          EXPECT_NE(Captured::reports[0].second.find(named), std::string::npos);
        }
        EXPECT_EQ(live(), 1);
        free_as(p, ORIGINS[a]);
        EXPECT_EQ(Captured::reports.size(), 1u);
        EXPECT_EQ(live(), 0);
      }
    }
  }
}

// The state and origin are one compare on the fast path: another family's object takes
// the full path, its own family's does not.
TEST_F(AllocOriginTest, TheFastPathTakesOnlyMallocsObjectsForFree) {
  void* mine = alloc_as(AllocOrigin::MALLOC, 48);
  void* other = alloc_as(AllocOrigin::NEW, 48);
  EXPECT_TRUE(ObjectSet::try_free_fast(mine));
  EXPECT_FALSE(ObjectSet::try_free_fast(other));
  EXPECT_EQ(header_state(load_header(other)), ObjectState::IN_USE);
  ObMallocAllocator::free<AllocOrigin::NEW>(other);
  EXPECT_TRUE(Captured::reports.empty());
}

// The drop-in malloc's hit marks the object with the bits it is given.
TEST_F(AllocOriginTest, TheStaticHitMarksItsObjectWithTheOriginGiven) {
  void* warm = alloc_->alloc_static(32, attr_);  // fills the thread's static entry
  void* p = ObMallocAllocator::alloc_static_fast(alloc_->id(), 32, attr_,
                                                 origin_bits(AllocOrigin::NEW_ARRAY));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(header_origin(load_header(p)), AllocOrigin::NEW_ARRAY);
  EXPECT_EQ(header_size(load_header(p)), 32u);
  EXPECT_EQ(header_label(load_header(p)), label_id("t_origin"));
  ObMallocAllocator::free<AllocOrigin::NEW>(p);
  EXPECT_EQ(Captured::reports.size(), 1u);
  ObMallocAllocator::free<AllocOrigin::NEW_ARRAY>(p);
  ObMallocAllocator::free(warm);
  EXPECT_EQ(Captured::reports.size(), 1u);
}

TEST_F(AllocOriginTest, ReallocOfNewsObjectIsAMismatchAndLeavesItAlone) {
  for (const int64_t size : {40, 70000}) {
    Captured::reports.clear();
    char* p = static_cast<char*>(alloc_as(AllocOrigin::NEW, size));
    p[0] = 'k';
    EXPECT_EQ(alloc_->realloc(p, size * 2, attr_), nullptr);
    ASSERT_EQ(Captured::reports.size(), 1u);
    EXPECT_EQ(Captured::reports[0].first, ErrorKind::DEALLOC_MISMATCH);
    EXPECT_NE(Captured::reports[0].second.find("allocated by operator new, freed by realloc"),
              std::string::npos)
        << Captured::reports[0].second;
    EXPECT_EQ(p[0], 'k');
    ObMallocAllocator::free<AllocOrigin::NEW>(p);
    EXPECT_EQ(Captured::reports.size(), 1u);
  }
}

TEST_F(AllocOriginTest, WithTheReportOffAMismatchFreesAsAsked) {
  set_report_dealloc_mismatch(false);
  void* small = alloc_as(AllocOrigin::NEW_ARRAY, 64);
  void* big = alloc_as(AllocOrigin::NEW, 100000);
  void* grown = alloc_as(AllocOrigin::NEW, 24);
  ObMallocAllocator::free(small);
  ObMallocAllocator::free<AllocOrigin::NEW_ARRAY>(big);
  grown = alloc_->realloc(grown, 5000, attr_);
  ASSERT_NE(grown, nullptr);
  EXPECT_EQ(live(), 1);
  ObMallocAllocator::free(grown);
  EXPECT_TRUE(Captured::reports.empty());
  EXPECT_EQ(live(), 0);
}

// malloc_usable_size grows an object to its slot or span, rewriting its header: the
// origin stays, so its delete is no mismatch and its free still is.
TEST_F(AllocOriginTest, UsableSizeKeepsTheOrigin) {
  for (const int64_t size : {20, 100000}) {
    Captured::reports.clear();
    void* p = alloc_as(AllocOrigin::NEW, size);
    EXPECT_GE(ObMallocAllocator::usable_size(p), size);
    EXPECT_EQ(header_origin(load_header(p)), AllocOrigin::NEW);
    ObMallocAllocator::free(p);
    EXPECT_EQ(Captured::reports.size(), 1u);
    ObMallocAllocator::free<AllocOrigin::NEW>(p);
    EXPECT_EQ(Captured::reports.size(), 1u);
  }
}

// The usage print's label comes from the header's label field alone.
TEST_F(AllocOriginTest, TheUsageCountsMarkedObjectsUnderTheirLabel) {
  void* p = alloc_as(AllocOrigin::NEW_ARRAY, 64);
  const LabelUsage u = usage_of("t_origin");
  EXPECT_EQ(u.count, 1);
  EXPECT_EQ(u.used, 64);
  ObMallocAllocator::free<AllocOrigin::NEW_ARRAY>(p);
}

// Both origin bits set is no family: a corrupted header, reported as a mismatch naming no
// call it never made.
TEST_F(AllocOriginTest, AHeaderWithBothOriginBitsIsReportedAsAnUnknownCall) {
  void* p = alloc_->alloc(64, attr_);
  store_header(p, load_header(p) | ORIGIN_MASK);
  ObMallocAllocator::free(p);
  ASSERT_EQ(Captured::reports.size(), 1u);
  EXPECT_NE(Captured::reports[0].second.find("allocated by an unknown call, freed by free"),
            std::string::npos)
      << Captured::reports[0].second;
  store_header(p, load_header(p) & ~ORIGIN_MASK);
  ObMallocAllocator::free(p);
  EXPECT_EQ(Captured::reports.size(), 1u);
}

TEST_F(AllocOriginTest, ASecondDeleteIsADoubleFree) {
  void* p = alloc_as(AllocOrigin::NEW, 64);
  ObMallocAllocator::free<AllocOrigin::NEW>(p);
  ObMallocAllocator::free<AllocOrigin::NEW>(p);
  ASSERT_EQ(Captured::reports.size(), 1u);
  EXPECT_EQ(Captured::reports[0].first, ErrorKind::DOUBLE_FREE);
}

}  // namespace
}  // namespace achunk
