// The fuzz drivers as seeded randomised property tests, so they run in every build
// (gcc, ASan, TSan) whether or not clang's libFuzzer is there. Suites are *StressTest:
// ctest label "stress".
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "malloc_driver.h"
#include "options_driver.h"

namespace achunk::fuzz {
namespace {

std::vector<uint8_t> random_input(std::mt19937_64& rng, size_t max_len) {
  std::vector<uint8_t> in(rng() % (max_len + 1));
  for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
  return in;
}

TEST(FuzzMallocStressTest, RandomOperationSequences) {
  std::mt19937_64 rng(0xac4c'0019);
  for (int run = 0; run < 150; ++run) {
    const std::vector<uint8_t> in = random_input(rng, 1500);
    run_malloc_input(in.data(), in.size());
  }
}

// Text built from option names, separators, digits and suffixes, so most entries get
// past the key lookup, plus raw bytes.
TEST(FuzzOptionsStressTest, RandomConfStrings) {
  std::mt19937_64 rng(0x0f7'0019);
  static const char* const PIECES[] = {
      ",", ":", "-", "0",  "1", "9",    "K",   "M",
      "G", "T", "b", "iB", "B", "true", "off", "99999999999999999999",
      ""};
  for (int run = 0; run < 20000; ++run) {
    std::string conf;
    const int parts = static_cast<int>(rng() % 12);
    for (int i = 0; i < parts; ++i) {
      const uint64_t r = rng();
      if (r % 4 == 0) {
        conf += OPTION_TABLE[r / 4 % OPTION_COUNT].name;
      } else if (r % 4 == 1) {
        conf += static_cast<char>(r >> 8);
      } else {
        conf += PIECES[r / 4 % (sizeof(PIECES) / sizeof(PIECES[0]))];
      }
    }
    run_options_input(reinterpret_cast<const uint8_t*>(conf.data()), conf.size());
    const std::vector<uint8_t> raw = random_input(rng, 64);
    run_options_input(raw.data(), raw.size());
  }
}

}  // namespace
}  // namespace achunk::fuzz
