// Run under LD_PRELOAD=libachunk_malloc.so: C++'s operator new and delete are achunk's,
// and keep the standard's contract: alignment, the new_handler loop, bad_alloc, nothrow.
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>

#include <new>
#include <vector>

#include "check.h"

// Above what any allocator can serve, so every call fails.
static const size_t IMPOSSIBLE = SIZE_MAX / 4;

static int g_handler_calls = 0;
// Gives up at its second call, as a handler with nothing left to free does.
static void handler() {
  if (++g_handler_calls == 2) std::set_new_handler(nullptr);
}

static int g_throwing_calls = 0;
// Throws at once, as a handler may: new passes it on, nothrow new gives nullptr.
static void throwing_handler() {
  ++g_throwing_calls;
  throw std::bad_alloc();
}

static bool throws_bad_alloc(size_t align) {
  try {
    void* p = align == 0 ? ::operator new(IMPOSSIBLE)
                         : ::operator new(IMPOSSIBLE, std::align_val_t(align));
    ::operator delete(p);
    return false;
  } catch (const std::bad_alloc&) {
    return true;
  }
}

int main() {
  // Objects of every small size, then bigger ones, written end to end and given back with
  // each form of delete. achunk's usage counts them (glibc's would too, but mallinfo2 is
  // achunk's under the preload: glibc_extras checks that).
  const size_t before = mallinfo2().uordblks;
  std::vector<char*> held;
  for (size_t n = 1; n <= 70000; n += n < 1024 ? 1 : n / 8) {
    char* p = static_cast<char*>(::operator new(n));
    CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i);
    held.push_back(p);
  }
  CHECK(mallinfo2().uordblks >= before + 500'000);
  size_t n = 1;
  for (char* p : held) {
    CHECK(p[n - 1] == static_cast<char>(n - 1));
    if (n % 3 == 0) {
      ::operator delete(p);
    } else {
      ::operator delete(p, n);  // what a C++14 compiler emits for a class type
    }
    n += n < 1024 ? 1 : n / 8;
  }
  delete[] new char[300];

  // Over-aligned types: each alignment honoured, the hit's (up to 64) and the rest.
  for (size_t align = 32; align <= 8192; align *= 2) {
    for (size_t size : {size_t{1}, size_t{48}, size_t{1000}, size_t{5000}}) {
      void* p = ::operator new(size, std::align_val_t(align));
      CHECK(reinterpret_cast<uintptr_t>(p) % align == 0);
      static_cast<char*>(p)[size - 1] = 1;
      ::operator delete(p, size, std::align_val_t(align));
      void* q = ::operator new[](size, std::align_val_t(align));
      CHECK(reinterpret_cast<uintptr_t>(q) % align == 0);
      ::operator delete[](q, std::align_val_t(align));
    }
  }

  // A failed new calls the handler until it gives up, then throws; nothrow gives nullptr.
  std::set_new_handler(handler);
  CHECK(throws_bad_alloc(0));
  CHECK(g_handler_calls == 2);
  g_handler_calls = 0;
  std::set_new_handler(handler);
  CHECK(throws_bad_alloc(64));
  CHECK(g_handler_calls == 2);
  CHECK(::operator new(IMPOSSIBLE, std::nothrow) == nullptr);
  CHECK(::operator new[](IMPOSSIBLE, std::align_val_t(64), std::nothrow) == nullptr);

  // The library links no libstdc++: a handler that throws still reaches the caller of
  // new, and is caught for nothrow new (by the program's libstdc++).
  std::set_new_handler(throwing_handler);
  CHECK(throws_bad_alloc(0));
  CHECK(throws_bad_alloc(64));
  CHECK(::operator new(IMPOSSIBLE, std::nothrow) == nullptr);
  CHECK(::operator new[](IMPOSSIBLE, std::nothrow) == nullptr);
  CHECK(::operator new(IMPOSSIBLE, std::align_val_t(64), std::nothrow) == nullptr);
  CHECK(::operator new[](IMPOSSIBLE, std::align_val_t(64), std::nothrow) == nullptr);
  CHECK(g_throwing_calls == 6);
  std::set_new_handler(nullptr);
  CHECK(::operator new(IMPOSSIBLE, std::nothrow) == nullptr);

  if (g_failures == 0) printf("cxx_new ok\n");
  return g_failures == 0 ? 0 : 1;
}
