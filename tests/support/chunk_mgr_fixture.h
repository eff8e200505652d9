// Test support: an AChunkMgr over the fake OS and fake clock, with helpers to allocate
// chunks of a given mapped size and to check that the accounting adds up.
// Depends on the chunk layer and the fakes.
#pragma once

#include <gtest/gtest.h>

#include "achunk/chunk/achunk_mgr.h"
#include "support/fake_clock.h"
#include "support/fake_os.h"

namespace achunk::testing {

inline constexpr int64_t MB = int64_t{1} << 20;

// Payload size whose chunk maps exactly `mb` MiB (mb even).
inline int64_t payload_for_mb(int64_t mb) {
  return mb * MB - ACHUNK_HEADER_SIZE;
}

class ChunkMgrTest : public ::testing::Test {
 protected:
  AChunk* alloc_mb(int64_t mb) { return mgr_.alloc_chunk(payload_for_mb(mb)); }
  AChunk* alloc_normal() { return mgr_.alloc_chunk(ACHUNK_SIZE); }

  int64_t total_cached() const {
    int64_t n = 0;
    for (int i = 0; i < AChunkMgr::CACHEABLE_SLOTS; ++i) n += mgr_.cached_count(i);
    return n;
  }

  // Every counter agrees with the fake OS and with the slots.
  void expect_consistent() const {
    const ChunkMgrStats s = mgr_.get_stats(false);
    EXPECT_EQ(s.total_hold, os_.mapped_bytes());
    EXPECT_EQ(s.total_maps - s.total_unmaps, os_.live_mappings());
    int64_t slot_hold = 0;
    for (const ChunkSlotStats& line : s.slots) slot_hold += line.hold;
    EXPECT_EQ(s.freelists_hold, slot_hold);
    EXPECT_GE(s.used, 0);
    EXPECT_LE(s.hold, s.total_hold);
    EXPECT_EQ(os_.bad_unmaps(), 0);
  }

  FakeOs os_;
  FakeClock clock_;
  AChunkMgr mgr_{os_, clock_};
};

}  // namespace achunk::testing
