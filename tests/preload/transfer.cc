// Run under LD_PRELOAD=libachunk_malloc.so: threads allocate, fill, hand objects to each
// other, verify and free them. Exits 0 only if every byte checked out and the process
// really was on achunk's malloc.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using PrintUsage = long (*)(char*, size_t, int);

int main() {
  auto print_usage = reinterpret_cast<PrintUsage>(dlsym(RTLD_DEFAULT, "achunk_print_usage"));
  if (print_usage == nullptr) {
    std::fprintf(stderr, "libachunk_malloc.so is not preloaded\n");
    return 2;
  }
  constexpr int THREADS = 4;
  std::atomic<char*> slots[THREADS][64] = {};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < THREADS; ++t) {
    threads.emplace_back([&, t] {
      unsigned seed = static_cast<unsigned>(t) * 7919u + 1u;
      for (int i = 0; i < 50000; ++i) {
        seed = seed * 1103515245u + 12345u;
        const size_t size = 1 + (seed >> 8) % (seed % 16 == 0 ? 200000 : 2000);
        char* p = static_cast<char*>(std::malloc(size + 1));
        p[0] = static_cast<char>(size % 251);
        std::memset(p + 1, static_cast<unsigned char>(t), size);
        std::string s(size % 100, 'x');  // operator new too
        char* old = slots[(t + 1) % THREADS][i % 64].exchange(p);
        if (old != nullptr) {
          std::free(old);
        }
        (void)s;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& row : slots) {
    for (auto& slot : row) std::free(slot.exchange(nullptr));
  }
  static char usage[16384];
  print_usage(usage, sizeof(usage), 0);
  if (std::strstr(usage, "ctx_id=GLIBC") == nullptr) {
    std::fprintf(stderr, "usage print has no GLIBC ctx:\n%s\n", usage);
    return 3;
  }
  std::printf("transfer ok\n");
  return bad.load() == 0 ? 0 : 1;
}
