// Run under LD_PRELOAD=libachunk_malloc.so: glibc's extras (mallinfo2, mallinfo,
// malloc_trim, malloc_stats, malloc_info, mallopt) report achunk's memory.
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "check.h"

int main() {
  const struct mallinfo2 before = mallinfo2();
  std::vector<void*> big;
  for (int i = 0; i < 16; ++i) {
    big.push_back(malloc(3 << 20));
    memset(big.back(), 1, 3 << 20);
  }
  const struct mallinfo2 during = mallinfo2();
  CHECK(during.arena >= before.arena + (48u << 20));
  CHECK(during.uordblks >= before.uordblks + (48u << 20));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const struct mallinfo old = mallinfo();  // the int version, still called by old code
#pragma GCC diagnostic pop
  CHECK(static_cast<size_t>(old.arena) == (during.arena > 0x7fffffff ? 0x7fffffffu : during.arena));
  for (void* p : big) free(p);
  // Freed chunks go to the cache (fordblks); trim gives them back.
  CHECK(malloc_trim(0) == 1);
  const struct mallinfo2 after = mallinfo2();
  CHECK(after.fordblks == 0);
  CHECK(after.keepcost == 0);
  CHECK(after.arena < during.arena);
  CHECK(mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1);
  CHECK(mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1);
  CHECK(mallopt(M_ARENA_MAX, 2) == 0);

  char* xml = nullptr;
  size_t xml_len = 0;
  FILE* f = open_memstream(&xml, &xml_len);
  CHECK(malloc_info(0, f) == 0);
  fclose(f);
  CHECK(xml != nullptr && strstr(xml, "<malloc version=\"achunk-1\">") != nullptr);
  CHECK(xml != nullptr && strstr(xml, "<total type=\"arena\"") != nullptr);
  free(xml);

  // malloc_stats on stderr, captured through a temporary file.
  char path[] = "/tmp/achunk_extrasXXXXXX";
  const int fd = mkstemp(path);
  const int saved = dup(2);
  dup2(fd, 2);
  malloc_stats();
  dup2(saved, 2);
  std::string out(1 << 16, '\0');
  const ssize_t n = pread(fd, out.data(), out.size(), 0);
  close(fd);
  unlink(path);
  out.resize(n > 0 ? n : 0);
  CHECK(out.find("[chunk_mgr]") != std::string::npos);
  CHECK(out.find("[MEMORY]") != std::string::npos);

  printf("extras ok, %d failures\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
