// Run under LD_PRELOAD=libachunk_malloc.so with libpreload_atfork_lib.so preloaded before
// or after it, or with "dlopen PATH" to load the library at run time: fork repeatedly
// while other threads allocate; the library's atfork handlers allocate in prepare, parent
// and child. Every fork must return and every child allocate and exit 0.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "fork_churn.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "dlopen") == 0 &&
      dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  using Calls = int (*)();
  auto calls = reinterpret_cast<Calls>(dlsym(RTLD_DEFAULT, "atfork_lib_calls"));
  if (calls == nullptr) {
    std::printf("the atfork library is not loaded\n");
    return 1;
  }
  // A watchdog: a hang is a failure, not a stuck test.
  alarm(60);
  const int before = calls();
  constexpr int FORKS = 40;
  const int failures = fork_while_threads_allocate(FORKS, 70000, 50);
  // Prepare and parent handlers in this process, per fork.
  const int ran = calls() - before;
  std::printf("atfork ok, %d failures, %d handler runs\n", failures, ran);
  return failures == 0 && ran == 2 * FORKS ? 0 : 1;
}
