// Part of the main job (scripts/demo.sh): the request loop of a database server on
// memory contexts, run with the thread page manager (context_use_pm:true, the default)
// and without it (false, the seed change's forced use_pm=false), 2 threads each.
// Prints requests/s, RSS and the EXECUTE ctx's hold and usage after each run.
// Usage: achunk_context_demo [--quick]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "achunk/achunk.hpp"
#include "achunk/platform/linux_os.h"
#include "context/context_guard.h"
#include "global/global.h"
#include "global/ob_malloc.h"

namespace achunk {
namespace {

void quiet_leaks(const LeakReport&) {}

// One thread's requests: a temp context per request, 50-200 objects, a third freed early,
// some arena scratch, destroyed at the end of the request.
int64_t serve(double seconds, unsigned seed) {
  std::mt19937 rng(seed);
  ContextParam param;
  param.set_mem_attr(OB_SERVER_TENANT_ID, "Request", EXECUTE_CTX_ID)
      .set_properties(USE_TL_PAGE_OPTIONAL);
  void* ptrs[200];
  int64_t requests = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
    for (int batch = 0; batch < 64; ++batch, ++requests) {
      CREATE_WITH_TEMP_CONTEXT(param) {
        MemoryContext ctx = CURRENT_CONTEXT;
        const int n = 50 + static_cast<int>(rng() % 151);
        for (int i = 0; i < n; ++i) {
          const int64_t size = rng() % 8 == 0 ? 512 + rng() % 3584 : 16 + rng() % 240;
          ptrs[i] = ctx.allocf(size);
          std::memset(ptrs[i], 1, static_cast<size_t>(size < 64 ? size : 64));
        }
        for (int i = 0; i < n; i += 3) ctx.free(ptrs[i]).IgnoreError();
        ctx.allocp(4096);
      }
    }
  }
  return requests;
}

void run(bool use_pm, double seconds) {
  char err[128];
  set_option("context_use_pm", use_pm ? "true" : "false", err, sizeof(err));
  std::atomic<int64_t> requests{0};
  const auto start = std::chrono::steady_clock::now();
  std::thread a([&] { requests += serve(seconds, 1); });
  std::thread b([&] { requests += serve(seconds, 2); });
  a.join();
  b.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LinuxOs os;
  ObTenantCtxAllocator* ta =
      global_malloc_allocator().get_tenant_ctx_allocator(OB_SERVER_TENANT_ID, EXECUTE_CTX_ID);
  std::printf("| context_use_pm:%s | %.0f | %.1f | %.1f |\n", use_pm ? "true " : "false",
              static_cast<double>(requests.load()) / elapsed,
              static_cast<double>(os.memory_info().resident_size) / (1 << 20),
              static_cast<double>(ta->hold()) / (1 << 20));
}

int main_impl(int argc, char** argv) {
  double seconds = 3.0;
  if (argc > 1 && std::strcmp(argv[1], "--quick") == 0) {
    seconds = 0.5;
  } else if (argc > 1) {
    std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
    return 2;
  }
  set_leak_handler(&quiet_leaks);  // requests end with objects still allocated, by design
  std::printf(
      "\nmemory contexts: 2 threads x %.1f s of requests (temp context, 50-200 "
      "objects of 16 B-4 KiB, a third freed early, 4 KiB of arena)\n\n"
      "| setting | requests/s | RSS MiB after | EXECUTE ctx hold MiB after |\n"
      "|---|---|---|---|\n",
      seconds);
  run(true, seconds);
  run(false, seconds);
  static char usage[8192];
  ob_print_usage(usage, sizeof(usage));
  std::printf("\n%s", usage);
  return 0;
}

}  // namespace
}  // namespace achunk

int main(int argc, char** argv) {
  return achunk::main_impl(argc, argv);
}
