// Run under LD_PRELOAD=libachunk_malloc.so with a short release_interval_ms: a thread
// allocates objects of many sizes, hands them to the main thread, which frees them all,
// and stays alive and idle. The housekeeping thread's looks give back the slabs the idle
// thread kept, and the chunks they pinned, as its exit would: the chunks the malloc ctx
// holds (mallinfo2's uordblks; the chunk cache is apart) fall back near where they
// started. The wait is for the housekeeping thread's looks, no TTL.
#include <malloc.h>
#include <stdint.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "check.h"

int main() {
  constexpr int N = 100'000;
  const size_t start = mallinfo2().uordblks;
  std::vector<void*> objs(N);
  std::atomic<int> stage{0};
  std::thread owner([&] {
    for (int i = 0; i < N; ++i) {
      const size_t size = 16 + (static_cast<uint32_t>(i) * 2654435761u) % 4080;
      objs[i] = malloc(size);
      memset(objs[i], 1, size);
    }
    stage.store(1);
    while (stage.load() != 2) usleep(1000);  // alive, making no call
  });
  while (stage.load() != 1) usleep(1000);
  const size_t full = mallinfo2().uordblks;
  for (void* p : objs) free(p);
  // The looks run every release_interval_ms; an idle heap gives its slabs up at the
  // second one that finds it idle.
  size_t held = full;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    held = mallinfo2().uordblks;
    if (held <= start + (16u << 20)) break;
    usleep(20'000);
  }
  printf("held: %zu at start, %zu with the objects, %zu after the looks\n", start, full, held);
  CHECK(full >= start + (200u << 20));
  CHECK(held <= start + (16u << 20));
  stage.store(2);
  owner.join();
  if (g_failures == 0) printf("idle_owner ok\n");
  return g_failures == 0 ? 0 : 1;
}
