// Fuzz driver for the drop-in C API (achunk_malloc & co.): the input is read as a
// sequence of operations (malloc, calloc, realloc, memalign, posix_memalign,
// aligned_alloc, free) on 64 slots with sizes and alignments it picks. Every object is
// filled with a pattern, up to its usable size, and checked before it is freed or
// reallocated. Shared by the libFuzzer target and the GoogleTest property test.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "achunk/achunk.h"
#include "options_driver.h"  // FUZZ_CHECK

namespace achunk::fuzz {

class MallocDriver {
 public:
  MallocDriver(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  ~MallocDriver() {
    for (Slot& s : slots_) release(s);
  }

  void run() {
    while (pos_ < size_) {
      Slot& s = slots_[byte() % SLOTS];
      switch (byte() % 8) {
        case 0:
        case 1:
          last_size_ = pick_size();
          place(s, achunk_malloc(last_size_), 0);
          break;
        case 2:
          calloc_into(s);
          break;
        case 3:
          realloc_into(s);
          break;
        case 4:
          aligned_into(s, 0);
          break;
        case 5:
          aligned_into(s, 1);
          break;
        case 6:
          aligned_into(s, 2);
          break;
        default:
          release(s);
          break;
      }
    }
  }

 private:
  static constexpr int SLOTS = 64;
  struct Slot {
    uint8_t* p = nullptr;
    size_t size = 0;    // what the caller asked for
    size_t filled = 0;  // bytes carrying the pattern (the usable size when filled)
    uint8_t seed = 0;
  };

  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t word() { return byte() | uint32_t{byte()} << 8 | uint32_t{byte()} << 16; }

  // Mostly small classes, then spans, then big chunks; rarely tens of MiB.
  size_t pick_size() {
    const uint8_t kind = byte();
    const uint32_t w = word();
    if (kind < 160) return w % 1025;
    if (kind < 220) return w % (64 << 10);
    if (kind < 254) return w % (3 << 20);
    return w % (40 << 20);
  }

  // An object's pattern is a prime-length table of random bytes read from an offset its
  // seed picks, so fill and checks are memcpy and memcmp: a sanitizer checks each call's
  // range once instead of every byte (TSan took minutes byte by byte over big blocks).
  static constexpr size_t PERIOD = 65521;
  static const uint8_t* pattern_table() {
    static const struct Table {
      uint8_t bytes[2 * PERIOD];
      Table() {
        uint32_t x = 0x9e3779b9u;
        for (size_t i = 0; i < PERIOD; ++i) {
          x = x * 1664525u + 1013904223u;
          bytes[i] = bytes[i + PERIOD] = static_cast<uint8_t>(x >> 24);
        }
      }
    } table;
    return table.bytes;
  }
  // The pattern of bytes [from, to) of an object with `seed`, in runs of at most PERIOD.
  template <typename F>
  static void for_each_run(uint8_t seed, size_t from, size_t to, F f) {
    for (size_t i = from; i < to;) {
      const size_t n = to - i < PERIOD ? to - i : PERIOD;
      f(i, pattern_table() + (seed * size_t{977} + i) % PERIOD, n);
      i += n;
    }
  }
  // Whether bytes [0, n) of p carry the pattern of `seed`; else *bad is the first that does not.
  static bool has_pattern(const uint8_t* p, uint8_t seed, size_t n, size_t* bad) {
    bool ok = true;
    for_each_run(seed, 0, n, [&](size_t at, const uint8_t* want, size_t len) {
      if (!ok || std::memcmp(p + at, want, len) == 0) return;
      ok = false;
      *bad = at;
      while (p[*bad] == want[*bad - at]) ++*bad;
    });
    return ok;
  }

  void fill(Slot& s, size_t from) {
    for_each_run(s.seed, from, s.filled, [&](size_t at, const uint8_t* src, size_t len) {
      std::memcpy(s.p + at, src, len);
    });
  }
  void verify(const Slot& s) {
    FUZZ_CHECK(achunk_malloc_usable_size(s.p) >= s.size);
    size_t bad = 0;
    if (!has_pattern(s.p, s.seed, s.filled, &bad)) {
      std::fprintf(stderr, "fuzz: byte %zu of %p (size %zu) overwritten\n", bad,
                   static_cast<void*>(s.p), s.size);
      std::abort();
    }
  }
  static bool all_zero(const uint8_t* p, size_t n) {
    static const uint8_t ZEROS[4096] = {};
    for (size_t i = 0; i < n; i += sizeof(ZEROS)) {
      const size_t len = n - i < sizeof(ZEROS) ? n - i : sizeof(ZEROS);
      if (std::memcmp(p + i, ZEROS, len) != 0) return false;
    }
    return true;
  }

  void release(Slot& s) {
    if (s.p == nullptr) return;
    verify(s);
    achunk_free(s.p);
    s = Slot{};
  }

  // Takes ownership of p (size bytes asked, alignment checked when given).
  void place(Slot& s, void* p, size_t align) {
    release(s);
    if (p == nullptr) return;  // a refused size is allowed; a crash is not
    if (align != 0) FUZZ_CHECK(reinterpret_cast<uintptr_t>(p) % align == 0);
    s.p = static_cast<uint8_t*>(p);
    s.size = last_size_;
    s.filled = achunk_malloc_usable_size(p);
    FUZZ_CHECK(s.filled >= s.size);
    s.seed = static_cast<uint8_t>(++serial_);
    fill(s, 0);
  }

  void calloc_into(Slot& s) {
    const size_t n = byte() % 17;
    const size_t each = pick_size() / 8;
    last_size_ = n * each;
    void* p = achunk_calloc(n, each);
    if (p != nullptr) FUZZ_CHECK(all_zero(static_cast<uint8_t*>(p), last_size_));
    place(s, p, 0);
  }

  void realloc_into(Slot& s) {
    const size_t n = pick_size();
    if (s.p != nullptr) verify(s);
    void* p = achunk_realloc(s.p, n);
    if (p == nullptr) {
      if (n == 0) s = Slot{};  // realloc(p, 0) frees p
      return;                  // else the old object stays, still verified later
    }
    // The old pattern survives up to the smaller of the old and new sizes.
    const size_t keep = s.p == nullptr ? 0 : (s.size < n ? s.size : n);
    uint8_t* q = static_cast<uint8_t*>(p);
    size_t bad = 0;
    FUZZ_CHECK(has_pattern(q, s.seed, keep, &bad));
    s.p = q;
    s.size = n;
    s.filled = achunk_malloc_usable_size(p);
    FUZZ_CHECK(s.filled >= n);
    if (s.seed == 0) s.seed = static_cast<uint8_t>(++serial_);
    fill(s, keep);
  }

  // how: 0 memalign, 1 posix_memalign, 2 aligned_alloc. Alignments 1 B - 1 MiB, and
  // sometimes not a power of two, which posix_memalign must refuse with EINVAL, or a
  // power of two past the largest served (2^41-2^63), which all three must refuse.
  void aligned_into(Slot& s, int how) {
    const uint8_t a = byte();
    size_t align = size_t{1} << (a % 21);
    const bool odd = a >= 240;
    if (odd) align += 8 * (1 + a % 7);
    const bool absurd = a >= 224 && a < 240;
    if (absurd) align = size_t{1} << (41 + a % 23);
    last_size_ = pick_size();
    void* p = nullptr;
    if (how == 0) {
      p = achunk_memalign(align, last_size_);
    } else if (how == 1) {
      if (align < sizeof(void*)) align = sizeof(void*);
      const int rc = achunk_posix_memalign(&p, align, last_size_);
      if (odd) FUZZ_CHECK(rc == EINVAL && p == nullptr);
      if (absurd) FUZZ_CHECK(rc == ENOMEM && p == nullptr);
      if (rc != 0) p = nullptr;
    } else {
      p = achunk_aligned_alloc(align, last_size_);
    }
    if (absurd) FUZZ_CHECK(p == nullptr);
    if (odd) {
      // Refused, or (memalign and aligned_alloc, like glibc) rounded up to a power of two.
      size_t pow2 = 1;
      while (pow2 < align) pow2 <<= 1;
      place(s, p, pow2);
    } else {
      place(s, p, align);
    }
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  size_t last_size_ = 0;
  uint32_t serial_ = 0;
  Slot slots_[SLOTS];
};

inline void run_malloc_input(const uint8_t* data, size_t size) {
  MallocDriver(data, size).run();
}

}  // namespace achunk::fuzz
