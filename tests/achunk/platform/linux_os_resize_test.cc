// LinuxOs's resizing on the real kernel: a mapping of 4 MiB or more grows and shrinks in
// place inside the address space reserved after it, moves only past that, and moves
// whole even when growing in place has left it two VMAs. The address space the test
// probes or blocks is taken with mmap directly, as another part of the process would.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "achunk/chunk/achunk_header.h"
#include "achunk/platform/linux_os.h"

namespace achunk {
namespace {

constexpr int64_t MIB = int64_t{1} << 20;
constexpr int64_t PAGE = 4096;

// Whether nothing is mapped in [p, p+size).
bool range_free(char* p, int64_t size) {
  void* q = ::mmap(p, static_cast<size_t>(size), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (q == MAP_FAILED) return false;
  ::munmap(q, static_cast<size_t>(size));
  return q == p;
}

// Maps a page at p unless something is there already; returns it to unmap, or nullptr.
char* block_at(char* p) {
  void* q = ::mmap(p, PAGE, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (q == p) return p;
  if (q != MAP_FAILED) ::munmap(q, PAGE);
  return nullptr;
}

// One byte per page in [from, to), from a pattern that says where it was written.
void fill(char* p, int64_t from, int64_t to) {
  for (int64_t off = from; off < to; off += PAGE) p[off] = static_cast<char>(off / PAGE % 251 + 1);
}
bool intact(const char* p, int64_t from, int64_t to) {
  for (int64_t off = from; off < to; off += PAGE) {
    if (p[off] != static_cast<char>(off / PAGE % 251 + 1)) return false;
  }
  return true;
}

class LinuxOsResizeTest : public ::testing::Test {
 protected:
  char* resize(char* p, int64_t from, int64_t to) {
    int err = 0;
    char* q = static_cast<char*>(os_.resize_aligned(p, from, to, ACHUNK_ALIGN, &err));
    EXPECT_NE(q, nullptr) << std::strerror(err);
    if (q != nullptr) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % ACHUNK_ALIGN, 0u);
    }
    return q;
  }

  LinuxOs os_;
};

TEST_F(LinuxOsResizeTest, GrowsAndShrinksInPlaceInsideItsReservation) {
  int err = 0;
  char* p = static_cast<char*>(os_.map_aligned(6 * MIB, ACHUNK_ALIGN, &err));
  ASSERT_NE(p, nullptr) << std::strerror(err);
  EXPECT_FALSE(range_free(p + 6 * MIB, 26 * MIB));  // reserved up to 32 MiB
  fill(p, 0, 6 * MIB);
  ASSERT_EQ(resize(p, 6 * MIB, 20 * MIB), p);
  EXPECT_TRUE(intact(p, 0, 6 * MIB));
  EXPECT_EQ(p[20 * MIB - 1], 0);  // the grown part: zeroed and writable
  fill(p, 6 * MIB, 20 * MIB);
  ASSERT_EQ(resize(p, 20 * MIB, 32 * MIB), p);
  EXPECT_TRUE(intact(p, 0, 20 * MIB));
  // A shrink gives the tail's pages back and keeps its address space.
  ASSERT_EQ(resize(p, 32 * MIB, 6 * MIB), p);
  EXPECT_TRUE(intact(p, 0, 6 * MIB));
  EXPECT_EQ(os_.resident_bytes(p + 6 * MIB, 26 * MIB), 0);
  EXPECT_FALSE(range_free(p + 6 * MIB, 26 * MIB));
  ASSERT_EQ(resize(p, 6 * MIB, 12 * MIB), p);
  EXPECT_EQ(p[10 * MIB], 0);  // what the shrink gave back reads as zero
  EXPECT_EQ(os_.unmap(p, 12 * MIB), 0);
  EXPECT_TRUE(range_free(p, 32 * MIB));  // the reservation went with it
}

TEST_F(LinuxOsResizeTest, AShrinkBelowFourMiBGivesTheReservationBack) {
  int err = 0;
  char* p = static_cast<char*>(os_.map_aligned(8 * MIB, ACHUNK_ALIGN, &err));
  ASSERT_NE(p, nullptr) << std::strerror(err);
  fill(p, 0, 8 * MIB);
  ASSERT_EQ(resize(p, 8 * MIB, 2 * MIB), p);
  EXPECT_TRUE(intact(p, 0, 2 * MIB));
  EXPECT_TRUE(range_free(p + 2 * MIB, 30 * MIB));
  EXPECT_EQ(os_.unmap(p, 2 * MIB), 0);
}

// Past the reservation with its end taken: the mapping moves. Grown in place after the
// move it is two VMAs (the moved pages keep their old page offset), and it moves again
// whole, every byte kept, leaving no address space behind.
TEST_F(LinuxOsResizeTest, MovesPastATakenEndEvenWhenTwoVmas) {
  int err = 0;
  char* p = static_cast<char*>(os_.map_aligned(6 * MIB, ACHUNK_ALIGN, &err));
  ASSERT_NE(p, nullptr) << std::strerror(err);
  fill(p, 0, 6 * MIB);
  char* block1 = block_at(p + 32 * MIB);
  char* q = resize(p, 6 * MIB, 40 * MIB);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  EXPECT_TRUE(intact(q, 0, 6 * MIB));
  EXPECT_TRUE(range_free(p, 32 * MIB));  // the old span went
  fill(q, 6 * MIB, 40 * MIB);
  ASSERT_EQ(resize(q, 40 * MIB, 48 * MIB), q);  // in place, inside its 64 MiB
  fill(q, 40 * MIB, 48 * MIB);
  char* block2 = block_at(q + 64 * MIB);
  char* r = resize(q, 48 * MIB, 80 * MIB);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r, q);
  EXPECT_TRUE(intact(r, 0, 48 * MIB));
  EXPECT_EQ(r[80 * MIB - 1], 0);
  EXPECT_TRUE(range_free(q, 64 * MIB));
  EXPECT_EQ(os_.unmap(r, 80 * MIB), 0);
  EXPECT_TRUE(range_free(r, 128 * MIB));
  for (char* b : {block1, block2}) {
    if (b != nullptr) ::munmap(b, PAGE);
  }
}

// unmap_head leaves the rest as a mapping of its own size would be: its reservation
// ends where reserved_size of that size says, whether the whole one ended after that (a
// long head: the surplus goes) or before it (a short head: it is extended), so the
// rest's own unmap takes exactly its address space, no more and no less.
TEST_F(LinuxOsResizeTest, UnmapHeadLeavesTheRestAsAMappingOfItsOwnSize) {
  struct Case {
    int64_t head, size;
  };
  // 62 + 6 MiB spans 128 MiB, 6 MiB alone 32: the surplus after the rest goes. 2 + 6 MiB
  // spans 32 MiB, ending 2 MiB before the rest's own 32: those are reserved.
  for (const Case c : {Case{62 * MIB, 6 * MIB}, Case{2 * MIB, 6 * MIB}, Case{6 * MIB, 2 * MIB}}) {
    int err = 0;
    char* p = static_cast<char*>(os_.map_aligned(c.head + c.size, ACHUNK_ALIGN, &err));
    ASSERT_NE(p, nullptr) << std::strerror(err);
    char* rest = p + c.head;
    fill(rest, 0, c.size);
    ASSERT_EQ(os_.unmap_head(p, c.head, c.size), 0);
    EXPECT_TRUE(range_free(p, c.head));
    EXPECT_TRUE(intact(rest, 0, c.size));
    // What a mapping of n bytes spans, its reservation included (LinuxOs's rule).
    auto spans = [](int64_t n) {
      return n < 4 * MIB     ? n
             : n <= 32 * MIB ? 32 * MIB
                             : int64_t{1} << (64 - __builtin_clzll(n - 1));
    };
    const int64_t span = spans(c.size);
    if (span > c.size) {
      EXPECT_FALSE(range_free(rest + c.size, span - c.size));  // still reserved
    }
    ASSERT_EQ(os_.unmap(rest, c.size), 0);
    // The rest's unmap took all of what is left: nothing stays reserved up to either end.
    const int64_t end = std::max(spans(c.head + c.size), c.head + span);
    EXPECT_TRUE(range_free(p, end)) << c.head << " " << c.size;
  }
}

// A short head whose rest's reservation would run into another mapping is refused, the
// mapping left as it was.
TEST_F(LinuxOsResizeTest, UnmapHeadRefusesWhenTheRestsReservationIsTaken) {
  int err = 0;
  char* p = static_cast<char*>(os_.map_aligned(8 * MIB, ACHUNK_ALIGN, &err));
  ASSERT_NE(p, nullptr) << std::strerror(err);
  // Reserved to p + 32 MiB; the rest's own would reach p + 2 + 32 MiB.
  char* blocker = block_at(p + 32 * MIB);
  if (blocker == nullptr) {
    os_.unmap(p, 8 * MIB);
    GTEST_SKIP() << "the address space after the reservation is taken";
  }
  fill(p, 0, 8 * MIB);
  EXPECT_EQ(os_.unmap_head(p, 2 * MIB, 6 * MIB), ENOMEM);
  EXPECT_TRUE(intact(p, 0, 8 * MIB));
  EXPECT_TRUE(range_free(p + 32 * MIB + PAGE, 2 * MIB - PAGE));  // nothing left reserved there
  ::munmap(blocker, PAGE);
  ASSERT_EQ(os_.unmap(p, 8 * MIB), 0);
  EXPECT_TRUE(range_free(p, 32 * MIB));
}

}  // namespace
}  // namespace achunk
