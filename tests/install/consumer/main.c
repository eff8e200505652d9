/* A C program built with pkg-config against an installed achunk. */
#include <achunk/achunk.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  char* p = achunk_malloc(64);
  strcpy(p, "c ok");
  puts(p);
  achunk_free(p);
  return 0;
}
