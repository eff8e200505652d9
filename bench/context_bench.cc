// Context-layer benchmarks: a request-shaped loop (a temporary context, 50-200 objects
// of mixed sizes, a third of them freed early, then the context destroyed) with and
// without the thread page manager, next to the same loop on jemalloc's malloc/free.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "achunk/platform/linux_os.h"
#include "context/context_guard.h"

namespace achunk {
namespace {

struct RequestShape {
  int count;
  int sizes[200];
};

// The same request shapes for every allocator, so each loop does identical work.
const std::vector<RequestShape>& shapes() {
  static const std::vector<RequestShape> all = [] {
    std::vector<RequestShape> v(64);
    std::mt19937 rng(11);
    for (RequestShape& s : v) {
      s.count = 50 + static_cast<int>(rng() % 151);
      for (int& size : s.sizes) size = rng() % 8 == 0 ? 512 + rng() % 3584 : 16 + rng() % 240;
    }
    return v;
  }();
  return all;
}

double rss_mib() {
  LinuxOs os;
  return static_cast<double>(os.memory_info().resident_size) / (1 << 20);
}

// Every request ends with objects still allocated (the destroy frees them): count the
// leak reports instead of writing a line each to stderr.
int64_t g_leak_reports = 0;
void count_leak(const LeakReport&) {
  ++g_leak_reports;
}

void BM_ContextRequest(benchmark::State& state) {
  const LeakHandler previous = set_leak_handler(&count_leak);
  g_leak_reports = 0;
  ContextParam param;
  param.set_mem_attr(OB_SERVER_TENANT_ID, "Request", EXECUTE_CTX_ID)
      .set_properties(state.range(0) != 0 ? USE_TL_PAGE_OPTIONAL : 0);
  void* ptrs[200];
  size_t round = 0;
  for (auto _ : state) {
    const RequestShape& s = shapes()[round++ % shapes().size()];
    CREATE_WITH_TEMP_CONTEXT(param) {
      MemoryContext ctx = CURRENT_CONTEXT;
      for (int i = 0; i < s.count; ++i) ptrs[i] = ctx.allocf(s.sizes[i]);
      for (int i = 0; i < s.count; i += 3) ctx.free(ptrs[i]).IgnoreError();
      benchmark::DoNotOptimize(ptrs[s.count - 1]);
    }  // destroyed here, with everything still allocated in it
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["rss_mib"] = rss_mib();
  state.counters["leak_reports"] = static_cast<double>(g_leak_reports);
  set_leak_handler(previous);
}
BENCHMARK(BM_ContextRequest)->ArgName("use_pm")->Arg(0)->Arg(1);

void BM_JemallocRequest(benchmark::State& state) {
  void* ptrs[200];
  size_t round = 0;
  for (auto _ : state) {
    const RequestShape& s = shapes()[round++ % shapes().size()];
    for (int i = 0; i < s.count; ++i) ptrs[i] = std::malloc(static_cast<size_t>(s.sizes[i]));
    for (int i = 0; i < s.count; i += 3) std::free(ptrs[i]);
    benchmark::DoNotOptimize(ptrs[s.count - 1]);
    for (int i = 0; i < s.count; ++i) {
      if (i % 3 != 0) std::free(ptrs[i]);
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["rss_mib"] = rss_mib();
}
BENCHMARK(BM_JemallocRequest);

// The same loop writing each object's first and last 8 bytes, as a context's header and
// canary do: the fair reference for what an object-touching allocator costs.
void BM_JemallocRequestTouch(benchmark::State& state) {
  void* ptrs[200];
  size_t round = 0;
  for (auto _ : state) {
    const RequestShape& s = shapes()[round++ % shapes().size()];
    for (int i = 0; i < s.count; ++i) {
      ptrs[i] = std::malloc(static_cast<size_t>(s.sizes[i]));
      std::memcpy(ptrs[i], &round, sizeof(round));
      std::memcpy(static_cast<char*>(ptrs[i]) + s.sizes[i] - sizeof(round), &round, sizeof(round));
    }
    for (int i = 0; i < s.count; i += 3) std::free(ptrs[i]);
    benchmark::DoNotOptimize(ptrs[s.count - 1]);
    for (int i = 0; i < s.count; ++i) {
      if (i % 3 != 0) std::free(ptrs[i]);
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_JemallocRequestTouch);

// A thread-safe context shared by the benchmark's threads: each iteration allocates 64 B
// and frees the object it allocated 8 iterations earlier. parallel:1 is one lock for all
// threads, parallel:2 gives each of the 2 threads its own way.
MemoryContext g_shared_ctx;
void BM_ThreadSafeContext(benchmark::State& state) {
  if (state.thread_index() == 0) {
    ContextParam param;
    param.set_mem_attr(OB_SERVER_TENANT_ID, "Shared", EXECUTE_CTX_ID)
        .set_properties(ALLOC_THREAD_SAFE)
        .set_parallel(static_cast<int>(state.range(0)));
    g_shared_ctx = *MemoryContext::root().create_child(param);
  }
  void* keep[8] = {};
  size_t i = 0;
  for (auto _ : state) {
    void* p = g_shared_ctx.allocf(64);
    benchmark::DoNotOptimize(p);
    if (keep[i & 7] != nullptr) g_shared_ctx.free(keep[i & 7]).IgnoreError();
    keep[i++ & 7] = p;
  }
  // The 8 objects each thread kept are freed by the destroy (after the timed loop's end
  // barrier, so no thread uses the context any more).
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const LeakHandler previous = set_leak_handler(&count_leak);
    g_shared_ctx.destroy().IgnoreError();
    set_leak_handler(previous);
  }
}
BENCHMARK(BM_ThreadSafeContext)->ArgName("parallel")->Arg(1)->Arg(2)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace achunk
