// The usage print (ob_print_usage's engine) over a fake OS: the ctx and label lines,
// the resident bytes of the ctx's chunks, and its spans split by kind.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "alloc/object/ob_malloc_fixture.h"

namespace achunk::testing {
namespace {

TEST_F(ObMallocTest, UsagePrintShowsTheResidentBytesOfEveryChunkOfTheCtx) {
  const ObMemAttr attr(TENANT, "t_print_rss");
  void* small = alloc_->alloc(100, attr);
  void* big = alloc_->alloc(3 * 1024 * 1024, attr);  // a dedicated 4 MiB chunk
  os_.set_resident_every(2);                         // every other page in RAM
  const int64_t probes = os_.page_probes();
  const int64_t calls = os_.resident_calls();
  char buf[8192];
  alloc_->print_usage(buf, sizeof(buf));
  // One probe per 2 MiB of chunk: the first chunk's, the dedicated chunk's two halves.
  EXPECT_EQ(os_.page_probes() - probes, 1 + 2);
  EXPECT_EQ(os_.resident_calls() - calls, 0);
  // Half of the 2 + 4 MiB.
  EXPECT_NE(std::string(buf).find(" resident=      3,145,728 "), std::string::npos) << buf;
  // Spans start on even pages and hold whole blocks (two pages): half of each. The big
  // object's 769 pages (3 MiB and 24 bytes) start on an even page: 385 of them.
  EXPECT_NE(std::string(buf).find(" slab_resident=          8,192 big="), std::string::npos) << buf;
  EXPECT_NE(std::string(buf).find(" big_resident=      1,576,960 other="), std::string::npos)
      << buf;
  EXPECT_NE(std::string(buf).find(" free_resident=      1,024,000"
                                  " spares_reclaimed=              0"
                                  " warm_slabs=              0\n"),
            std::string::npos)
      << buf;
  alloc_->print_usage_json(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find("\"resident\":3145728,"), std::string::npos) << buf;
  EXPECT_NE(
      std::string(buf).find("\"free_resident\":1024000,\"spares_reclaimed\":0,\"warm_slabs\":0}"),
      std::string::npos)
      << buf;
  os_.set_resident_every(1);
  ObMallocAllocator::free(big);
  ObMallocAllocator::free(small);
}

// The scan holds each shard's lock while it probes: one probe per chunk, however many
// spans the chunk holds (a syscall per span would hold it for tens of milliseconds on a
// live set of a few hundred MiB).
TEST_F(ObMallocTest, UsageScanProbesEachChunkOnceHoweverManySpansItHolds) {
  const ObMemAttr attr(TENANT, "t_print_probes");
  std::vector<void*> objs;
  // A slab of every class up to 1 KiB, and big objects of 24-120 KiB: dozens of spans.
  for (int64_t size = 16; size <= 1024; size += 16) objs.push_back(alloc_->alloc(size, attr));
  for (int64_t kib = 24; kib <= 120; kib += 16) objs.push_back(alloc_->alloc(kib << 10, attr));
  int chunks = 0;
  ObTenantCtxAllocator* ta = alloc_->get_tenant_ctx_allocator(TENANT, 0);
  ASSERT_NE(ta, nullptr);
  ta->object_set().for_each_chunk([&](AChunk*) { ++chunks; });
  int spans = 0;
  ta->object_set().for_each_chunk([&](AChunk* chunk) {
    BlockSet::for_each_span_of(chunk, [&](ABlock*, int64_t) { ++spans; });
  });
  ASSERT_GT(spans, 10 * chunks);
  const int64_t probes = os_.page_probes();
  char buf[8192];
  alloc_->print_usage(buf, sizeof(buf));
  EXPECT_EQ(os_.page_probes() - probes, chunks);
  for (void* p : objs) ObMallocAllocator::free(p);
}

TEST_F(ObMallocTest, UsagePrintSplitsTheCtxSpansByKind) {
  const ObMemAttr attr(TENANT, "t_print_spans");
  void* a = alloc_->alloc(100, attr);  // a 128-byte slot in a 16 KiB slab
  void* b = alloc_->alloc(100, attr);
  void* big = alloc_->alloc(200 * 1024 - 64, attr);  // 25 blocks of its own
  char buf[8192];
  alloc_->print_usage(buf, sizeof(buf));
  const std::string text(buf);
  EXPECT_NE(text.find("[MEMORY] ctx_id=DEFAULT_CTX_ID slabs=         16,384 slab_slots="),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" slab_live=            256 empty_slabs=              0 "), std::string::npos)
      << text;
  EXPECT_NE(text.find(" big=        204,800 "), std::string::npos) << text;
  EXPECT_NE(text.find(" other=          8,192 "), std::string::npos) << text;  // the thread heap
  ObMallocAllocator::free(a);
  ObMallocAllocator::free(b);
  alloc_->print_usage_json(buf, sizeof(buf));
  // The thread's current slab stays, empty.
  EXPECT_NE(std::string(buf).find("\"slab_live\":0,\"empty_slabs\":16384,"), std::string::npos)
      << buf;
  ObMallocAllocator::free(big);
}

TEST_F(ObMallocTest, UsagePrintShowsWashedSpansAndShards) {
  alloc_->set_span_idle_ms(-1);  // only the explicit wash below
  const ObMemAttr attr(TENANT, "t_print_wash");
  void* keep = alloc_->alloc(100, attr);  // keeps the chunk held
  void* big = alloc_->alloc(200 * 1024, attr);
  ObMallocAllocator::free(big);
  char buf[8192];
  alloc_->print_usage(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find(" washed=              0 shards=1 "), std::string::npos) << buf;
  EXPECT_EQ(std::string(buf).find(" free_spans=              0 "), std::string::npos) << buf;
  const int64_t washed = ta().object_set().wash_free_spans();
  ASSERT_GT(washed, 200 * 1024);
  alloc_->print_usage(buf, sizeof(buf));
  char expect[64];
  std::snprintf(expect, sizeof(expect), " washed=%15s shards=1 ", with_commas(washed).c_str());
  EXPECT_NE(std::string(buf).find(expect), std::string::npos) << buf << "\nwanted" << expect;
  alloc_->print_usage_json(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find("\"free_spans\":" + std::to_string(washed) +
                                  ",\"washed\":" + std::to_string(washed) + ",\"shards\":1,"),
            std::string::npos)
      << buf;
  EXPECT_NE(std::string(buf).find(",\"shards\":1,"), std::string::npos) << buf;
  // Reusing the span makes it resident again: no longer counted.
  int64_t washed_now = 0;
  const int64_t free_spans = ta().object_set().free_span_bytes(&washed_now);
  EXPECT_EQ(washed_now, washed);
  EXPECT_EQ(free_spans, washed);  // every free span was washed
  void* again = alloc_->alloc(washed - 64 * 1024, attr);
  ta().object_set().free_span_bytes(&washed_now);
  EXPECT_LT(washed_now, washed);
  ObMallocAllocator::free(again);
  ObMallocAllocator::free(keep);
}

TEST_F(ObMallocTest, UsagePrintHasCtxAndLabelLines) {
  void* a = alloc_->alloc(1000, ObMemAttr(TENANT, "t_print_big"));
  void* b = alloc_->alloc(10, ObMemAttr(TENANT, "t_print_small"));
  char buf[8192];
  alloc_->print_usage(buf, sizeof(buf));
  const std::string out(buf);
  EXPECT_NE(out.find("[MEMORY] tenant_id= 1001 ctx_id=DEFAULT_CTX_ID hold=      2,097,152"),
            std::string::npos)
      << out;
  const size_t big = out.find("mod=t_print_big");
  const size_t small = out.find("mod=t_print_small");
  ASSERT_NE(big, std::string::npos);
  ASSERT_NE(small, std::string::npos);
  EXPECT_LT(big, small);  // sorted by hold
  EXPECT_NE(out.find("count=       1 avg_used=          1,000"), std::string::npos) << out;
  alloc_->print_usage_json(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find("{\"mod\":\"t_print_small\",\"hold\":32,\"used\":10,\"count\":1"),
            std::string::npos)
      << buf;
  ObMallocAllocator::free(a);
  ObMallocAllocator::free(b);
}

// What the allocator holds for itself after a thread's first small object: one heap span
// and one chunk header on top of the thread's state, 40 KiB with it at most; the heap
// span goes when the thread's caches are flushed.
TEST_F(ObMallocTest, TheFirstSmallObjectCostsOneHeapAndOneChunkHeader) {
  std::thread([&] {
    const AllocatorOverhead before = alloc_->overhead();
    EXPECT_EQ(before.thread_heaps, 0);
    EXPECT_EQ(before.chunk_headers, 0);
    void* p = alloc_->alloc(100, ObMemAttr(TENANT, "t_overhead"));
    ASSERT_NE(p, nullptr);
    const AllocatorOverhead after = alloc_->overhead();
    EXPECT_GT(after.thread_heaps, 0);
    EXPECT_LE(after.thread_heaps, 16 << 10);
    EXPECT_EQ(after.chunk_headers, ACHUNK_HEADER_SIZE);  // the one chunk mapped
    EXPECT_GE(after.thread_states - before.thread_states, 0);
    EXPECT_LE(after.thread_heaps + after.chunk_headers + int64_t{sizeof(ThreadState)}, 48 << 10);
    EXPECT_EQ(after.stats_region, 0);  // the caller's to add
    char buf[4096];
    ASSERT_LT(alloc_->print_usage(buf, sizeof(buf), &after), static_cast<int64_t>(sizeof(buf)));
    EXPECT_EQ(std::string(buf).rfind("[MEMORY] overhead=", 0), 0u) << buf;
    EXPECT_NE(std::string(buf).find(
                  " thread_heaps=" + std::string(15 - with_commas(after.thread_heaps).size(), ' ') +
                  with_commas(after.thread_heaps)),
              std::string::npos)
        << buf;
    ASSERT_LT(alloc_->print_usage_json(buf, sizeof(buf), &after),
              static_cast<int64_t>(sizeof(buf)));
    EXPECT_EQ(
        std::string(buf).rfind("{\"overhead\":{\"total\":" + std::to_string(after.total()), 0), 0u)
        << buf;
    ObMallocAllocator::free(p);
    alloc_->flush_thread_caches();
    EXPECT_EQ(alloc_->overhead().thread_heaps, 0);
  }).join();
}

}  // namespace
}  // namespace achunk::testing
