// ob_malloc's realloc over a fake OS: in place within a slot or span, the headroom of a
// moved big object, growth down into the free span before it, what a shrink gives back,
// limits, and the canary checked before anything moves.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "achunk/base/error_report.h"
#include "alloc/object/ob_malloc_fixture.h"
#include "alloc/object/object_check.h"

namespace achunk::testing {
namespace {

TEST_F(ObMallocTest, ReallocKeepsContents) {
  const ObMemAttr attr(TENANT, "t_realloc");
  char* p = static_cast<char*>(alloc_->realloc(nullptr, 10, attr));
  std::memcpy(p, "0123456789", 10);
  char* q = static_cast<char*>(alloc_->realloc(p, 12, attr));  // same 32-byte slot
  EXPECT_EQ(q, p);
  EXPECT_EQ(ObMallocAllocator::get_size(q), 12);
  char* r = static_cast<char*>(alloc_->realloc(q, 100000, attr));
  EXPECT_EQ(std::memcmp(r, "0123456789", 10), 0);
  char* s = static_cast<char*>(alloc_->realloc(r, 5, attr));
  EXPECT_EQ(std::memcmp(s, "01234", 5), 0);
  EXPECT_EQ(alloc_->realloc(s, 0, attr), nullptr);  // frees
}

// A big object that realloc moves to grow gets a quarter more span: the next growth
// steps happen in place instead of copying the whole buffer each time.
TEST_F(ObMallocTest, ReallocGrowingABigObjectLeavesRoomToGrowInPlace) {
  const ObMemAttr attr(TENANT, "t_realloc_room");
  char* p = static_cast<char*>(alloc_->alloc(1000, attr));
  std::memset(p, 7, 1000);
  char* q = static_cast<char*>(alloc_->realloc(p, 100000, attr));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(ObMallocAllocator::get_size(q), 100000);
  EXPECT_GE(ObjectSet::usable_size(q), 125000);
  char* r = static_cast<char*>(alloc_->realloc(q, 120000, attr));
  EXPECT_EQ(r, q);
  EXPECT_EQ(ObMallocAllocator::get_size(r), 120000);
  EXPECT_EQ(r[999], 7);
  // Shrinking or growing a small object never adds any.
  char* s = static_cast<char*>(alloc_->realloc(r, 2000, attr));
  EXPECT_EQ(ObMallocAllocator::get_size(s), 2000);
  ObMallocAllocator::free(s);
}

// The headroom is dropped, not the realloc, when a limit leaves room for the size alone.
TEST_F(ObMallocTest, ReallocUnderALimitWithoutRoomForHeadroomStillSucceeds) {
  const ObMemAttr attr(TENANT, "t_realloc_limit");
  ASSERT_TRUE(alloc_->set_tenant_ctx_limit(TENANT, DEFAULT_CTX_ID, 4 * MB));
  void* p = alloc_->alloc(1000, attr);            // a slab: one chunk
  const int64_t size = ACHUNK_SIZE - 256 * 1024;  // one more chunk; with a quarter, two
  void* q = alloc_->realloc(p, size, attr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(ObMallocAllocator::get_size(q), size);
  EXPECT_LE(ta().hold(), 4 * MB);
  ObMallocAllocator::free(q);
}

// A big object that cannot grow forward grows down into the free span before it: it
// moves there with its bytes, no memory is taken, and its span is trimmed to an eighth
// over the size, the rest left free after it for the next buffer to grow into.
TEST_F(ObMallocTest, ReallocGrowsABigObjectDownIntoTheFreeSpanBeforeIt) {
  const ObMemAttr attr(TENANT, "t_realloc_back");
  auto blocks = [](int64_t size) { return (16 + size + 8 + ABLOCK_SIZE - 1) / ABLOCK_SIZE; };
  char* a = static_cast<char*>(alloc_->alloc(400000, attr));
  char* b = static_cast<char*>(alloc_->alloc(100000, attr));
  char* c = static_cast<char*>(alloc_->alloc(100000, attr));  // b cannot grow forward
  ASSERT_EQ(b, a + blocks(400000) * ABLOCK_SIZE);
  ASSERT_EQ(c, b + blocks(100000) * ABLOCK_SIZE);
  for (int i = 0; i < 100000; ++i) b[i] = static_cast<char>(i % 251);
  ObMallocAllocator::free(a);
  const int64_t hold = ta().hold();
  const int64_t spans = ta().object_set().span_used();
  char* q = static_cast<char*>(alloc_->realloc(b, 200000, attr));
  ASSERT_EQ(q, a);  // a's span, now the start of q's
  EXPECT_EQ(ObMallocAllocator::get_size(q), 200000);
  bool same = true;
  for (int i = 0; i < 100000; ++i) same = same && q[i] == static_cast<char>(i % 251);
  EXPECT_TRUE(same) << "the bytes did not move with the object";
  EXPECT_EQ(ta().hold(), hold);
  // Trimmed to an eighth more than asked; the rest of a's span and b's is free.
  const int64_t kept = blocks(200000 + 200000 / 8);
  EXPECT_EQ(ObjectSet::usable_size(q), kept * ABLOCK_SIZE - 24);
  EXPECT_EQ(ta().object_set().span_used(), spans + (kept - blocks(100000)) * ABLOCK_SIZE);
  std::memset(q, 1, 200000);
  // That rest is one free span right after q: a span of exactly its length lands there.
  const int64_t rest = blocks(400000) + blocks(100000) - kept;
  char* d = static_cast<char*>(alloc_->alloc(rest * ABLOCK_SIZE - 24, attr));
  EXPECT_EQ(d, q + kept * ABLOCK_SIZE);
  for (char* p : {q, c, d}) ObMallocAllocator::free(p);
}

// A shrunk big object gives back the blocks past its new size, in place, as glibc's split
// does; a later growth takes them back in place while they are free. A packet buffer
// shrunk to 16 KiB after each request stays where it is, so it is never copied.
TEST_F(ObMallocTest, ReallocShrinkingABigObjectGivesBackItsBlocksInPlace) {
  const ObMemAttr attr(TENANT, "t_realloc_shrink");
  auto blocks = [](int64_t size) { return (16 + size + 8 + ABLOCK_SIZE - 1) / ABLOCK_SIZE; };
  char* big = static_cast<char*>(alloc_->alloc(500000, attr));
  for (int i = 0; i < 500000; ++i) big[i] = static_cast<char>(i % 253);
  const int64_t spans = ta().object_set().span_used();
  EXPECT_EQ(alloc_->realloc(big, 200000, attr), big);
  EXPECT_EQ(ta().object_set().span_used(), spans - (blocks(500000) - blocks(200000)) * ABLOCK_SIZE);
  EXPECT_EQ(alloc_->realloc(big, 16384, attr), big);  // fits a slot, but its span is as small
  EXPECT_EQ(ta().object_set().span_used(), spans - (blocks(500000) - blocks(16384)) * ABLOCK_SIZE);
  bool same = true;
  for (int i = 0; i < 16384; ++i) same = same && big[i] == static_cast<char>(i % 253);
  EXPECT_TRUE(same);
  EXPECT_EQ(alloc_->realloc(big, 400000, attr), big);  // the freed blocks, taken back
  EXPECT_EQ(ta().object_set().span_used(), spans - (blocks(500000) - blocks(400000)) * ABLOCK_SIZE);
  ObMallocAllocator::free(big);
}

// A shrink that in place would hold more than twice the slot of its new size moves to
// that slot, as jemalloc's and mimalloc's do: a buffer built large and shrunk to fit, or
// resized up and down, holds what it asked for, not its largest size. A shrink within
// that stays, and so does one of a dedicated chunk (its mapping is kept, above).
TEST_F(ObMallocTest, ReallocShrinkingFarBelowItsSlotMovesToASmallerOne) {
  const ObMemAttr attr(TENANT, "t_realloc_shrink_move");
  auto filled = [&](int64_t size) {
    char* p = static_cast<char*>(alloc_->alloc(size, attr));
    for (int64_t i = 0; i < size; ++i) p[i] = static_cast<char>(i % 251);
    return p;
  };
  auto intact = [](const char* p, int64_t size) {
    bool same = true;
    for (int64_t i = 0; i < size; ++i) same = same && p[i] == static_cast<char>(i % 251);
    return same;
  };
  // A 1 KiB slot: 600 bytes still need a 640-byte one, 100 a 128-byte one.
  char* p = filled(1000);
  EXPECT_EQ(alloc_->realloc(p, 600, attr), p);
  char* q = static_cast<char*>(alloc_->realloc(p, 100, attr));
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  EXPECT_TRUE(intact(q, 100));
  EXPECT_EQ(ObMallocAllocator::get_size(q), 100);
  EXPECT_EQ(ObMallocAllocator::usable_size(q), 128 - AOBJECT_META_SIZE);
  EXPECT_EQ(header_state(load_header(p)), ObjectState::FREE);  // the old slot went back
  ObMallocAllocator::free(q);
  // A big object shrunk to a few KiB leaves its span for a slot.
  char* big = filled(300000);
  const int64_t spans = ta().object_set().span_used();
  char* small = static_cast<char*>(alloc_->realloc(big, 3000, attr));
  ASSERT_NE(small, nullptr);
  EXPECT_NE(small, big);
  EXPECT_TRUE(intact(small, 3000));
  EXPECT_LT(ObMallocAllocator::usable_size(small), 4096);
  EXPECT_LT(ta().object_set().span_used(), spans);
  ObMallocAllocator::free(small);
  // A dedicated chunk's object stays whatever it shrinks to.
  char* huge = static_cast<char*>(alloc_->alloc(3 * MB, attr));
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(alloc_->realloc(huge, 100, attr), huge);
  ObMallocAllocator::free(huge);
}

// A shrink never fails: with no room under its limit for the smaller copy, the object
// shrinks in place, and the thread's last failure is still the caller's own.
TEST_F(ObMallocTest, AShrinkWithoutRoomToMoveStaysInPlace) {
  const ObMemAttr attr(TENANT, "t_realloc_shrink_limit");
  ASSERT_TRUE(alloc_->set_tenant_ctx_limit(TENANT, DEFAULT_CTX_ID, 4 * MB));
  // Two objects of a whole chunk's blocks each: the limit is reached, no block is free.
  const int64_t whole = BLOCKS_PER_CHUNK * ABLOCK_SIZE - 64;
  char* a = static_cast<char*>(alloc_->alloc(whole, attr));
  char* b = static_cast<char*>(alloc_->alloc(whole, attr));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::memset(a, 5, 100);
  EXPECT_EQ(alloc_->alloc(-1, attr), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE);
  EXPECT_EQ(alloc_->realloc(a, 100, attr), a);
  EXPECT_EQ(ObMallocAllocator::get_size(a), 100);
  EXPECT_EQ(a[99], 5);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::INVALID_SIZE);
  EXPECT_LE(ta().hold(), 4 * MB);
  ObMallocAllocator::free(a);
  ObMallocAllocator::free(b);
}

// A big object in a chunk of its own grows with its mapping (mremap), as glibc's mmapped
// chunks do: no new chunk, no copy, its bytes and label kept, the ctx charged for what it
// holds. A limit in the way fails the realloc and keeps the object. A shrink keeps the
// mapping's tail until it has idled for the span idle time.
TEST_F(ObMallocTest, ReallocResizesADedicatedChunkWithoutACopy) {
  const ObMemAttr attr(TENANT, "t_realloc_dedicated");
  const int64_t size = 3 * MB;
  char* p = static_cast<char*>(alloc_->alloc(size, attr));
  ASSERT_NE(p, nullptr);
  for (int64_t i = 0; i < size; i += 4096) p[i] = static_cast<char>(i / 4096);
  const int64_t hold = ta().hold();
  const int64_t maps = os_.map_calls();
  char* q = static_cast<char*>(alloc_->realloc(p, 40 * MB, attr));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(os_.map_calls(), maps);  // the mapping grew: nothing new, nothing copied
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(mgr_.get_stats(false).live_resizes, 1);
  EXPECT_EQ(ObMallocAllocator::get_size(q), 40 * MB);
  bool same = true;
  for (int64_t i = 0; i < size; i += 4096) same = same && q[i] == static_cast<char>(i / 4096);
  EXPECT_TRUE(same);
  std::memset(q + size, 1, 37 * MB);  // all of it usable, the canary after it intact
  EXPECT_EQ(ta().hold(), hold + 37 * MB);
  // Growth within the mapping's last 2 MiB needs no syscall at all.
  char* r = static_cast<char*>(alloc_->realloc(q, 41 * MB, attr));
  EXPECT_EQ(r, q);
  EXPECT_EQ(os_.resize_calls(), 1);
  // Over the ctx limit: nullptr with the reason, the object as it was.
  ASSERT_TRUE(alloc_->set_tenant_ctx_limit(TENANT, DEFAULT_CTX_ID, 64 * MB));
  EXPECT_EQ(alloc_->realloc(r, 100 * MB, attr), nullptr);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::CTX_LIMIT);
  EXPECT_EQ(ObMallocAllocator::get_size(r), 41 * MB);
  EXPECT_EQ(r[4096], 1);
  // A shrink keeps the mapping: no syscall, the ctx charged for the request only.
  const int64_t mapped = AChunk::ptr2chunk(r)->aligned();
  const int64_t mgr_hold = mgr_.get_hold();
  char* s = static_cast<char*>(alloc_->realloc(r, 5 * MB, attr));
  ASSERT_EQ(s, r);
  EXPECT_EQ(os_.resize_calls(), 1);
  EXPECT_EQ(ObMallocAllocator::get_size(s), 5 * MB);
  EXPECT_EQ(ObMallocAllocator::usable_size(s), 5 * MB);  // never the kept tail
  EXPECT_EQ(s[4096], 1);
  EXPECT_EQ(AChunk::ptr2chunk(s)->aligned(), mapped);
  EXPECT_EQ(ta().hold(), hold + 2 * MB);
  EXPECT_EQ(mgr_.get_hold(), mgr_hold);  // its touched pages are still there
  EXPECT_EQ(ta().object_set().slack_chunks(), 1);
  // Growing back into it is free; each resize restarts the tail's idle time.
  EXPECT_EQ(alloc_->realloc(s, 30 * MB, attr), s);
  EXPECT_EQ(alloc_->realloc(s, 5 * MB, attr), s);
  EXPECT_EQ(os_.resize_calls(), 1);
  // Idle for less than the span idle time: kept. Then the next look unmaps it, in place.
  clock_.advance_us(SPAN_IDLE_US / 2);
  EXPECT_EQ(alloc_->wash_stale_spans(SPAN_IDLE_US), 0);
  EXPECT_EQ(AChunk::ptr2chunk(s)->aligned(), mapped);
  clock_.advance_us(SPAN_IDLE_US / 2);
  const AChunk* chunk = AChunk::ptr2chunk(s);
  const int64_t charged = chunk->charged();
  const int64_t tail = mapped - chunk_aligned_size(5 * MB + BIG_OBJECT_OFFSET + AOBJECT_TAIL_SIZE);
  // The whole units past the request unmapped, the pages of its last unit past it released.
  const int64_t pages_past =
      mapped - tail - align_up(chunk->alloc_bytes_ + ACHUNK_HEADER_SIZE, ACHUNK_PAGE_SIZE);
  EXPECT_EQ(alloc_->wash_stale_spans(SPAN_IDLE_US), tail + pages_past);
  EXPECT_EQ(os_.resize_calls(), 2);
  EXPECT_EQ(AChunk::ptr2chunk(s)->aligned(), mapped - tail);
  EXPECT_EQ(mgr_.get_stats(false).slack_trims, 1);
  EXPECT_EQ(ta().object_set().slack_chunks(), 0);
  // The chunk layer now charges the request's pages, as the ctx does.
  EXPECT_EQ(mgr_.get_hold(), mgr_hold - (charged - chunk->hold()));
  EXPECT_EQ(ta().hold(), hold + 2 * MB);
  EXPECT_EQ(s[4096], 1);
  EXPECT_EQ(ObMallocAllocator::get_size(s), 5 * MB);
  ObMallocAllocator::free(s);
  EXPECT_EQ(ta().hold(), hold - chunk_hold_size(size + BIG_OBJECT_OFFSET + AOBJECT_TAIL_SIZE));
}

// The washer trims a shrunk chunk's idle tail (trim_chunk, under the shard's lock) while
// its owner shrinks and grows it again: the owner reads the mapped size under that lock
// too. Under TSan this reports the race trim_big had, a read of it outside the lock.
TEST_F(ObMallocTest, AShrinkRacingTheWasherReadsTheMappedSizeUnderTheLock) {
  const ObMemAttr attr(TENANT, "t_realloc_trim_race");
  char* p = static_cast<char*>(alloc_->alloc(20 * MB, attr));
  ASSERT_NE(p, nullptr);
  p[0] = 7;
  std::atomic<bool> done{false};
  std::thread washer([&] {
    while (!done.load(std::memory_order_relaxed)) alloc_->wash_stale_spans(0);
  });
  bool ok = true;
  // Until the washer has trimmed tails in between too, however the threads are scheduled.
  const auto trims = [&] { return mgr_.get_stats(false).slack_trims; };
  for (int round = 0; ok && (round < 300 || trims() < 20) && round < 1000000; ++round) {
    char* q = static_cast<char*>(alloc_->realloc(p, 12 * MB, attr));  // keeps its units
    if (q != nullptr) q = static_cast<char*>(alloc_->realloc(q, 5 * MB, attr));
    if (q != nullptr) q = static_cast<char*>(alloc_->realloc(q, 20 * MB, attr));
    ok = q != nullptr && q[0] == 7;
    if (q != nullptr) p = q;
  }
  done.store(true, std::memory_order_relaxed);
  washer.join();
  EXPECT_TRUE(ok);
  EXPECT_GE(trims(), 20);
  EXPECT_EQ(ObMallocAllocator::get_size(p), 20 * MB);
  ObMallocAllocator::free(p);
  EXPECT_EQ(ta().object_set().slack_chunks(), 0);
}

// A usage scan runs under the shard locks while another thread grows objects down: the
// object is valid at its new start before the lock goes, so a scan between the move and
// the end of the realloc counts it (under its label and a size it had), not the stale
// header of the freed object whose span it took.
TEST_F(ObMallocTest, AUsageScanDuringGrowDownsCountsTheMovingObject) {
  const ObMemAttr attr(TENANT, "t_realloc_scan");
  const ObMemAttr other(TENANT, "t_realloc_gone");
  constexpr int64_t BIG = 600000;
  constexpr int64_t GROWN = 700000;
  constexpr int64_t SMALL = 100000;
  std::atomic<int> phase{0};  // odd: a freed, b (or q) and c live
  std::thread grower([&] {
    for (int round = 0; round < 200; ++round) {
      char* a = static_cast<char*>(alloc_->alloc(BIG, other));
      char* b = static_cast<char*>(alloc_->alloc(BIG, attr));
      char* c = static_cast<char*>(alloc_->alloc(SMALL, attr));
      std::memset(b, round & 0x7f, BIG);
      ObMallocAllocator::free(a);
      phase.store(2 * round + 1);
      char* q = static_cast<char*>(alloc_->realloc(b, GROWN, attr));
      EXPECT_EQ(q, a);  // grown down into a's span (a failed realloc crashes the test)
      EXPECT_EQ(q[BIG - 1], round & 0x7f);
      phase.store(2 * round + 2);
      ObMallocAllocator::free(q);
      ObMallocAllocator::free(c);
    }
    alloc_->flush_thread_caches();
  });
  for (int before = phase.load(); before < 400; before = phase.load()) {
    const LabelUsage u = usage_of("t_realloc_scan");
    if (before % 2 == 1 && phase.load() == before) {
      EXPECT_EQ(u.count, 2);
      EXPECT_TRUE(u.used == BIG + SMALL || u.used == GROWN + SMALL) << u.used;
    }
  }
  grower.join();
  EXPECT_EQ(usage_of("t_realloc_scan").count, 0);
}

struct Reports {
  static inline std::vector<std::string> lines;
  static void handler(ErrorKind kind, const void*, const char* message) {
    if (kind == ErrorKind::CORRUPTION) lines.emplace_back(message);
  }
};

// An overrun is reported by the realloc that would move the canary or the object, which
// then fails and leaves the object as it was, small or big, in place or not.
TEST_F(ObMallocTest, ReallocReportsAnOverwrittenCanaryBeforeMovingIt) {
  Reports::lines.clear();
  ErrorHandler previous = set_error_handler(&Reports::handler);
  const ObMemAttr attr(TENANT, "t_realloc_canary");
  char* small = static_cast<char*>(alloc_->alloc(40, attr));
  char* before = static_cast<char*>(alloc_->alloc(100000, attr));
  char* big = static_cast<char*>(alloc_->alloc(100000, attr));
  char* after = static_cast<char*>(alloc_->alloc(100000, attr));
  ObMallocAllocator::free(before);  // room to grow down into
  small[40] ^= 1;
  big[100000] ^= 1;
  EXPECT_EQ(alloc_->realloc(small, 44, attr), nullptr);    // same slot: in place
  EXPECT_EQ(alloc_->realloc(big, 120000, attr), nullptr);  // forward blocked: down
  ASSERT_EQ(Reports::lines.size(), 2u);
  EXPECT_NE(Reports::lines[0].find("size=40"), std::string::npos) << Reports::lines[0];
  EXPECT_NE(Reports::lines[1].find("size=100000"), std::string::npos) << Reports::lines[1];
  EXPECT_EQ(ObMallocAllocator::get_size(small), 40);
  EXPECT_EQ(ObMallocAllocator::get_size(big), 100000);
  write_tail(small, 40);
  write_tail(big, 100000);
  for (char* p : {small, big, after}) ObMallocAllocator::free(p);
  EXPECT_EQ(Reports::lines.size(), 2u);
  set_error_handler(previous);
}

// A small object's realloc resizes or moves it with the free's fast checks, and leaves
// anything else to the full path: a freed object and an interior pointer are reported
// whatever the size asked (within the slot, past it, far below it) and change nothing;
// a live one keeps its label and contents in place, moved up and moved down.
TEST_F(ObMallocTest, ReallocOfASmallObjectChecksItAsAFreeDoes) {
  const ObMemAttr attr(TENANT, "t_realloc_small");
  char* p = static_cast<char*>(alloc_->alloc(100, attr));
  char* freed = static_cast<char*>(alloc_->alloc(100, attr));
  ASSERT_NE(p, nullptr);
  ASSERT_NE(freed, nullptr);
  std::memset(p, 0x11, 100);
  ObMallocAllocator::free(freed);
  Captured::reports.clear();
  ErrorHandler previous = set_error_handler(&Captured::handler);
  for (int64_t size : {int64_t{104}, int64_t{2000}, int64_t{8}}) {
    EXPECT_EQ(alloc_->realloc(freed, size, attr), nullptr) << size;
    EXPECT_EQ(alloc_->realloc(p + 16, size, attr), nullptr) << size;
  }
  set_error_handler(previous);
  ASSERT_EQ(Captured::reports.size(), 6u);
  for (size_t i = 0; i < 6; i += 2) {
    EXPECT_EQ(Captured::reports[i].first, ErrorKind::DOUBLE_FREE) << i;
    EXPECT_EQ(Captured::reports[i + 1].first, ErrorKind::INVALID_FREE) << i;
  }
  EXPECT_EQ(ObMallocAllocator::get_size(p), 100);
  EXPECT_EQ(usage_of("t_realloc_small").count, 1);

  char* q = static_cast<char*>(alloc_->realloc(p, 104, attr));  // its 128-byte slot
  EXPECT_EQ(q, p);
  EXPECT_EQ(ObMallocAllocator::get_size(q), 104);
  std::memset(q + 100, 0x11, 4);
  q = static_cast<char*>(alloc_->realloc(q, 2000, attr));  // past it: moved
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  for (int i = 0; i < 104; ++i) ASSERT_EQ(q[i], 0x11) << i;
  q = static_cast<char*>(alloc_->realloc(q, 1900, attr));  // a little below: in place
  EXPECT_EQ(ObMallocAllocator::get_size(q), 1900);
  char* r = static_cast<char*>(alloc_->realloc(q, 40, attr));  // far below: moved
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r, q);
  for (int i = 0; i < 40; ++i) ASSERT_EQ(r[i], 0x11) << i;
  EXPECT_EQ(usage_of("t_realloc_small").count, 1);
  EXPECT_EQ(usage_of("t_realloc_small").used, 40);
  ObMallocAllocator::free(r);
  EXPECT_EQ(usage_of("t_realloc_small").count, 0);
}

}  // namespace
}  // namespace achunk::testing
