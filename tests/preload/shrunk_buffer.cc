// Run under LD_PRELOAD=libachunk_malloc.so with a short release_interval_ms and
// span_idle_ms: a buffer grown to 24 MiB with every page written and shrunk back keeps
// its mapping's tail (a grow again pays no syscall), and the housekeeping thread's wash
// unmaps the tail and releases the pages of its first 2 MiB past the request once it has
// idled: the process's RSS falls by all of it. The wait is
// for the housekeeping thread, whose interval and idle time are a few ms here.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "check.h"

namespace {

int64_t rss_bytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (f == nullptr || fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  if (f != nullptr) fclose(f);
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

}  // namespace

int main() {
  constexpr size_t SMALL = 16 << 10;
  constexpr size_t BIG = 24 << 20;
  // All but the request's pages: the units past its first unmapped, and that unit's pages
  // past 16 KiB released too (they would keep 2 MiB resident per such buffer).
  constexpr int64_t GIVEN_BACK = BIG - SMALL - (1 << 20);
  char* p = static_cast<char*>(malloc(SMALL));
  CHECK(p != nullptr);
  memset(p, 7, SMALL);
  p = static_cast<char*>(realloc(p, BIG));
  CHECK(p != nullptr);
  for (size_t off = SMALL; off < BIG; off += 4096) p[off] = 1;
  const int64_t full = rss_bytes();
  p = static_cast<char*>(realloc(p, SMALL));
  CHECK(p != nullptr);
  int64_t rss = full;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    rss = rss_bytes();
    if (rss <= full - GIVEN_BACK) break;
    usleep(10'000);
  }
  printf("rss: %lld with the big buffer, %lld after the wash\n", static_cast<long long>(full),
         static_cast<long long>(rss));
  CHECK(rss <= full - GIVEN_BACK);
  bool intact = true;
  for (size_t i = 0; i < SMALL; ++i) intact = intact && p[i] == 7;
  CHECK(intact);
  // Grown again after the trim: a new mapping tail, every byte usable.
  p = static_cast<char*>(realloc(p, BIG));
  CHECK(p != nullptr && p[SMALL - 1] == 7);
  memset(p + SMALL, 3, BIG - SMALL);
  free(p);
  if (g_failures == 0) printf("shrunk_buffer ok\n");
  return g_failures == 0 ? 0 : 1;
}
