// Run under LD_PRELOAD=libachunk_malloc.so: the drop-in malloc brings no library into the
// process beyond the C and C++ runtimes, starts no iostreams, and adds little TLS: glibc
// copies and zeroes a library's TLS block at every thread start, allocating or not (the
// caches live in a ThreadState taken on a thread's first allocation). absl (the context
// layer's API) once came with it: some 25 libraries mapped into every process, and
// absl's <iostream> initialising the C++ streams at load, which doubled a short
// program's start-up time and added about 1.5 MiB of resident pages.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int g_failures = 0;
const char* g_achunk_path = nullptr;
// TLS bytes the library may add to every thread: its thread's state pointer, identity,
// shared-slab budget, last failure and a few hints.
constexpr size_t TLS_MAX = 128;

int check_library(dl_phdr_info* info, size_t, void*) {
  const char* name = info->dlpi_name;
  if (name != nullptr && std::strstr(name, "libabsl_") != nullptr) {
    std::fprintf(stderr, "FAIL: %s is mapped\n", name);
    ++g_failures;
  }
  if (name != nullptr && g_achunk_path != nullptr && std::strcmp(name, g_achunk_path) == 0) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      if (ph.p_type == PT_TLS && ph.p_memsz > TLS_MAX) {
        std::fprintf(stderr, "FAIL: %s has %zu bytes of TLS, more than %zu\n", name,
                     static_cast<size_t>(ph.p_memsz), TLS_MAX);
        ++g_failures;
      }
    }
  }
  return 0;
}

}  // namespace

int main() {
  void* p = std::malloc(100);  // the allocator is in use
  if (p == nullptr) return 1;
  void* sym = dlsym(RTLD_DEFAULT, "achunk_malloc");
  Dl_info where{};
  if (sym == nullptr || dladdr(sym, &where) == 0) {
    std::fprintf(stderr, "FAIL: run me under LD_PRELOAD=libachunk_malloc.so\n");
    return 1;
  }
  g_achunk_path = where.dli_fname;
  dl_iterate_phdr(&check_library, nullptr);
  std::free(p);
  if (g_failures != 0) return 1;
  std::puts("footprint ok");
  return 0;
}
