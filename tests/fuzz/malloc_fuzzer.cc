// libFuzzer target: random operation sequences on the drop-in C API (malloc_driver.h).
// Built with clang by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "malloc_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  achunk::fuzz::run_malloc_input(data, size);
  return 0;
}
