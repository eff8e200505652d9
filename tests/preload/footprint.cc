// Run under LD_PRELOAD=libachunk_malloc.so: the drop-in malloc brings no library into the
// process beyond the C and C++ runtimes, and starts no iostreams. absl (the context
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

int check_library(dl_phdr_info* info, size_t, void*) {
  const char* name = info->dlpi_name;
  if (name != nullptr && std::strstr(name, "libabsl_") != nullptr) {
    std::fprintf(stderr, "FAIL: %s is mapped\n", name);
    ++g_failures;
  }
  return 0;
}

}  // namespace

int main() {
  void* p = std::malloc(100);  // the allocator is in use
  if (p == nullptr) return 1;
  if (dlsym(RTLD_DEFAULT, "achunk_malloc") == nullptr) {
    std::fprintf(stderr, "FAIL: run me under LD_PRELOAD=libachunk_malloc.so\n");
    return 1;
  }
  dl_iterate_phdr(&check_library, nullptr);
  std::free(p);
  if (g_failures != 0) return 1;
  std::puts("footprint ok");
  return 0;
}
