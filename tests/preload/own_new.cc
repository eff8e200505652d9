// Run under LD_PRELOAD=libachunk_malloc.so: a program that defines operator new and the
// plain operator delete of its own (over malloc and free) but not the sized delete the
// compiler calls, which is then libachunk_malloc.so's. Under glibc that pairing works, so
// it must here: achunk's delete meets objects its own new never marked, and no free is
// reported as a mismatch.
// What the compiler warns about is the point of the test.
#pragma GCC diagnostic ignored "-Wsized-deallocation"
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <stdio.h>
#include <stdlib.h>

#include <new>
#include <vector>

#include "check.h"

static int g_news = 0;

void* operator new(size_t n) {
  ++g_news;
  if (void* p = malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  free(p);
}

static void* opaque(void* p) {
  asm volatile("" : "+r"(p) : : "memory");
  return p;
}

int main() {
  for (size_t n : {size_t{16}, size_t{1000}, size_t{1} << 20}) {
    ::operator delete(opaque(::operator new(n)), n);  // the sized delete: achunk's
    ::operator delete(opaque(::operator new(n)));     // the program's
    // new[] and delete[] are achunk's, over the program's new and delete (libstdc++'s
    // forward) or its own: either way each pair matches.
    ::operator delete[](opaque(::operator new[](n)));
    ::operator delete[](opaque(::operator new[](n)), n);
    free(opaque(::operator new[](n)));  // a mismatch achunk can no longer tell, so allowed
  }
  std::vector<int>* v = new std::vector<int>(1000, 7);
  delete v;
  CHECK(g_news >= 4);
  printf("%d failures\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
