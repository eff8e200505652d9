// Fuzz driver for the options parser (base layer): one input is tried as an ACHUNK_CONF
// string and, through parse_option_value, as a value of one option. Shared by the
// libFuzzer target and the GoogleTest property test. Checks abort with one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "achunk/base/options.h"

namespace achunk::fuzz {

#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

inline void count_warning(void* ctx, const char* message) {
  FUZZ_CHECK(std::strlen(message) < 400);
  ++*static_cast<int*>(ctx);
}

inline void check_in_range(const Options& opts) {
  for (int i = 0; i < OPTION_COUNT; ++i) {
    const OptionDef& d = OPTION_TABLE[i];
    FUZZ_CHECK(opts.values[i] >= d.min && opts.values[i] <= d.max);
  }
}

// Oracle: parsing the whole string equals applying its entries one at a time, and an
// entry that warns changes nothing.
inline void run_options_input(const uint8_t* data, size_t size) {
  if (size > 4096) size = 4096;
  char conf[4097];
  if (size > 0) std::memcpy(conf, data, size);  // data may be null when size is 0
  conf[size] = '\0';  // parse_conf stops at the first NUL, as getenv's string would

  Options whole;
  int sunk = 0;
  const int warnings = parse_conf(conf, &whole, count_warning, &sunk);
  FUZZ_CHECK(warnings == sunk);
  check_in_range(whole);

  Options folded;
  int folded_warnings = 0;
  const char* p = conf;
  while (true) {
    const char* end = std::strchr(p, ',');
    const size_t len = end != nullptr ? static_cast<size_t>(end - p) : std::strlen(p);
    char entry[4097];
    std::memcpy(entry, p, len);
    entry[len] = '\0';
    Options before = folded;
    const int w = parse_conf(entry, &folded, nullptr, nullptr);
    FUZZ_CHECK(w == 0 || w == 1);
    if (w == 1) FUZZ_CHECK(std::memcmp(before.values, folded.values, sizeof(before.values)) == 0);
    folded_warnings += w;
    if (end == nullptr) break;
    p = end + 1;
  }
  FUZZ_CHECK(folded_warnings == warnings);
  FUZZ_CHECK(std::memcmp(whole.values, folded.values, sizeof(whole.values)) == 0);

  // The same bytes (NULs included) as a value of the option the first byte picks.
  if (size == 0) return;
  const OptionDef& def = OPTION_TABLE[data[0] % OPTION_COUNT];
  const int64_t sentinel = INT64_MIN + 7;
  int64_t out = sentinel;
  char err[64];
  std::memset(err, 'x', sizeof(err));
  const int64_t err_len = 1 + data[0] % sizeof(err);
  if (parse_option_value(def, conf + 1, size - 1, &out, err, err_len)) {
    FUZZ_CHECK(out >= def.min && out <= def.max);
  } else {
    FUZZ_CHECK(out == sentinel);
    FUZZ_CHECK(std::memchr(err, '\0', static_cast<size_t>(err_len)) != nullptr);
  }
}

}  // namespace achunk::fuzz
