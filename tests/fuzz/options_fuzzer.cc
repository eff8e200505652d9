// libFuzzer target: random text for the options parser (options_driver.h).
// Built with clang by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "options_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  achunk::fuzz::run_options_input(data, size);
  return 0;
}
