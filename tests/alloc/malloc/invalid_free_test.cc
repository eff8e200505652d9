// Every kind of bad pointer handed to the drop-in free is reported by name and aborts,
// as glibc does, and never faults: the chunk registry is asked before any header is read.
// Also the misreports: a big object's double free, and malloc_usable_size's canary check.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "achunk/achunk.h"
#include "achunk/chunk/achunk_header.h"
#include "achunk/platform/linux_os.h"

namespace {

// The report's regex: "achunk: <kind> of 0x<ptr as 16 hex digits>: <what>".
std::string report(const char* kind, const void* p, const char* what) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "achunk: %s of 0x%016llx: %s", kind,
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)), what);
  return buf;
}

class InvalidFreeDeathTest : public testing::Test {
 protected:
  // Forked, not re-run: the child must see the same addresses to name the same pointer.
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "fast"); }
};

constexpr const char* NOT_OURS = "no chunk of achunk holds it";

alignas(64) char g_static_data[256];

TEST_F(InvalidFreeDeathTest, StaticData) {
  EXPECT_DEATH(achunk_free(g_static_data + 64),
               report("invalid free", g_static_data + 64, NOT_OURS));
}

TEST_F(InvalidFreeDeathTest, Stack) {
  alignas(64) char local[256];
  EXPECT_DEATH(achunk_free(local), report("invalid free", local, NOT_OURS));
}

// A foreign mapping, live or already unmapped, 2 MiB aligned like a chunk would be.
TEST_F(InvalidFreeDeathTest, ForeignMapping) {
  achunk::LinuxOs os;
  int err = 0;
  const int64_t size = 4 * achunk::ACHUNK_ALIGN;
  char* m = static_cast<char*>(os.map_aligned(size, achunk::ACHUNK_ALIGN, &err));
  ASSERT_NE(m, nullptr);
  char* inside = m + achunk::ACHUNK_ALIGN + 4096;
  EXPECT_DEATH(achunk_free(inside), report("invalid free", inside, NOT_OURS));
  EXPECT_DEATH(achunk_free(m + 16), report("invalid free", m + 16, NOT_OURS));
  ASSERT_EQ(os.unmap(m, size), 0);
  EXPECT_DEATH(achunk_free(inside), report("invalid free", inside, NOT_OURS));
  EXPECT_DEATH(achunk_malloc_usable_size(m + 16), report("invalid free", m + 16, NOT_OURS));
}

// The malloc that ran before achunk (here the test binary's own).
TEST_F(InvalidFreeDeathTest, PointerFromAnotherMalloc) {
  void* p = std::malloc(64);
  EXPECT_DEATH(achunk_free(p), report("invalid free", p, NOT_OURS));
  std::free(p);
}

TEST_F(InvalidFreeDeathTest, Unaligned) {
  char* p = static_cast<char*>(achunk_malloc(64));
  EXPECT_DEATH(achunk_free(p + 1), report("invalid free", p + 1, "not 16-byte aligned"));
  achunk_free(p);
}

// A 16-aligned pointer into an object, even where the bytes before it look like a live
// header (a copy of the object's own).
TEST_F(InvalidFreeDeathTest, InsideAnObject) {
  for (size_t size : {size_t{256}, size_t{100000}}) {
    char* p = static_cast<char*>(achunk_malloc(size));
    ASSERT_NE(p, nullptr);
    std::memcpy(p + 24, p - 8, 8);
    EXPECT_DEATH(achunk_free(p + 32),
                 report("invalid free", p + 32, "not the start of an object ob_malloc"));
    achunk_free(p);
  }
}

// A chunk given back to the OS: its header is unmapped and must not be read.
TEST_F(InvalidFreeDeathTest, PointerFromAnUnmappedChunk) {
  char* p = static_cast<char*>(achunk_malloc(size_t{64} << 20));
  ASSERT_NE(p, nullptr);
  achunk_free(p);
  EXPECT_DEATH(achunk_free(p), report("double free", p, "its chunk was freed: already freed"));
  EXPECT_DEATH(achunk_free(p + 4096),
               report("double free", p + 4096, "its chunk was freed: already freed"));
}

TEST_F(InvalidFreeDeathTest, DoubleFreeOfABigObject) {
  for (size_t size : {size_t{1} << 20, size_t{10} << 20}) {
    void* p = achunk_malloc(size);
    ASSERT_NE(p, nullptr);
    achunk_free(p);
    EXPECT_DEATH(achunk_free(p), report("double free", p, "")) << size;
  }
}

// malloc_usable_size's fast path moves the canary to the slot's end: a byte written past
// what it reported is still caught; a freed object is still a double free.
TEST_F(InvalidFreeDeathTest, UsableSizeKeepsOverrunsAndDoubleFreesCaught) {
  char* p = static_cast<char*>(achunk_malloc(100));
  ASSERT_NE(p, nullptr);
  const size_t usable = achunk_malloc_usable_size(p);
  EXPECT_GT(usable, 100u);
  EXPECT_EQ(achunk_malloc_usable_size(p), usable);
  p[usable] = 'x';
  EXPECT_DEATH(achunk_free(p), report("heap corruption", p, "tail canary overwritten"));
  p[usable] = static_cast<char>(0xf8);  // the canary's first byte again
  achunk_free(p);
  EXPECT_DEATH(achunk_malloc_usable_size(p), report("double free", p, ""));
}

TEST_F(InvalidFreeDeathTest, UsableSizeChecksTheCanaryBeforeMovingIt) {
  char* p = static_cast<char*>(achunk_malloc(100));
  ASSERT_NE(p, nullptr);
  std::memset(p, 'x', 108);  // 8 bytes past the end: the canary
  EXPECT_DEATH(achunk_malloc_usable_size(p),
               report("heap corruption", p, "tail canary overwritten"));
  std::memset(p + 100, 0, 8);
}

}  // namespace
