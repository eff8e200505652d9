// The preload programs' check: runs under LD_PRELOAD without GoogleTest, so a failed
// check prints its line and counts; main() returns non-zero if any failed.
#pragma once

#include <stdio.h>

inline int g_failures = 0;
#define CHECK(c)                                             \
  do {                                                       \
    if (!(c)) {                                              \
      printf("check failed at line %d: %s\n", __LINE__, #c); \
      ++g_failures;                                          \
    }                                                        \
  } while (0)
