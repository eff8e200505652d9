// Object-layer benchmarks: ob_malloc + ob_free pairs against jemalloc (linked into this
// binary, so plain malloc is jemalloc's) and glibc (reached through __libc_malloc), and
// producer/consumer frees across threads.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <vector>

#include "global/global.h"
#include "global/ob_malloc.h"

extern "C" void* __libc_malloc(size_t);
extern "C" void __libc_free(void*);

namespace achunk {
namespace {

const ObMemAttr BENCH_ATTR(OB_SERVER_TENANT_ID, "Bench");

struct ObApi {
  static void* alloc(size_t n) { return ob_malloc(static_cast<int64_t>(n), BENCH_ATTR); }
  static void release(void* p) { ob_free(p); }
};
struct JeApi {
  static void* alloc(size_t n) { return std::malloc(n); }
  static void release(void* p) { std::free(p); }
};
struct GlibcApi {
  static void* alloc(size_t n) { return __libc_malloc(n); }
  static void release(void* p) { __libc_free(p); }
};

// Same-thread pairs, with a few objects live so the pair is not a trivial ping-pong.
template <typename Api>
void malloc_free_pairs(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* keep[8];
  for (void*& p : keep) p = Api::alloc(size);
  size_t i = 0;
  for (auto _ : state) {
    void* p = Api::alloc(size);
    benchmark::DoNotOptimize(p);
    Api::release(keep[i & 7]);
    keep[i++ & 7] = p;
  }
  for (void* p : keep) Api::release(p);
  state.SetItemsProcessed(state.iterations());
}

void BM_ObMallocFree(benchmark::State& s) {
  malloc_free_pairs<ObApi>(s);
}
void BM_JemallocMallocFree(benchmark::State& s) {
  malloc_free_pairs<JeApi>(s);
}
void BM_GlibcMallocFree(benchmark::State& s) {
  malloc_free_pairs<GlibcApi>(s);
}

// One object at a time: each free empties its slab, which stays the thread's current
// slab (where the kernel offers a process barrier), so neither call takes a slow path.
template <typename Api>
void lone_pairs(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = Api::alloc(size);
    benchmark::DoNotOptimize(p);
    Api::release(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ObMallocFreeLone(benchmark::State& s) {
  lone_pairs<ObApi>(s);
}
void BM_JemallocMallocFreeLone(benchmark::State& s) {
  lone_pairs<JeApi>(s);
}
void BM_GlibcMallocFreeLone(benchmark::State& s) {
  lone_pairs<GlibcApi>(s);
}
BENCHMARK(BM_ObMallocFreeLone)->Arg(64)->Arg(4096);
BENCHMARK(BM_JemallocMallocFreeLone)->Arg(64)->Arg(4096);
BENCHMARK(BM_GlibcMallocFreeLone)->Arg(64)->Arg(4096);

#define PAIR_SIZES \
  Arg(16)          \
      ->Arg(64)    \
      ->Arg(256)   \
      ->Arg(1024)  \
      ->Arg(4096)  \
      ->Arg(32768) \
      ->Threads(1) \
      ->Threads(2) \
      ->UseRealTime()
BENCHMARK(BM_ObMallocFree)->PAIR_SIZES;
BENCHMARK(BM_JemallocMallocFree)->PAIR_SIZES;
BENCHMARK(BM_GlibcMallocFree)->PAIR_SIZES;
// Big objects (a span each): threads meet on the block layer's locks (ObjectMgr shards).
#define BIG_SIZES Arg(131072)->Arg(524288)->Threads(1)->Threads(2)->UseRealTime()
BENCHMARK(BM_ObMallocFree)->BIG_SIZES;
BENCHMARK(BM_JemallocMallocFree)->BIG_SIZES;
BENCHMARK(BM_GlibcMallocFree)->BIG_SIZES;

// Thread 0 allocates 64-byte objects and passes them through a ring; thread 1 frees them.
constexpr size_t RING = 1024;
struct Ring {
  std::atomic<void*> slots[RING];
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
};

template <typename Api>
void cross_thread(benchmark::State& state) {
  static Ring ring;
  if (state.thread_index() == 0) {
    for (auto _ : state) {
      void* p = Api::alloc(64);
      const uint64_t h = ring.head.load(std::memory_order_relaxed);
      while (h - ring.tail.load(std::memory_order_acquire) >= RING) {
      }
      ring.slots[h % RING].store(p, std::memory_order_relaxed);
      ring.head.store(h + 1, std::memory_order_release);
    }
  } else {
    for (auto _ : state) {
      const uint64_t t = ring.tail.load(std::memory_order_relaxed);
      while (ring.head.load(std::memory_order_acquire) == t) {
      }
      Api::release(ring.slots[t % RING].load(std::memory_order_relaxed));
      ring.tail.store(t + 1, std::memory_order_release);
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ObCrossThreadFree(benchmark::State& s) {
  cross_thread<ObApi>(s);
}
void BM_JemallocCrossThreadFree(benchmark::State& s) {
  cross_thread<JeApi>(s);
}
BENCHMARK(BM_ObCrossThreadFree)->Threads(2)->UseRealTime();
BENCHMARK(BM_JemallocCrossThreadFree)->Threads(2)->UseRealTime();

// Bytes held per live 64-byte object: one million of them, ctx hold over payload.
void BM_ObMalloc64Overhead(benchmark::State& state) {
  constexpr int N = 1'000'000;
  const ObMemAttr attr(OB_SERVER_TENANT_ID, "Overhead", WORK_AREA);
  ObTenantCtxAllocator* ta =
      global_malloc_allocator().get_tenant_ctx_allocator(OB_SERVER_TENANT_ID, WORK_AREA);
  std::vector<void*> ptrs(N);
  double overhead = 0;
  for (auto _ : state) {
    ob_flush_thread_caches();  // no spare slabs from an earlier run in "before"
    const int64_t before = ta->hold();
    for (void*& p : ptrs) p = ob_malloc(64, attr);
    overhead = static_cast<double>(ta->hold() - before) / (64.0 * N) - 1.0;
    for (void* p : ptrs) ob_free(p);
  }
  state.counters["overhead_pct"] = overhead * 100;
}
BENCHMARK(BM_ObMalloc64Overhead)->Iterations(1);

}  // namespace
}  // namespace achunk
