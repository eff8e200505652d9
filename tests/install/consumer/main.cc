// Uses the installed C and C++ APIs; prints "consumer ok" when everything worked.
#include <achunk/achunk.h>
#include <achunk/achunk.hpp>

#include <cstdio>
#include <cstring>

int main() {
  char* p = static_cast<char*>(achunk_malloc(100));
  std::strcpy(p, "hello");
  achunk_free(p);
  void* chunk = achunk::chunk_alloc(1 << 20);
  if (chunk == nullptr) return 1;
  achunk::chunk_free(chunk);
  char buf[4096];
  achunk::print_chunk_dump(buf, sizeof(buf));
  if (std::strncmp(buf, "[chunk_mgr]", 11) != 0) return 2;
  std::printf("consumer ok\n");
  return 0;
}
