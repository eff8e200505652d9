// Run under LD_PRELOAD=libachunk_malloc.so: fork repeatedly while other threads allocate
// and free; every child must be able to allocate, use and free memory and exit 0.
#include <cstdio>

#include "fork_churn.h"

int main() {
  const int failures = fork_while_threads_allocate(50, 5000, 1);
  std::printf("fork ok, %d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
