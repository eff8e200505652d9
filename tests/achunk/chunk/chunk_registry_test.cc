// The chunk registry: a unit's live bit while its chunk is handed out, the released bit
// after, and addresses outside the covered range. The units used sit at the top of the
// range, where nothing in the test process maps chunks.
#include "achunk/chunk/chunk_registry.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace achunk {
namespace {

using namespace chunk_registry;

const void* unit_addr(uint64_t unit) {
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(unit << UNIT_SHIFT));
}

TEST(ChunkRegistryTest, AddMarksTheWholeUnitLiveAndOnlyIt) {
  const uint64_t unit = UNITS - 3;
  const void* chunk = unit_addr(unit);
  ASSERT_TRUE(covers(chunk));
  EXPECT_FALSE(is_chunk(chunk));
  add(chunk);
  EXPECT_TRUE(is_chunk(chunk));
  EXPECT_TRUE(is_chunk(static_cast<const char*>(chunk) + ACHUNK_ALIGN - 1));  // same unit
  EXPECT_FALSE(is_chunk(unit_addr(unit + 1)));
  EXPECT_FALSE(is_chunk(unit_addr(unit - 1)));
  EXPECT_FALSE(was_released(chunk));
  remove(chunk);
  EXPECT_FALSE(is_chunk(chunk));
}

TEST(ChunkRegistryTest, RemoveMarksReleasedUntilTheUnitIsHandedOutAgain) {
  const void* chunk = unit_addr(UNITS - 5);
  add(chunk);
  remove(chunk);
  EXPECT_FALSE(is_chunk(chunk));
  EXPECT_TRUE(was_released(chunk));
  EXPECT_TRUE(was_released(static_cast<const char*>(chunk) + 4096));
  EXPECT_FALSE(was_released(unit_addr(UNITS - 6)));
  add(chunk);
  EXPECT_TRUE(is_chunk(chunk));
  EXPECT_FALSE(was_released(chunk));
  remove(chunk);
}

TEST(ChunkRegistryTest, NeighbouringUnitsInOneWordAreIndependent) {
  const uint64_t base = UNITS - 128;  // one 64-bit word of the registry, used here only
  for (uint64_t u = base; u < base + 64; u += 2) add(unit_addr(u));
  for (uint64_t u = base; u < base + 64; ++u) EXPECT_EQ(is_chunk(unit_addr(u)), u % 2 == 0) << u;
  for (uint64_t u = base; u < base + 64; u += 2) remove(unit_addr(u));
  for (uint64_t u = base; u < base + 64; ++u) {
    EXPECT_FALSE(is_chunk(unit_addr(u)));
    EXPECT_EQ(was_released(unit_addr(u)), u % 2 == 0) << u;
  }
}

TEST(ChunkRegistryTest, AMarkKeepsTheChunkLiveAndGoesWithItsRemoval) {
  const void* chunk = unit_addr(UNITS - 9);
  const uintptr_t inside = reinterpret_cast<uintptr_t>(chunk) + 4096;
  add(chunk);
  EXPECT_FALSE(is_marked(chunk));
  EXPECT_FALSE(is_marked_in_range(inside));
  mark(chunk);
  EXPECT_TRUE(is_marked(chunk));
  EXPECT_TRUE(is_marked_in_range(inside));
  EXPECT_TRUE(is_chunk(chunk));
  EXPECT_FALSE(is_marked(unit_addr(UNITS - 8)));
  remove(chunk);
  EXPECT_FALSE(is_marked(chunk));
  EXPECT_TRUE(was_released(chunk));
  // Handed out again (to another owner, say), it is live and unmarked.
  add(chunk);
  EXPECT_TRUE(is_chunk(chunk));
  EXPECT_FALSE(is_marked(chunk));
  remove(chunk);
}

TEST(ChunkRegistryTest, MarkingAUnitWithNoLiveChunkLeavesItAsItIs) {
  const void* never = unit_addr(UNITS - 11);
  mark(never);
  EXPECT_FALSE(is_chunk(never));
  EXPECT_FALSE(is_marked(never));
  const void* released = unit_addr(UNITS - 12);
  add(released);
  remove(released);
  mark(released);
  EXPECT_FALSE(is_chunk(released));
  EXPECT_TRUE(was_released(released));
  const uintptr_t top = uintptr_t{1} << ADDRESS_BITS;
  mark(reinterpret_cast<const void*>(top));  // out of range: no write
  EXPECT_FALSE(is_marked(reinterpret_cast<const void*>(top)));
}

TEST(ChunkRegistryTest, AddressesOutOfRangeAreNeverChunks) {
  const uintptr_t top = uintptr_t{1} << ADDRESS_BITS;
  EXPECT_FALSE(covers(reinterpret_cast<const void*>(top)));
  EXPECT_TRUE(covers(reinterpret_cast<const void*>(top - ACHUNK_ALIGN)));
  EXPECT_FALSE(is_chunk(top));
  EXPECT_FALSE(is_chunk(~uintptr_t{0}));
  EXPECT_FALSE(is_chunk(nullptr));
  EXPECT_FALSE(was_released(reinterpret_cast<const void*>(top)));
  EXPECT_FALSE(was_released(reinterpret_cast<const void*>(~uintptr_t{0})));
  // An out-of-range address aliasing a live unit's low bits is still refused.
  const void* chunk = unit_addr(UNITS - 7);
  add(chunk);
  EXPECT_FALSE(is_chunk(reinterpret_cast<uintptr_t>(chunk) | top));
  remove(chunk);
}

}  // namespace
}  // namespace achunk
