// A shared library like many others: its constructor registers pthread_atfork handlers
// that allocate and free in prepare, parent and child. Loaded before or after
// libachunk_malloc.so (LD_PRELOAD order) or dlopen()ed, so its prepare handler runs after
// or before achunk's.
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<int> g_calls{0};

void churn() {
  // A small object, a slab-sized one and a big one: every allocation path of achunk.
  static const size_t sizes[] = {24, 3000, 40000, 1 << 20};
  for (size_t n : sizes) {
    char* p = static_cast<char*>(std::malloc(n));
    if (p == nullptr) std::abort();
    std::memset(p, 0x5a, n);
    p = static_cast<char*>(std::realloc(p, n * 2));
    if (p == nullptr) std::abort();
    std::free(p);
  }
  g_calls.fetch_add(1);
}

__attribute__((constructor)) void register_handlers() {
  pthread_atfork(&churn, &churn, &churn);
}

}  // namespace

// Handler runs so far (in this process: a child counts its parent's too).
extern "C" __attribute__((visibility("default"))) int atfork_lib_calls() {
  return g_calls.load();
}
