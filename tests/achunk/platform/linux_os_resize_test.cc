// LinuxOs's resizing on the real kernel: a mapping of 4 MiB or more grows and shrinks in
// place inside the address space reserved after it, moves only past that, and moves
// whole even when growing in place has left it two VMAs. The address space the test
// probes or blocks is taken with mmap directly, as another part of the process would.
#include <gtest/gtest.h>
#include <sys/mman.h>

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

}  // namespace
}  // namespace achunk
