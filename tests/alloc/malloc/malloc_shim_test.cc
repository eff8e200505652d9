// The drop-in malloc's contracts, called through the achunk_ prefix (no preloading), in
// every build: glibc-compatible edge cases, errno, alignment, the C API.
#include <errno.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "achunk/achunk.h"
#include "achunk/base/error_report.h"
#include "achunk/platform/linux_os.h"

namespace {

bool aligned(void* p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

// Every test starts with the thread's inline hit warm: ctest runs each test in a fresh
// process, whose first call would otherwise take the slow path, and a contract must hold
// on both (an alignment of 2^63 once passed the hit as a small one).
class MallocShimTest : public ::testing::Test {
 protected:
  void SetUp() override { achunk_free(achunk_malloc(16)); }
};

// The refusals, each asked of a thread that never allocated (the slow paths) and again
// once it has (the inline hits): nullptr or an error code, never an object.
void expect_refusals(const char* when) {
  const size_t top = SIZE_MAX / 2 + 1;  // 2^63
  EXPECT_EQ(achunk_malloc(SIZE_MAX), nullptr) << when;
  EXPECT_EQ(achunk_malloc(top + 16), nullptr) << when;
  EXPECT_EQ(achunk_calloc(size_t{1} << 32, size_t{1} << 32), nullptr) << when;
  EXPECT_EQ(achunk_reallocarray(nullptr, size_t{1} << 33, size_t{1} << 33), nullptr) << when;
  EXPECT_EQ(achunk_realloc(nullptr, SIZE_MAX), nullptr) << when;
  for (size_t a : {size_t{16}, size_t{64}, size_t{4096}, top}) {
    EXPECT_EQ(achunk_memalign(a, SIZE_MAX), nullptr) << when << " " << a;
    EXPECT_EQ(achunk_aligned_alloc(a, SIZE_MAX), nullptr) << when << " " << a;
    void* p = reinterpret_cast<void*>(0x1234);
    EXPECT_EQ(achunk_posix_memalign(&p, a, SIZE_MAX), ENOMEM) << when << " " << a;
    EXPECT_EQ(p, reinterpret_cast<void*>(0x1234)) << when << " " << a;
  }
  EXPECT_EQ(achunk_memalign(top, 16), nullptr) << when;
  EXPECT_EQ(achunk_aligned_alloc(top, 16), nullptr) << when;
  void* p = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(achunk_posix_memalign(&p, top, 16), ENOMEM) << when;
  EXPECT_EQ(achunk_valloc(SIZE_MAX), nullptr) << when;
  EXPECT_EQ(achunk_pvalloc(SIZE_MAX), nullptr) << when;
  EXPECT_EQ(achunk_malloc_usable_size(nullptr), 0u) << when;
}

TEST_F(MallocShimTest, RefusalsHoldOnTheSlowPathsAndOnTheInlineHits) {
  std::thread([] {
    expect_refusals("cold");
    void* p = achunk_malloc(16);  // the thread's hit from here on
    ASSERT_NE(p, nullptr);
    for (size_t a : {size_t{64}, size_t{4096}}) achunk_free(achunk_memalign(a, 100));
    expect_refusals("warm");
    achunk_free(p);
  }).join();
}

TEST_F(MallocShimTest, MallocZeroIsAUniquePointer) {
  void* a = achunk_malloc(0);
  void* b = achunk_malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_TRUE(aligned(a, 16));
  achunk_free(a);
  achunk_free(b);
  achunk_free(nullptr);
}

TEST_F(MallocShimTest, ReallocEdgeCases) {
  void* p = achunk_realloc(nullptr, 10);  // = malloc
  ASSERT_NE(p, nullptr);
  std::memcpy(p, "abcdefghij", 10);
  p = achunk_realloc(p, 100000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::memcmp(p, "abcdefghij", 10), 0);
  EXPECT_EQ(achunk_realloc(p, 0), nullptr);  // frees, as glibc
  errno = 0;
  void* q = achunk_malloc(8);
  EXPECT_EQ(achunk_realloc(q, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  achunk_free(q);  // still valid after the failed realloc
}

std::vector<achunk::ErrorKind> g_reported;
void record_report(achunk::ErrorKind kind, const void*, const char*) {
  g_reported.push_back(kind);
}

// realloc's inline hit: a slab's object resized within its slot keeps its pointer, one
// that outgrows its slot or shrinks far below it moves with its contents, and a freed one
// is reported as the full path reports it, whatever the size asked.
TEST_F(MallocShimTest, ReallocsHitResizesInTheSlotAndMovesWhatMust) {
  char* p = static_cast<char*>(achunk_malloc(100));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x5a, 100);
  EXPECT_EQ(achunk_realloc(p, 110), p);  // its 128-byte slot
  EXPECT_GE(achunk_malloc_usable_size(p), 110u);
  std::memset(p + 100, 0x5a, 10);
  char* q = static_cast<char*>(achunk_realloc(p, 3000));
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  for (int i = 0; i < 110; ++i) ASSERT_EQ(q[i], 0x5a) << i;
  char* r = static_cast<char*>(achunk_realloc(q, 50));  // far below its slot
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r, q);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(r[i], 0x5a) << i;
  achunk_free(r);
  g_reported.clear();
  const achunk::ErrorHandler previous = achunk::set_error_handler(&record_report);
  for (size_t size : {size_t{60}, size_t{5000}, size_t{10}}) {
    EXPECT_EQ(achunk_realloc(r, size), nullptr) << size;
  }
  achunk::set_error_handler(previous);
  ASSERT_EQ(g_reported.size(), 3u);
  for (achunk::ErrorKind kind : g_reported) EXPECT_EQ(kind, achunk::ErrorKind::DOUBLE_FREE);
}

TEST_F(MallocShimTest, CallocZeroesAndChecksOverflow) {
  // Dirty a slot, free it, and ask calloc for the same size: it must come back zeroed.
  char* dirty = static_cast<char*>(achunk_malloc(200));
  std::memset(dirty, 0x7f, 200);
  achunk_free(dirty);
  char* c = static_cast<char*>(achunk_calloc(10, 20));
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(c[i], 0);
  achunk_free(c);
  // The same with a big object, whose span may or may not have been washed on the free.
  char* big_dirty = static_cast<char*>(achunk_malloc(200 * 1024));
  std::memset(big_dirty, 0x7f, 200 * 1024);
  achunk_free(big_dirty);
  char* big = static_cast<char*>(achunk_calloc(200, 1024));
  ASSERT_NE(big, nullptr);
  for (int i = 0; i < 200 * 1024; ++i) ASSERT_EQ(big[i], 0);
  achunk_free(big);
  // And one large enough that its pages are given back rather than written.
  char* span_dirty = static_cast<char*>(achunk_malloc(1 << 20));
  std::memset(span_dirty, 0x7f, 1 << 20);
  achunk_free(span_dirty);
  char* span = static_cast<char*>(achunk_calloc(1 << 10, 1 << 10));
  ASSERT_NE(span, nullptr);
  for (int i = 0; i < 1 << 20; ++i) ASSERT_EQ(span[i], 0);
  achunk_free(span);
  errno = 0;
  EXPECT_EQ(achunk_calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(achunk_reallocarray(nullptr, SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

// Over 20 MiB a chunk is never cached, so this calloc gets a new mapping: zero already,
// it must not be written (glibc and jemalloc skip it too), or a sparse table would take
// all its pages in RAM.
TEST_F(MallocShimTest, CallocOfFreshMemoryLeavesItsPagesUntouched) {
  constexpr size_t SIZE = size_t{24} << 20;
  char* p = static_cast<char*>(achunk_calloc(1, SIZE));
  ASSERT_NE(p, nullptr);
  achunk::LinuxOs os;
  char* page = p - reinterpret_cast<uintptr_t>(p) % 4096;  // mincore wants a page start
  const int64_t resident = os.resident_bytes(page, SIZE);
  ASSERT_GE(resident, 0);
  EXPECT_LT(resident, 64 * 1024);  // the header and the canary's page at most
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[SIZE / 2], 0);
  EXPECT_EQ(p[SIZE - 1], 0);
  achunk_free(p);
}

// A big calloc that reuses a dirty cached chunk decides by MiB piece: the pieces whose
// pages went back (an earlier sparse calloc's, a wash) are given back again, read as zero
// and stay out of RAM; the pieces still in RAM are written in place and stay there.
TEST_F(MallocShimTest, CallocOfDirtyCachedChunkGivesBackWhatIsOutOfRamOnly) {
  constexpr size_t SIZE = size_t{8} << 20;
  constexpr size_t OUT = size_t{6} << 20;  // the pages given back before the calloc
  char* dirty = static_cast<char*>(achunk_malloc(SIZE));
  ASSERT_NE(dirty, nullptr);
  std::memset(dirty, 0x7f, SIZE);
  achunk::LinuxOs os;
  char* page = dirty - reinterpret_cast<uintptr_t>(dirty) % 4096;
  ASSERT_EQ(os.release_pages(page + 4096, static_cast<int64_t>(OUT)), 0);
  std::memset(page + 4096, 0x7f, 4096 * 4);  // a few pages back in RAM, dirty again
  achunk_free(dirty);
  char* p = static_cast<char*>(achunk_calloc(1, SIZE));
  ASSERT_EQ(p, dirty);  // the cached chunk, its pages dirty
  const int64_t out = os.resident_bytes(page + 4096, static_cast<int64_t>(OUT - (1 << 20)));
  ASSERT_GE(out, 0);
  EXPECT_LT(out, 64 * 1024);  // the pieces out of RAM stay out
  const int64_t in = os.resident_bytes(page + 4096 + OUT + (1 << 20), 1 << 20);
  EXPECT_EQ(in, 1 << 20);  // the last pieces were written in place
  for (size_t i = 0; i < 8 * 4096; ++i) ASSERT_EQ(p[i], 0);
  for (size_t i = SIZE - 8192; i < SIZE; ++i) ASSERT_EQ(p[i], 0);
  for (size_t i = 0; i < SIZE; i += 4096) ASSERT_EQ(p[i + i / 4096 % 4096], 0);
  achunk_free(p);
}

TEST_F(MallocShimTest, HugeSizesFailWithEnomem) {
  errno = 0;
  EXPECT_EQ(achunk_malloc(SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(achunk_malloc(size_t{1} << 50), nullptr);  // above OBJECT_MAX_SIZE
  EXPECT_EQ(errno, ENOMEM);
}

// Bytes of [p, p+len) in RAM (mincore through the Os).
int64_t resident(void* p, size_t len) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
  achunk::LinuxOs os;
  return os.resident_bytes(reinterpret_cast<void*>(start),
                           static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) + len - start));
}

// The header holds 32 bits of size; big objects keep theirs in their span. Only the
// pages of the header and the canary are touched.
TEST_F(MallocShimTest, ObjectsOf4GiBAndMore) {
  // Nothing cached: a big request may grow a cached chunk, whose pages other tests touched.
  achunk_release_free_memory();
  for (size_t size : {size_t{4} << 30, (size_t{4} << 30) + 4097, size_t{6} << 30}) {
    char* p = static_cast<char*>(achunk_malloc(size));
    ASSERT_NE(p, nullptr) << size;
    EXPECT_TRUE(aligned(p, 16));
    EXPECT_LE(resident(p, size), 64 << 10) << size;
    p[0] = 'a';
    p[size - 1] = 'z';
    const size_t usable = achunk_malloc_usable_size(p);
    EXPECT_GE(usable, size);
    EXPECT_LT(usable, size + (size_t{2} << 20));
    EXPECT_EQ(achunk_malloc_usable_size(p), usable);  // exact, and stable
    // Shrinking stays in place (growing past the span would copy every page).
    char* q = static_cast<char*>(achunk_realloc(p, size - 4096));
    EXPECT_EQ(q, p);
    EXPECT_EQ(q[0], 'a');
    EXPECT_LE(resident(p, size), 64 << 10) << size;
    achunk_free(q);
  }
  char* z = static_cast<char*>(achunk_calloc(5, size_t{1} << 30));
  ASSERT_NE(z, nullptr);
  EXPECT_LE(resident(z, size_t{5} << 30), 64 << 10);
  EXPECT_EQ(z[(size_t{5} << 30) - 1], 0);
  achunk_free(z);
}

// Every power of two up to 1 GiB, through each entry point, without touching more than
// the object's first page: the pad is address space only.
TEST_F(MallocShimTest, AlignmentSweepTo1GiB) {
  for (int lg = 3; lg <= 30; ++lg) {
    const size_t a = size_t{1} << lg;
    for (size_t size : {size_t{0}, size_t{100}, size_t{3} << 20}) {
      void* p = nullptr;
      ASSERT_EQ(achunk_posix_memalign(&p, a, size), 0) << a << " " << size;
      void* q = achunk_aligned_alloc(a, size);
      void* m = achunk_memalign(a, size);
      for (void* x : {p, q, m}) {
        ASSERT_NE(x, nullptr) << a << " " << size;
        EXPECT_TRUE(aligned(x, a)) << a << " " << size;
        EXPECT_LE(resident(x, size), 64 << 10) << a << " " << size;
        std::memset(x, 7, size < 100 ? size : 100);
        EXPECT_GE(achunk_malloc_usable_size(x), size);
        void* moved = achunk_realloc(x, 200);  // an aligned object moves, bytes kept
        ASSERT_NE(moved, nullptr);
        if (size >= 100) {
          EXPECT_EQ(static_cast<char*>(moved)[99], 7);
        }
        achunk_free(moved);
      }
    }
  }
}

// Each function's contract for alignments it cannot or must not serve.
TEST_F(MallocShimTest, AbsurdAlignmentsAreRefused) {
  const size_t top = SIZE_MAX / 2 + 1;  // 2^63
  for (size_t a : {top + 1, top + 4096, SIZE_MAX}) {
    errno = 0;
    EXPECT_EQ(achunk_memalign(a, 10), nullptr) << a;  // no power of two covers it
    EXPECT_EQ(errno, EINVAL) << a;
  }
  errno = 0;
  EXPECT_EQ(achunk_memalign(top, 10), nullptr);  // valid, too big to serve
  EXPECT_EQ(errno, ENOMEM);
  void* r = achunk_memalign((size_t{3} << 20) + 1, 10);  // rounded up to 4 MiB
  EXPECT_TRUE(aligned(r, size_t{4} << 20));
  achunk_free(r);
  for (size_t a : {size_t{0}, size_t{24}, size_t{3} << 20, top + 1}) {
    errno = 0;
    EXPECT_EQ(achunk_aligned_alloc(a, 10), nullptr) << a;
    EXPECT_EQ(errno, EINVAL) << a;
  }
  errno = 0;
  EXPECT_EQ(achunk_aligned_alloc(size_t{1} << 62, 10), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(achunk_aligned_alloc(top, 10), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* p = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(achunk_posix_memalign(&p, top, 10), ENOMEM);
  EXPECT_EQ(achunk_posix_memalign(&p, size_t{1} << 62, 10), ENOMEM);
  EXPECT_EQ(achunk_posix_memalign(&p, (size_t{1} << 21) + 8, 10), EINVAL);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1234));
}

TEST_F(MallocShimTest, PosixMemalignRules) {
  void* p = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(achunk_posix_memalign(&p, 3, 10), EINVAL);
  EXPECT_EQ(achunk_posix_memalign(&p, 4, 10), EINVAL);  // not a multiple of sizeof(void*)
  EXPECT_EQ(achunk_posix_memalign(&p, 0, 10), EINVAL);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1234));  // untouched
  for (size_t a : {size_t{8}, size_t{16}, size_t{64}, size_t{4096}, size_t{1} << 20}) {
    ASSERT_EQ(achunk_posix_memalign(&p, a, 100), 0) << a;
    EXPECT_TRUE(aligned(p, a)) << a;
    std::memset(p, 1, 100);
    EXPECT_GE(achunk_malloc_usable_size(p), 100u);
    achunk_free(p);
  }
}

// 32 and 64 come from an aligned class through the hit; every size of a slab's object,
// all its usable bytes written, freed and handed out again.
TEST_F(MallocShimTest, CacheLineAlignedObjectsOfEverySlabSize) {
  for (size_t a : {size_t{32}, size_t{64}}) {
    for (size_t size = 0; size <= 65536; size += size < 1100 ? 1 : 97) {
      void* p = nullptr;
      ASSERT_EQ(achunk_posix_memalign(&p, a, size), 0) << a << " " << size;
      void* q = achunk_aligned_alloc(a, size);
      for (void* x : {p, q}) {
        ASSERT_TRUE(aligned(x, a)) << a << " " << size;
        const size_t usable = achunk_malloc_usable_size(x);
        ASSERT_GE(usable, size) << a << " " << size;
        std::memset(x, 5, usable);
      }
      achunk_free(q);
      achunk_free(p);
    }
  }
}

TEST_F(MallocShimTest, AlignedAllocMemalignVallocPvalloc) {
  errno = 0;
  EXPECT_EQ(achunk_aligned_alloc(24, 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  void* a = achunk_aligned_alloc(256, 1000);
  EXPECT_TRUE(aligned(a, 256));
  void* m = achunk_memalign(48, 10);  // glibc rounds the alignment up to 64
  EXPECT_TRUE(aligned(m, 64));
  void* v = achunk_valloc(10);
  EXPECT_TRUE(aligned(v, 4096));
  void* pv = achunk_pvalloc(1);
  EXPECT_TRUE(aligned(pv, 4096));
  EXPECT_GE(achunk_malloc_usable_size(pv), 4096u);
  for (void* p : {a, m, v, pv}) achunk_free(p);
}

TEST_F(MallocShimTest, UsableSizeCoversTheRequest) {
  for (size_t n : {size_t{1}, size_t{64}, size_t{1000}, size_t{70000}, size_t{3} << 20}) {
    char* p = static_cast<char*>(achunk_malloc(n));
    const size_t usable = achunk_malloc_usable_size(p);
    EXPECT_GE(usable, n);
    std::memset(p, 1, usable);  // all of it is writable
    achunk_free_sized(p, n);
  }
  EXPECT_EQ(achunk_malloc_usable_size(nullptr), 0u);
}

}  // namespace
