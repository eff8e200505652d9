#include "alloc/object/object_set.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "alloc/object/label.h"
#include "alloc/object/size_class.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

TEST(SizeClassTest, EveryRequestGetsTheSmallestSlotThatFits) {
  for (int64_t size = 1; size <= SMALL_OBJECT_MAX; ++size) {
    const int sc = size_class_of(size);
    ASSERT_GE(sc, 0);
    ASSERT_LT(sc, SIZE_CLASS_COUNT);
    ASSERT_GE(class_slot_size(sc), size + AOBJECT_META_SIZE) << size;
    if (sc > 0) {
      ASSERT_LT(class_slot_size(sc - 1), size + AOBJECT_META_SIZE) << size;
    }
    ASSERT_EQ(class_slot_size(sc) % 16, 0);
    ASSERT_EQ(sc, size_class_compute(size)) << size;  // the table agrees with the formula
    ASSERT_EQ(class_slot_size(sc), class_slot_formula(sc));
  }
  EXPECT_EQ(size_class_of(0), 0);
  EXPECT_EQ(class_slot_size(size_class_of(64)), 80);  // 64 B objects: 25% meta
}

class ObjectSetTest : public ChunkMgrTest {
 protected:
  DirectChunkSource source_{mgr_};
};

TEST_F(ObjectSetTest, SmallObjectsAreAlignedWithHeaderAndTail) {
  ObjectSet set(source_);
  const uint16_t label = label_id("t_small");
  std::vector<void*> ptrs;
  for (int64_t size : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{64}, int64_t{100},
                       int64_t{1000}, int64_t{5000}, SMALL_OBJECT_MAX}) {
    void* p = set.alloc(size, label);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << size;
    const uint64_t h = load_header(p);
    EXPECT_EQ(header_state(h), ObjectState::IN_USE);
    EXPECT_EQ(header_size(h), size);
    EXPECT_EQ(header_label(h), label);
    EXPECT_TRUE(tail_intact(p, static_cast<uint32_t>(size)));
    EXPECT_GE(ObjectSet::usable_size(p), size);
    std::memset(p, 0x33, static_cast<size_t>(size));
    EXPECT_TRUE(tail_intact(p, static_cast<uint32_t>(size)));
    EXPECT_EQ(ObjectSet::owner_of(p), &set);
    ptrs.push_back(p);
  }
  for (void* p : ptrs) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
  EXPECT_EQ(mgr_.get_used(), 0);
}

TEST_F(ObjectSetTest, BigObjectsGetTheirOwnSpan) {
  ObjectSet set(source_);
  void* mid = set.alloc(100 * 1024, label_id("t_big"));
  void* huge = set.alloc(5 * MB, label_id("t_big"));
  ASSERT_NE(mid, nullptr);
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(header_state(load_header(huge)), ObjectState::BIG);
  std::memset(huge, 1, 5 * MB);
  EXPECT_TRUE(ObjectSet::resize_in_place(mid, 100 * 1024 + 10));
  EXPECT_FALSE(ObjectSet::resize_in_place(mid, 10 * MB));
  EXPECT_EQ(header_size(load_header(mid)), 100 * 1024 + 10);
  ObjectSet::free(mid);
  ObjectSet::free(huge);
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(ObjectSetTest, ABigObjectGrowsInPlaceOverTheFreeBlocksAfterIt) {
  ObjectSet set(source_);
  char* p = static_cast<char*>(set.alloc(100 * 1024, label_id("t_grow")));
  ASSERT_NE(p, nullptr);
  std::memset(p, 5, 100 * 1024);
  const int64_t used = set.span_used();
  // The rest of its chunk is free: a bigger size takes the blocks after it, no copy.
  ASSERT_TRUE(ObjectSet::resize_in_place(p, 300 * 1024));
  EXPECT_EQ(ObjectSet::object_size(p, load_header(p)), 300 * 1024);
  EXPECT_TRUE(tail_intact(p, 300 * 1024));
  EXPECT_GE(ObjectSet::usable_size(p), 300 * 1024);
  EXPECT_EQ(p[100 * 1024 - 1], 5);
  EXPECT_EQ(set.span_used(), used + 200 * 1024);
  std::memset(p, 6, 300 * 1024);
  // Another span right after it: no room, nothing changed.
  void* next = set.alloc(100 * 1024, label_id("t_grow"));
  ASSERT_NE(next, nullptr);
  ASSERT_EQ(static_cast<char*>(next), p + 304 * 1024);  // best fit: the span after p
  EXPECT_FALSE(ObjectSet::resize_in_place(p, 1000 * 1024));
  EXPECT_EQ(ObjectSet::object_size(p, load_header(p)), 300 * 1024);
  EXPECT_TRUE(tail_intact(p, 300 * 1024));
  ObjectSet::free(p);
  ObjectSet::free(next);
  set.flush_thread_heap();
  EXPECT_EQ(set.span_used(), 0);
}

TEST_F(ObjectSetTest, ReuseIsLifoWithinASlab) {
  ObjectSet set(source_);
  void* a = set.alloc(64, 0);
  ObjectSet::free(a);
  EXPECT_EQ(set.alloc(64, 0), a);
  ObjectSet::free(a);
}

TEST_F(ObjectSetTest, TheFastFreeFindsSlotsInEveryBlockOfASlab) {
  ObjectSet set(source_);
  // 16 KiB slabs of two blocks: a thousand 64 B objects cross block and slab edges.
  std::vector<void*> ptrs;
  for (int i = 0; i < 1000; ++i) ptrs.push_back(set.alloc(64, 0));
  const int64_t hold = set.hold();
  for (void* p : ptrs) ASSERT_TRUE(ObjectSet::try_free_fast(p));
  for (void*& p : ptrs) p = set.alloc(64, 0);
  EXPECT_EQ(set.hold(), hold);  // every slot came back
  for (void* p : ptrs) ASSERT_TRUE(ObjectSet::try_free_fast(p));
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(ObjectSetTest, TheFastFreeRefusesWhatIsNotAnObject) {
  ObjectSet set(source_);
  void* p = set.alloc(64, 0);
  void* big = set.alloc(SMALL_OBJECT_MAX + 1, 0);
  AChunk* chunk = AChunk::ptr2chunk(p);
  // A "header" in the chunk's block-header area, and one in no span at all.
  EXPECT_FALSE(ObjectSet::try_free_fast(chunk->data()));
  EXPECT_FALSE(ObjectSet::try_free_fast(static_cast<char*>(chunk->data()) + ACHUNK_SIZE - 4096));
  EXPECT_FALSE(ObjectSet::try_free_fast(static_cast<char*>(p) + 16));  // inside the object
  EXPECT_FALSE(ObjectSet::try_free_fast(big));  // big objects take the full path
  ASSERT_TRUE(ObjectSet::try_free_fast(p));
  EXPECT_FALSE(ObjectSet::try_free_fast(p));  // already free
  ObjectSet::free(big);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

// Another thread's free is checked and pushed onto the slab's remote list by the fast
// path too: the full path would look the span up a second time.
TEST_F(ObjectSetTest, TheFastFreeTakesOtherThreadsObjects) {
  ObjectSet set(source_);
  std::vector<void*> ptrs;
  for (int i = 0; i < 10; ++i) ptrs.push_back(set.alloc(64, 0));
  Slab* slab = slab_of(BlockSet::ptr2block(header_of(ptrs[0])));
  std::thread other([&] {
    for (void* p : ptrs) EXPECT_TRUE(ObjectSet::try_free_fast(p));
    EXPECT_FALSE(ObjectSet::try_free_fast(ptrs[0]));  // already free
  });
  other.join();
  const uintptr_t word = slab->remote_free_.load();
  EXPECT_EQ(word >> Slab::REMOTE_COUNT_SHIFT, 10u);
  EXPECT_EQ(reinterpret_cast<void*>(word & Slab::REMOTE_HEAD_MASK), ptrs.back());
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

// Carving a slot writes its header: slots carved before they are needed would fault in
// pages no object uses (all 4 pages of a 16 KiB slab for one live object).
TEST_F(ObjectSetTest, ASlabIsCarvedAPageAtATime) {
  ObjectSet set(source_);
  void* first = set.alloc(64, 0);
  ABlock* block = BlockSet::ptr2block(header_of(first));
  const Slab* slab = slab_of(block);
  const uintptr_t base = reinterpret_cast<uintptr_t>(block_data(block));
  const int carved = slab->carved_.load();
  ASSERT_GT(carved, 1);
  ASSERT_LT(carved, slab->capacity_);
  // Every carved slot starts in the first page, and the next one would not.
  EXPECT_LT(base + 8 + (carved - 1) * 80, base + 4096);
  EXPECT_GE(base + 8 + carved * 80, base + 4096);
  std::vector<void*> ptrs{first};
  while (ptrs.size() < static_cast<size_t>(carved)) ptrs.push_back(set.alloc(64, 0));
  EXPECT_EQ(slab->carved_.load(), carved);  // nothing more until the carved slots ran out
  ptrs.push_back(set.alloc(64, 0));
  EXPECT_GT(slab->carved_.load(), carved);
  EXPECT_LT(reinterpret_cast<uintptr_t>(ptrs.back()), base + 2 * 4096);
  // A freed slot is reused before another page is carved.
  const int now = slab->carved_.load();
  while (slab->carved_.load() == now && ptrs.size() < 1000) ptrs.push_back(set.alloc(64, 0));
  ObjectSet::free(ptrs[3]);
  EXPECT_EQ(set.alloc(64, 0), ptrs[3]);
  LabelUsage usage[2];
  LabelUsage total;
  set.scan_usage(usage, 2, &total);
  EXPECT_EQ(total.count, static_cast<int64_t>(ptrs.size()));
  for (void* p : ptrs) ObjectSet::free(p);
  // Big slots: one per carve.
  void* big = set.alloc(20000, 0);
  EXPECT_EQ(slab_of(BlockSet::ptr2block(header_of(big)))->carved_.load(), 1);
  ObjectSet::free(big);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(ObjectSetTest, EmptyBigSlabsStayAsSparesOnlyWithinTheHeapBudget) {
  ObjectSet set(source_);
  // 60000 bytes: one 65536-byte slot to a 72 KiB slab. The budget counts carved bytes, so
  // it holds the current slab (kept when it empties) and KEPT - 1 spares, not KEPT.
  constexpr int64_t SLAB = 72 * 1024;
  ASSERT_EQ(slab_size(size_class_of(60000)), SLAB);
  constexpr int KEPT = static_cast<int>(ThreadHeap::SPARE_BYTES_MAX / 65536);
  ASSERT_GE(KEPT, 4);
  ASSERT_LE(KEPT * SLAB, ThreadHeap::SPARE_SPAN_BYTES_MAX);
  std::vector<void*> big;
  for (int i = 0; i < KEPT + 2; ++i) big.push_back(set.alloc(60000, 0));
  const int64_t with_all = set.span_used();
  for (int i = 0; i < KEPT - 1; ++i) ObjectSet::free(big[i]);
  EXPECT_EQ(set.span_used(), with_all);  // spares
  for (int i = KEPT - 1; i < KEPT + 1; ++i) ObjectSet::free(big[i]);
  EXPECT_EQ(set.span_used(), with_all - 2 * SLAB);
  // The last is the current slab: emptied, it stays current.
  ObjectSet::free(big[KEPT + 1]);
  EXPECT_EQ(set.span_used(), with_all - 2 * SLAB);
  // A thread cycling one object of the class keeps using it: no new span.
  for (int i = 0; i < 10; ++i) ObjectSet::free(set.alloc(60000, 0));
  EXPECT_EQ(set.span_used(), with_all - 2 * SLAB);
}

TEST_F(ObjectSetTest, ScanCountsLiveObjectsByLabel) {
  ObjectSet set(source_);
  const uint16_t x = label_id("t_scan_x");
  const uint16_t y = label_id("t_scan_y");
  std::vector<void*> ptrs;
  for (int i = 0; i < 10; ++i) ptrs.push_back(set.alloc(64, x));
  for (int i = 0; i < 3; ++i) ptrs.push_back(set.alloc(100 * 1024, y));
  ObjectSet::free(ptrs[0]);
  LabelUsage usage[8];
  LabelUsage total;
  const int n = set.scan_usage(usage, 8, &total);
  ASSERT_EQ(n, 2);
  std::map<uint16_t, LabelUsage> by_label;
  for (int i = 0; i < n; ++i) by_label[usage[i].label] = usage[i];
  EXPECT_EQ(by_label[x].count, 9);
  EXPECT_EQ(by_label[x].used, 9 * 64);
  EXPECT_EQ(by_label[x].hold, 9 * 80);
  EXPECT_EQ(by_label[y].count, 3);
  EXPECT_EQ(by_label[y].used, 3 * 100 * 1024);
  EXPECT_EQ(by_label[y].blocks, 3);
  EXPECT_EQ(total.count, 12);
  for (size_t i = 1; i < ptrs.size(); ++i) ObjectSet::free(ptrs[i]);
}

// alloc_big writes a big object's header after the shard lock, and a free marks it FREE
// before the span goes back: in both windows a scan sees a BIG span without a BIG header.
TEST_F(ObjectSetTest, ScanSkipsABigSpanWhoseHeaderIsNotBig) {
  ObjectSet set(source_);
  const uint16_t y = label_id("t_scan_born");
  void* p = set.alloc(100 * 1024, y);
  const uint64_t h = load_header(p);
  store_header(p, make_header(ObjectState::FREE, y, header_size(h)));
  LabelUsage usage[4];
  LabelUsage total;
  EXPECT_EQ(set.scan_usage(usage, 4, &total), 0);
  EXPECT_EQ(total.count, 0);
  store_header(p, h);
  ASSERT_EQ(set.scan_usage(usage, 4, &total), 1);
  EXPECT_EQ(usage[0].used, 100 * 1024);
  ObjectSet::free(p);
}

// Scans racing big allocations and frees count only whole objects, each with its own size
// (TSan checks the header's hand-off too).
TEST_F(ObjectSetTest, ScansRacingBigAllocationsSeeWholeObjects) {
  ObjectSet set(source_);
  const uint16_t y = label_id("t_scan_race");
  constexpr int64_t UNIT = 96 * 1024;
  std::atomic<bool> done{false};
  std::thread churn([&] {
    std::mt19937 rng(5);
    std::vector<void*> live;
    for (int i = 0; i < 3000; ++i) {
      if (live.size() < 8) {
        live.push_back(set.alloc(UNIT * (1 + static_cast<int64_t>(rng() % 3)), y));
      } else {
        const size_t k = rng() % live.size();
        ObjectSet::free(live[k]);
        live[k] = live.back();
        live.pop_back();
      }
    }
    for (void* p : live) ObjectSet::free(p);
    done.store(true);
  });
  int scans = 0;
  while (!done.load() || scans == 0) {
    LabelUsage usage[4];
    LabelUsage total;
    const int n = set.scan_usage(usage, 4, &total);
    for (int i = 0; i < n; ++i) {
      if (usage[i].label != y) continue;
      ASSERT_EQ(usage[i].used % UNIT, 0) << usage[i].used;
      ASSERT_LE(usage[i].used, usage[i].count * 3 * UNIT);
      ASSERT_GE(usage[i].used, usage[i].count * UNIT);
    }
    ++scans;
  }
  churn.join();
}

TEST_F(ObjectSetTest, CrossThreadFreesAreCollectedByTheOwner) {
  ObjectSet set(source_);
  std::vector<void*> ptrs;
  for (int i = 0; i < 5000; ++i) ptrs.push_back(set.alloc(64, 0));
  std::thread consumer([&] {
    for (void* p : ptrs) ObjectSet::free(p);
  });
  consumer.join();
  // The owner collects the remote frees when it runs short and reuses those slots.
  const int64_t hold = set.hold();
  for (int i = 0; i < 5000; ++i) ptrs[i] = set.alloc(64, 0);
  EXPECT_EQ(set.hold(), hold);
  for (void* p : ptrs) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

TEST_F(ObjectSetTest, ThreadExitAbandonsSlabsAndAnotherThreadAdoptsThem) {
  ObjectSet set(source_);
  std::vector<void*> ptrs;
  std::thread producer([&] {
    for (int i = 0; i < 3000; ++i) ptrs.push_back(set.alloc(200, 0));
  });
  producer.join();  // its heap is gone; its slabs hold live objects
  const int64_t hold = set.hold();
  for (size_t i = 0; i < ptrs.size(); i += 2) ObjectSet::free(ptrs[i]);
  // This thread adopts the abandoned slabs and fills the holes before mapping more.
  std::vector<void*> more;
  for (size_t i = 0; i < ptrs.size() / 2 - 100; ++i) more.push_back(set.alloc(200, 0));
  EXPECT_LE(set.hold(), hold + 8 * 1024);  // at most this thread's heap block more
  for (size_t i = 1; i < ptrs.size(); i += 2) ObjectSet::free(ptrs[i]);
  for (void* p : more) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
  EXPECT_EQ(mgr_.get_used(), 0);
}

TEST_F(ObjectSetTest, RandomSequenceKeepsContents) {
  ObjectSet set(source_);
  std::mt19937 rng(9);
  std::map<void*, std::pair<int64_t, unsigned char>> live;
  for (int step = 0; step < 30000; ++step) {
    if (live.size() < 500 && rng() % 2 == 0) {
      const int64_t size = rng() % 50 == 0 ? 1 + rng() % (3 * MB) : 1 + rng() % 3000;
      void* p = set.alloc(size, 0);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(live.count(p), 0u);
      const unsigned char fill = static_cast<unsigned char>(rng());
      std::memset(p, fill, static_cast<size_t>(size));
      live[p] = {size, fill};
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      const auto [size, fill] = it->second;
      const unsigned char* p = static_cast<unsigned char*>(it->first);
      ASSERT_EQ(p[0], fill);
      ASSERT_EQ(p[size - 1], fill);
      ASSERT_TRUE(tail_intact(p, static_cast<uint32_t>(size)));
      ObjectSet::free(it->first);
      live.erase(it);
    }
  }
  for (auto& [p, info] : live) ObjectSet::free(p);
  set.flush_thread_heap();
  EXPECT_EQ(set.hold(), 0);
}

}  // namespace
}  // namespace achunk::testing

namespace achunk::testing {
namespace {

// Without a release thread: every quarter of span_idle_ms a span free washes the spans
// that have been free for a whole span_idle_ms (the chunk TTL plays no part).
// Spans of `blocks` blocks each, laid out one after another in a fresh chunk.
static std::vector<ABlock*> take_spans(ObjectSet& set, std::initializer_list<int> blocks) {
  std::vector<ABlock*> spans;
  for (int n : blocks) spans.push_back(set.alloc_span(n * ABLOCK_SIZE));
  return spans;
}

TEST_F(ObjectSetTest, BigObjectsFromUntouchedPagesAreBornZero) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  const uint16_t label = label_id("t_zero");
  void* small = set.alloc(100, label);
  EXPECT_FALSE(ObjectSet::born_zero(small));  // slots are recycled: calloc zeroes them
  void* a = set.alloc(100 * 1024, label);
  void* b = set.alloc(100 * 1024, label);
  EXPECT_TRUE(ObjectSet::born_zero(a));  // from the fresh chunk
  EXPECT_TRUE(ObjectSet::born_zero(b));
  std::memset(a, 0x5a, 100 * 1024);
  ObjectSet::free(a);  // 13 dirty blocks before b: too short to be washed as it forms
  void* again = set.alloc(100 * 1024, label);
  EXPECT_EQ(again, a);
  EXPECT_FALSE(ObjectSet::born_zero(again));
  for (void* p : {again, b, small}) ObjectSet::free(p);
}

TEST_F(ObjectSetTest, ASetBeyondMaxSetsStillServesSmallObjects) {
  // Fill every index left in this process, then make one more set.
  std::vector<std::unique_ptr<ObjectSet>> sets;
  while (sets.empty() || sets.back()->index() >= 0) {
    ASSERT_LE(sets.size(), static_cast<size_t>(ObjectSet::MAX_SETS));
    sets.push_back(std::make_unique<ObjectSet>(source_));
  }
  ObjectSet& extra = *sets.back();
  const uint16_t label = label_id("t_no_index");
  std::vector<void*> ptrs;
  for (int64_t size : {int64_t{1}, int64_t{64}, int64_t{1000}, SMALL_OBJECT_MAX}) {
    void* p = extra.alloc(size, label);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
    EXPECT_EQ(ObjectSet::object_size(p, load_header(p)), size);
    EXPECT_EQ(header_label(load_header(p)), label);
    EXPECT_TRUE(tail_intact(p, static_cast<uint32_t>(size)));
    EXPECT_EQ(ObjectSet::owner_of(p), &extra);
    std::memset(p, 0x44, static_cast<size_t>(size));
    ptrs.push_back(p);
  }
  EXPECT_EQ(extra.existing_heap(), nullptr);
  for (void* p : ptrs) ObjectSet::free(p);
  EXPECT_EQ(extra.span_used(), 0);
}

TEST_F(ObjectSetTest, SpanFreesWashSpansThatStayedFreeForTheSpanIdleTime) {
  source_.set_span_idle_ms(30'000);
  mgr_.set_chunk_cache_ttl_ms(-1);  // the chunk cache's eviction does not matter here
  ObjectSet set(source_);
  // a, spacer1, b, spacer2, c, spacer3, the rest of the chunk but a 2-block tail.
  const std::vector<ABlock*> s = take_spans(set, {2, 2, 2, 2, 2, 2, BLOCKS_PER_CHUNK - 14});
  ABlock *a = s[0], *spacer1 = s[1], *b = s[2], *spacer2 = s[3], *c = s[4], *spacer3 = s[5];
  for (ABlock* span : s) ASSERT_NE(span, nullptr);
  ObjectSet::free_span(a);
  clock_.advance_ms(20'000);
  ObjectSet::free_span(b);
  EXPECT_EQ(os_.released_bytes(), 0);  // a: free for 20 s only
  clock_.advance_ms(11'000);
  ObjectSet::free_span(c);  // a: 31 s; b: 11 s
  const int64_t first = os_.released_bytes();
  // a only: the chunk's 2-block tail, free for 31 s too, was never touched since the
  // chunk was mapped, so it has no page to give back.
  EXPECT_EQ(first, 2 * ABLOCK_SIZE);
  clock_.advance_ms(5'000);
  // spacer1 merges a and b into one span free from now on; no look (a quarter of the
  // idle time has not passed since the last one).
  ObjectSet::free_span(spacer1);
  EXPECT_EQ(os_.released_bytes(), first);
  clock_.advance_ms(20'000);
  // A look: a+spacer1+b has been free for 20 s only, c for 25 s; c+spacer3 from now on.
  ObjectSet::free_span(spacer3);
  EXPECT_EQ(os_.released_bytes(), first);
  clock_.advance_ms(31'000);
  // a+spacer1+b (free 51 s) and c+spacer3 (31 s) are stale: a free washes one, the oldest,
  // and the next free looks again at once for the other.
  ObjectSet::free_span(set.alloc_span(ABLOCK_SIZE));  // from the untouched tail
  EXPECT_EQ(os_.released_bytes(), first + 6 * ABLOCK_SIZE);
  // The look before the merge: c+spacer3 is washed; then spacer2 joins them into one
  // dirty span of 12 blocks.
  ObjectSet::free_span(spacer2);
  const int64_t second = os_.released_bytes();
  EXPECT_EQ(second, first + 10 * ABLOCK_SIZE);
  source_.set_span_idle_ms(-1);  // off: spans are never washed on frees
  clock_.advance_ms(100'000);
  ObjectSet::free_span(set.alloc_span(ABLOCK_SIZE));
  EXPECT_EQ(os_.released_bytes(), second);
  ObjectSet::free_span(s[6]);
}

TEST_F(ObjectSetTest, AFreeSpanKeepsItsPagesHoweverLongUntilItIsIdle) {
  source_.set_span_idle_ms(1'000);
  ObjectSet set(source_);
  // k0 x k1 rest: the whole chunk.
  const std::vector<ABlock*> s = take_spans(set, {1, 200, 1, BLOCKS_PER_CHUNK - 202});
  for (ABlock* span : s) ASSERT_NE(span, nullptr);
  ObjectSet::free_span(s[1]);  // 1.6 MiB free, dirty
  EXPECT_EQ(os_.release_calls(), 0);
  // A loop that takes and frees the same memory never washes it.
  for (int i = 0; i < 100; ++i) {
    ABlock* again = set.alloc_span(200 * ABLOCK_SIZE);
    ASSERT_EQ(again, s[1]);
    ObjectSet::free_span(again);
    clock_.advance_ms(5);
  }
  EXPECT_EQ(os_.release_calls(), 0);
  // Free for a whole idle time: the next span free's look washes it, before that free
  // joins it (the joined span is dirty, and waits a whole idle time again).
  clock_.advance_ms(1'000);
  ObjectSet::free_span(s[0]);
  EXPECT_EQ(os_.released_bytes(), 200 * ABLOCK_SIZE);
  int64_t washed = 0;
  EXPECT_EQ(set.free_span_bytes(&washed), 201 * ABLOCK_SIZE);
  EXPECT_EQ(washed, 0);
  for (int i : {2, 3}) ObjectSet::free_span(s[i]);
}

TEST_F(ObjectSetTest, SpansFreeForAWholeIntervalAreWashedOnceEvenInABusySet) {
  source_.set_span_idle_ms(-1);  // only the explicit calls below wash
  ObjectSet set(source_);
  void* keep = set.alloc(100000, 0);  // a big object: a span of its own, the rest free
  void* old_one = set.alloc(100000, 0);
  void* spacer = set.alloc(100000, 0);  // keeps the next span from merging with old_one's
  void* busy = set.alloc(100000, 0);
  ObjectSet::free(old_one);
  EXPECT_EQ(set.wash_stale_spans(1'000'000), 0);  // everything free was freed just now
  clock_.advance_ms(1'000);
  const int64_t first = set.wash_stale_spans(1'000'000);
  // Free for a whole interval now: old_one's span and the chunk's untouched tail.
  EXPECT_GE(first, 100000);
  EXPECT_EQ(os_.released_bytes(), first);
  clock_.advance_ms(1'000);
  EXPECT_EQ(set.wash_stale_spans(1'000'000), 0);  // washed already: not again
  // The set stays busy; the span freed a moment ago keeps its pages for an interval.
  ObjectSet::free(busy);  // merges with the washed tail: the whole span waits again
  void* again = set.alloc(100000, 0);
  EXPECT_EQ(set.wash_stale_spans(1'000'000), 0);
  clock_.advance_ms(1'000);
  const int64_t second = set.wash_stale_spans(1'000'000);
  EXPECT_GT(second, 0);  // the merged tail, free for a whole interval now
  EXPECT_EQ(os_.released_bytes(), first + second);
  for (void* p : {keep, spacer, again}) std::memset(p, 1, 100000);  // live ones untouched
  for (void* p : {keep, spacer, again}) ObjectSet::free(p);
}

}  // namespace
}  // namespace achunk::testing
