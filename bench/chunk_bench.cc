// Chunk-layer microbenchmarks: cache hits, misses under a 2 MiB cap, raw mmap+munmap,
// and jemalloc's 2 MiB malloc+free measured in the same run for comparison.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "achunk/chunk/achunk_mgr.h"
#include "achunk/platform/clock.h"
#include "achunk/platform/linux_os.h"
#include "global/stats_region.h"

namespace achunk {
namespace {

constexpr int64_t MB = int64_t{1} << 20;

LinuxOs& os() {
  static LinuxOs instance;
  return instance;
}
const Clock& clock() {
  static MonotonicClock instance;
  return instance;
}

void touch_pages(void* p, int64_t size) {
  char* c = static_cast<char*>(p);
  for (int64_t off = 0; off < size; off += ACHUNK_PAGE_SIZE) c[off] = 1;
  benchmark::ClobberMemory();
}

// alloc_chunk + free_chunk of a normal chunk that is always in the cache.
void BM_ChunkCacheHit(benchmark::State& state) {
  static AChunkMgr* mgr = nullptr;
  if (state.thread_index() == 0) {
    mgr = new AChunkMgr(os(), clock());
  }
  // Benchmark threads start together after thread 0's setup, so each warms its own way.
  AChunk* warm = mgr->alloc_chunk(ACHUNK_SIZE);
  mgr->free_chunk(warm);
  for (auto _ : state) {
    AChunk* c = mgr->alloc_chunk(ACHUNK_SIZE);
    benchmark::DoNotOptimize(c);
    mgr->free_chunk(c);
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["hits"] = static_cast<double>(mgr->get_stats(false).cache_hits);
  }
}
BENCHMARK(BM_ChunkCacheHit)->Threads(1)->Threads(2)->UseRealTime();

// BM_ChunkCacheHit with a live stats region listening (refreshed every 100 ms from
// free_chunk), to compare with the plain one in the same run.
void BM_ChunkCacheHitRegion(benchmark::State& state) {
  static AChunkMgr* mgr = nullptr;
  static ChunkOnlyStatsHost* host = nullptr;
  static StatsRegion* region = nullptr;
  if (state.thread_index() == 0) {
    mgr = new AChunkMgr(os(), clock());
    host = new ChunkOnlyStatsHost;
    region = new StatsRegion(os(), *mgr, *host);
    mgr->set_listener(region);
  }
  AChunk* warm = mgr->alloc_chunk(ACHUNK_SIZE);
  mgr->free_chunk(warm);
  for (auto _ : state) {
    AChunk* c = mgr->alloc_chunk(ACHUNK_SIZE);
    benchmark::DoNotOptimize(c);
    mgr->free_chunk(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChunkCacheHitRegion)->Threads(1)->Threads(2)->UseRealTime();

// The same pair, touching every page of the chunk, as a database would.
void BM_ChunkCacheHitTouch(benchmark::State& state) {
  AChunkMgr mgr(os(), clock());
  for (auto _ : state) {
    AChunk* c = mgr.alloc_chunk(ACHUNK_SIZE);
    touch_pages(c->data(), ACHUNK_SIZE);
    mgr.free_chunk(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChunkCacheHitTouch);

// memory_chunk_cache_size = 2M with a working set of two chunks: one of the two
// allocations misses (mmap + page faults) and one of the two frees munmaps.
void BM_ChunkCacheMiss(benchmark::State& state) {
  AChunkMgr mgr(os(), clock());
  mgr.set_max_chunk_cache_size(2 * MB, true);
  for (auto _ : state) {
    AChunk* a = mgr.alloc_chunk(ACHUNK_SIZE);
    AChunk* b = mgr.alloc_chunk(ACHUNK_SIZE);
    touch_pages(a->data(), ACHUNK_SIZE);
    touch_pages(b->data(), ACHUNK_SIZE);
    mgr.free_chunk(a);
    mgr.free_chunk(b);
  }
  const ChunkMgrStats s = mgr.get_stats(false);
  state.SetItemsProcessed(2 * state.iterations());
  state.counters["miss_ratio"] =
      static_cast<double>(s.cache_misses) / static_cast<double>(s.cache_misses + s.cache_hits);
}
BENCHMARK(BM_ChunkCacheMiss);

// Raw mmap + munmap of 2 MiB (no alignment work, no touching).
void BM_MmapMunmap(benchmark::State& state) {
  for (auto _ : state) {
    int err = 0;
    void* p = os().map_aligned(2 * MB, ACHUNK_PAGE_SIZE, &err);
    benchmark::DoNotOptimize(p);
    if (p != nullptr) os().unmap(p, 2 * MB);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MmapMunmap);

// jemalloc (linked into this binary) malloc + free of 2 MiB.
void BM_JemallocLarge2M(benchmark::State& state) {
  for (auto _ : state) {
    void* p = std::malloc(2 * MB);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_JemallocLarge2M)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace achunk
