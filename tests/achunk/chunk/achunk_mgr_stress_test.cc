// Many threads allocate and free random sizes (normal, large and huge) while another
// thread moves the clock and changes the cache cap; at the end every counter returns
// exactly to zero and the fake OS holds no mapping.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class AChunkMgrStressTest : public ChunkMgrTest {};

TEST_F(AChunkMgrStressTest, RandomSizesAccountingReturnsToZero) {
  os_.set_zero_fill(false);  // thousands of maps up to 29 MiB; only written bytes are read
  mgr_.set_chunk_cache_ttl_ms(5);
  constexpr int THREADS = 4;
  constexpr int OPS = 3000;
  std::atomic<bool> done{false};
  std::thread tuner([&] {
    std::mt19937 rng(7);
    const int64_t caps[] = {0, 2 * MB, 16 * MB, 64 * MB};
    while (!done.load()) {
      clock_.advance_ms(1);
      if (rng() % 64 == 0) mgr_.set_max_chunk_cache_size(caps[rng() % 4], rng() % 2 == 0);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  // Chunks handed between threads exercise frees into other threads' ways.
  std::atomic<AChunk*> mailbox{nullptr};
  for (int t = 0; t < THREADS; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::vector<AChunk*> live;
      for (int i = 0; i < OPS; ++i) {
        if (live.size() < 8 && rng() % 3 != 0) {
          const int64_t kind = rng() % 10;
          const int64_t size = kind < 6   ? 1 + rng() % ACHUNK_SIZE
                               : kind < 9 ? ACHUNK_SIZE + 1 + rng() % (18 * MB)
                                          : 21 * MB + rng() % (8 * MB);
          AChunk* c = mgr_.alloc_chunk(size);
          ASSERT_NE(c, nullptr);
          static_cast<char*>(c->data())[size - 1] = 1;  // the last byte is usable
          live.push_back(c);
        } else if (!live.empty()) {
          const size_t k = rng() % live.size();
          AChunk* c = live[k];
          live[k] = live.back();
          live.pop_back();
          if (rng() % 4 == 0) c = mailbox.exchange(c);
          if (c != nullptr) mgr_.free_chunk(c);
        }
      }
      for (AChunk* c : live) mgr_.free_chunk(c);
    });
  }
  for (auto& w : workers) w.join();
  if (AChunk* c = mailbox.exchange(nullptr)) mgr_.free_chunk(c);
  done.store(true);
  tuner.join();

  EXPECT_EQ(mgr_.get_used(), 0);
  expect_consistent();
  mgr_.sync_wash();
  const ChunkMgrStats s = mgr_.get_stats(false);
  EXPECT_EQ(s.hold, 0);
  EXPECT_EQ(s.total_hold, 0);
  EXPECT_EQ(s.freelists_hold, 0);
  EXPECT_EQ(s.large_freelists_hold, 0);
  EXPECT_EQ(s.total_maps, s.total_unmaps);
  EXPECT_EQ(os_.live_mappings(), 0);
  EXPECT_EQ(os_.bad_unmaps(), 0);
}

}  // namespace
}  // namespace achunk::testing
