// Run under LD_PRELOAD=libachunk_malloc.so with its defaults: a pool of 200 connection
// threads, each holding 100 objects of 16-515 B. Within their shared budget
// (shared_slab_bytes, 64K in the drop-in malloc) the threads share slabs and take no
// heap: the carved slots stay near the objects' slots, where a slab per class per thread
// carved about three times their bytes and a heap span each (`other=`).
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "check.h"

namespace {

// The figure after `key` in the usage print (digits and thousands commas), or -1.
int64_t usage_field(const char* usage, const char* key) {
  const char* at = std::strstr(usage, key);
  if (at == nullptr) return -1;
  at += std::strlen(key);
  while (*at == ' ') ++at;
  int64_t v = 0;
  bool any = false;
  for (; (*at >= '0' && *at <= '9') || *at == ','; ++at) {
    if (*at == ',') continue;
    v = v * 10 + (*at - '0');
    any = true;
  }
  return any ? v : -1;
}

}  // namespace

int main() {
  using PrintUsage = int64_t (*)(char*, size_t, int);
  auto print_usage = reinterpret_cast<PrintUsage>(dlsym(RTLD_DEFAULT, "achunk_print_usage"));
  if (print_usage == nullptr) {
    printf("run me under LD_PRELOAD=libachunk_malloc.so\n");
    return 1;
  }
  constexpr int THREADS = 200;
  constexpr int OBJECTS = 100;
  static char usage[1 << 16];
  int64_t slot_bytes = 0;  // the objects' slots: size, header and canary, 16-aligned
  for (int t = 0; t < THREADS; ++t) {
    for (int i = 0; i < OBJECTS; ++i) slot_bytes += (16 + (i * 37 + t) % 500 + 16 + 15) & ~15;
  }
  std::barrier all_held(THREADS + 1);
  std::barrier measured(THREADS + 1);
  std::vector<std::thread> ts;
  for (int t = 0; t < THREADS; ++t) {
    ts.emplace_back([&, t] {
      void* held[OBJECTS];
      for (int i = 0; i < OBJECTS; ++i) {
        const size_t s = 16 + (i * 37 + t) % 500;
        held[i] = malloc(s);
        memset(held[i], 1, s);
      }
      all_held.arrive_and_wait();
      measured.arrive_and_wait();
      for (void* p : held) free(p);
    });
  }
  all_held.arrive_and_wait();
  print_usage(usage, sizeof(usage), 0);
  measured.arrive_and_wait();
  for (std::thread& t : ts) t.join();
  const int64_t carved = usage_field(usage, "slab_slots=");
  const int64_t heaps = usage_field(usage, "other=");
  printf("objects' slots %lld, carved %lld, heaps and lent spans %lld\n",
         static_cast<long long>(slot_bytes), static_cast<long long>(carved),
         static_cast<long long>(heaps));
  // Classes round up by at most a quarter; the shared slabs are carved a page ahead.
  CHECK(carved > 0 && carved <= slot_bytes * 3 / 2);
  CHECK(heaps >= 0 && heaps <= 64 * 1024);
  if (g_failures == 0) printf("conn_pool ok\n");
  return g_failures == 0 ? 0 : 1;
}
