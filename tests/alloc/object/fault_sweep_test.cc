// Fault injection at every point: a fixed mixed workload (objects of every kind of size,
// big and aligned ones, realloc chains, two ctxs, span washes, chunk cache caps) runs
// once per OS call it makes, the k-th mmap (madvise, munmap) failing in run k. Every
// run must end without a leak, with the counters equal to a recount, every refused
// caller told why, and a retry served.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "achunk/base/alloc_failure.h"
#include "alloc/object/malloc_allocator.h"
#include "context/block_source.h"
#include "context/ob_allocator.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

constexpr uint64_t TENANT = 1001;

struct World {
  FakeOs os;
  FakeClock clock;
  AChunkMgr mgr{os, clock};
  std::unique_ptr<ObMallocAllocator> alloc = std::make_unique<ObMallocAllocator>(mgr);
};

struct Outcome {
  int refused = 0;  // calls that returned nullptr (each retried once)
  bool ok = true;
};

// Hold of the chunk layer = chunks the ctxs hold + chunks in the cache.
void expect_recount(World& w, const char* when) {
  int64_t ctx_hold = 0;
  for (int ctx : {DEFAULT_CTX_ID, WORK_AREA}) {
    ctx_hold += w.alloc->get_tenant_ctx_allocator(TENANT, ctx)->hold();
  }
  EXPECT_EQ(w.mgr.get_hold(), ctx_hold + w.mgr.get_freelist_hold()) << when;
  const ChunkMgrStats s = w.mgr.get_stats(false);
  EXPECT_EQ(s.total_maps - s.total_unmaps, w.os.live_mappings() - w.os.failed_unmaps()) << when;
  EXPECT_EQ(w.os.bad_unmaps(), 0) << when;
}

// The workload. `limit`: a server memory limit it reaches again and again (0: none).
Outcome run_workload(World& w, int64_t cache_cap, int64_t limit) {
  Outcome out;
  if (limit > 0) w.mgr.set_memory_limit(limit);
  w.mgr.set_max_chunk_cache_size(cache_cap, true);
  const ObMemAttr a(TENANT, "t_fault"), b(TENANT, "t_fault_wa", WORK_AREA);
  struct Live {
    char* p;
    int64_t size;
  };
  std::vector<Live> live;
  // Calls `f` and retries once when refused: a one-shot OS failure must not repeat, and
  // a limit must refuse the same way again.
  auto get = [&](auto f, int64_t size) {
    char* p = static_cast<char*>(f());
    if (p == nullptr) {
      ++out.refused;
      const AllocFailKind kind = last_alloc_failure().kind;
      const bool expected = kind == AllocFailKind::PHYSICAL_MEMORY_EXHAUST ||
                            (limit > 0 && kind == AllocFailKind::SERVER_LIMIT);
      EXPECT_TRUE(expected) << static_cast<int>(kind);
      out.ok &= expected;
      p = static_cast<char*>(f());
      if (limit == 0) {
        EXPECT_NE(p, nullptr) << "a retry after a one-shot failure";
        out.ok &= p != nullptr;
      } else if (p == nullptr) {
        EXPECT_EQ(last_alloc_failure().kind, kind);
      }
    }
    if (p != nullptr) {
      if (size > 0) {
        p[0] = 'h';
        p[size - 1] = 't';
      }
      live.push_back({p, size});
    }
  };
  auto free_at = [&](size_t i) {
    const Live l = live[i];
    if (l.size > 0) {
      EXPECT_EQ(l.p[0], 'h');
      EXPECT_EQ(l.p[l.size - 1], 't');
    }
    ObMallocAllocator::free(l.p);
    live[i] = live.back();
    live.pop_back();
  };
  ObMallocAllocator& al = *w.alloc;
  const int64_t sizes[] = {16, 100, 1000, 8000, 60000, 100 << 10, 1 << 20, 3 << 20, 25 << 20};
  for (int round = 0; round < 2; ++round) {
    for (int64_t size : sizes) {
      for (const ObMemAttr* attr : {&a, &b}) get([&] { return al.alloc(size, *attr); }, size);
    }
    for (int64_t align : {int64_t{4096}, int64_t{2} << 20, int64_t{8} << 20}) {
      get([&] { return al.alloc_align(align, 5000, a); }, 5000);
    }
    // A realloc chain through every kind of object.
    char* r = nullptr;
    for (int64_t size : {int64_t{10}, int64_t{50000}, int64_t{3} << 20, int64_t{200}}) {
      char* next = static_cast<char*>(al.realloc(r, size, b));
      if (next == nullptr) {
        ++out.refused;
        continue;  // r is untouched
      }
      r = next;
    }
    if (r != nullptr) ObMallocAllocator::free(r);
    // A memory context's freeable allocator over the ctx's shared blocks: small objects on
    // its pages, one bigger than a page on a page of its own; destroying it (reset) gives
    // every page back.
    {
      SharedBlockSource pages(al.get_tenant_ctx_allocator(TENANT, 0)->object_set());
      ObAllocator ctx(pages, 8192, false);
      const uint16_t label = label_id("t_fault_ctx");
      const size_t before = live.size();
      for (int64_t size : {int64_t{100}, int64_t{3000}, int64_t{70000}}) {
        get([&] { return ctx.alloc(size, label); }, size);
      }
      for (size_t i = live.size(); i > before; --i) {
        const Live l = live[i - 1];
        EXPECT_EQ(l.p[0], 'h');
        EXPECT_EQ(l.p[l.size - 1], 't');
        EXPECT_TRUE(ctx.free(l.p));
        live.pop_back();
      }
      ctx.alloc(500, label);  // left for reset to free with the pages
    }
    // Free every other object (spans form, some washed as they form), then wash.
    for (size_t i = 0; i < live.size(); i += 2) free_at(i);
    al.flush_thread_caches();
    al.wash_stale_spans(0);
    w.clock.advance_ms(40'000);
    w.mgr.release_expired();
    expect_recount(w, "mid-run");
  }
  while (!live.empty()) free_at(live.size() - 1);
  al.flush_thread_caches();
  w.mgr.sync_wash();
  expect_recount(w, "end");
  EXPECT_EQ(w.mgr.get_hold(), 0) << "leak";
  EXPECT_EQ(w.mgr.get_total_hold(), 0) << "leak";
  return out;
}

void sweep(FakeOs::Call call, int64_t cache_cap, int64_t limit) {
  int64_t total = 0;
  {
    World w;
    const Outcome base = run_workload(w, cache_cap, limit);
    ASSERT_TRUE(base.ok);
    if (limit == 0) {
      ASSERT_EQ(base.refused, 0);
    } else {
      ASSERT_GT(base.refused, 0) << "the limit is never reached";
    }
    total = w.os.calls(call);
  }
  ASSERT_GT(total, 0);
  for (int64_t k = 1; k <= total; ++k) {
    World w;
    w.os.set_zero_fill(false);
    w.os.fail_nth(call, k);
    SCOPED_TRACE(::testing::Message() << "call " << static_cast<int>(call) << " k=" << k << "/"
                                      << total << " cap=" << cache_cap << " limit=" << limit);
    const Outcome o = run_workload(w, cache_cap, limit);
    EXPECT_TRUE(o.ok);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(FaultSweepTest, EveryMmapFails) {
  for (int64_t cap : {int64_t{0}, int64_t{2} << 20, int64_t{64} << 20})
    sweep(FakeOs::Call::MAP, cap, 0);
}

TEST(FaultSweepTest, EveryMadviseFails) {
  sweep(FakeOs::Call::RELEASE, 0, 0);
}

TEST(FaultSweepTest, EveryMunmapFails) {
  for (int64_t cap : {int64_t{0}, int64_t{2} << 20}) sweep(FakeOs::Call::UNMAP, cap, 0);
}

// Under a server limit the workload hits on every round: refusals carry the limit's
// reason, and each mmap failure on top of it is survived the same way.
TEST(FaultSweepTest, EveryMmapFailsUnderAMemoryLimit) {
  sweep(FakeOs::Call::MAP, 0, int64_t{40} << 20);
}

}  // namespace
}  // namespace achunk::testing
