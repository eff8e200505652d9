// Run under LD_PRELOAD=libachunk_malloc.so: an object freed by another call family than
// the one that allocated it (free of new's, delete of new[]'s, delete or realloc of
// malloc's) is reported at that free, naming the pointer and both calls, then the process
// aborts. Matching pairs, in every form of new and delete, say nothing. With the argument
// "off" (run with ACHUNK_CONF=dealloc_mismatch:0) every mismatch frees as asked.
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <string>

#include "check.h"

// The compiler may drop a new paired with a delete it sees; the barrier hides the pointer.
static void* opaque(void* p) {
  asm volatile("" : "+r"(p) : : "memory");
  return p;
}

enum Case {
  FREE_OF_NEW,
  FREE_OF_NEW_ARRAY,
  DELETE_OF_MALLOC,
  DELETE_OF_NEW_ARRAY,
  DELETE_ARRAY_OF_NEW,
  SIZED_DELETE_OF_NEW_ARRAY,
  REALLOC_OF_NEW,
  DELETE_OF_BIG_NEW_ARRAY,
  ALIGNED_DELETE_OF_ALIGNED_NEW_ARRAY,
  CASES
};

struct Expect {
  const char* allocated_by;
  const char* freed_by;
};
static const Expect EXPECT[CASES] = {
    {"operator new", "free"},
    {"operator new[]", "free"},
    {"malloc", "operator delete"},
    {"operator new[]", "operator delete"},
    {"operator new", "operator delete[]"},
    {"operator new[]", "operator delete"},
    {"operator new", "realloc"},
    {"operator new[]", "operator delete"},
    {"operator new[]", "operator delete"},
};

// The mismatch of `c` on a fresh object; returns only when the free let it pass.
static void mismatch(Case c) {
  switch (c) {
    case FREE_OF_NEW:
      free(opaque(::operator new(24)));
      break;
    case FREE_OF_NEW_ARRAY:
      free(opaque(::operator new[](24)));
      break;
    case DELETE_OF_MALLOC:
      ::operator delete(opaque(malloc(24)));
      break;
    case DELETE_OF_NEW_ARRAY:
      ::operator delete(opaque(::operator new[](24)));
      break;
    case DELETE_ARRAY_OF_NEW:
      ::operator delete[](opaque(::operator new(24)));
      break;
    case SIZED_DELETE_OF_NEW_ARRAY:
      ::operator delete(opaque(::operator new[](24)), 24);
      break;
    case REALLOC_OF_NEW:
      free(realloc(opaque(::operator new(24)), 100));
      break;
    case DELETE_OF_BIG_NEW_ARRAY:
      ::operator delete(opaque(::operator new[](1 << 20)));
      break;
    case ALIGNED_DELETE_OF_ALIGNED_NEW_ARRAY:
      ::operator delete(opaque(::operator new[](100, std::align_val_t(256))),
                        std::align_val_t(256));
      break;
    case CASES:
      break;
  }
}

// Runs the mismatch in a child with its stderr in a pipe: its exit status and what it said.
static int run_child(Case c, std::string* said) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    mismatch(c);
    _exit(0);
  }
  close(fds[1]);
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) said->append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Every matching pair, each form of delete: nothing reported.
static void matching_pairs() {
  for (size_t n : {size_t{24}, size_t{1} << 20}) {
    ::operator delete(opaque(::operator new(n)));
    ::operator delete(opaque(::operator new(n)), n);
    ::operator delete[](opaque(::operator new[](n)));
    ::operator delete[](opaque(::operator new[](n)), n);
    ::operator delete(opaque(::operator new(n, std::nothrow)), std::nothrow);
    ::operator delete[](opaque(::operator new[](n, std::nothrow)), std::nothrow);
    const std::align_val_t a{128};
    ::operator delete(opaque(::operator new(n, a)), a);
    ::operator delete(opaque(::operator new(n, a)), n, a);
    ::operator delete[](opaque(::operator new[](n, a)), a);
    ::operator delete[](opaque(::operator new[](n, a)), n, a);
    free(realloc(opaque(malloc(n)), n * 2));
    void* p = nullptr;
    if (posix_memalign(&p, 64, n) == 0) free(opaque(p));
    // malloc_usable_size rewrites the header to the slot's size; the origin stays.
    void* q = opaque(::operator new[](n));
    CHECK(malloc_usable_size(q) >= n);
    ::operator delete[](q);
  }
}

int main(int argc, char** argv) {
  const bool off = argc > 1 && strcmp(argv[1], "off") == 0;
  matching_pairs();
  for (int c = 0; c < CASES; ++c) {
    std::string said;
    const int status = run_child(static_cast<Case>(c), &said);
    if (off) {
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      CHECK(said.empty());
      continue;
    }
    const std::string both =
        std::string("allocated by ") + EXPECT[c].allocated_by + ", freed by " + EXPECT[c].freed_by;
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK(said.find("achunk: alloc-dealloc mismatch of 0x") != std::string::npos);
    CHECK(said.find(both) != std::string::npos);
    if (g_failures > 0) printf("case %d said: %s\n", c, said.c_str());
  }
  printf("%d failures\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
