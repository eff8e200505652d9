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

  static uint8_t pattern(uint8_t seed, size_t i) {
    return static_cast<uint8_t>(seed + i * 131 + (i >> 8));
  }

  void fill(Slot& s, size_t from) {
    for (size_t i = from; i < s.filled; ++i) s.p[i] = pattern(s.seed, i);
  }
  void verify(const Slot& s) {
    FUZZ_CHECK(achunk_malloc_usable_size(s.p) >= s.size);
    for (size_t i = 0; i < s.filled; ++i) {
      if (s.p[i] != pattern(s.seed, i)) {
        std::fprintf(stderr, "fuzz: byte %zu of %p (size %zu) overwritten\n", i,
                     static_cast<void*>(s.p), s.size);
        std::abort();
      }
    }
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
    if (p != nullptr) {
      for (size_t i = 0; i < last_size_; ++i) FUZZ_CHECK(static_cast<uint8_t*>(p)[i] == 0);
    }
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
    for (size_t i = 0; i < keep; ++i) FUZZ_CHECK(q[i] == pattern(s.seed, i));
    s.p = q;
    s.size = n;
    s.filled = achunk_malloc_usable_size(p);
    FUZZ_CHECK(s.filled >= n);
    if (s.seed == 0) s.seed = static_cast<uint8_t>(++serial_);
    fill(s, keep);
  }

  // how: 0 memalign, 1 posix_memalign, 2 aligned_alloc. Alignments 1 B - 1 MiB, and
  // sometimes not a power of two, which posix_memalign must refuse with EINVAL.
  void aligned_into(Slot& s, int how) {
    const uint8_t a = byte();
    size_t align = size_t{1} << (a % 21);
    const bool odd = a >= 240;
    if (odd) align += 8 * (1 + a % 7);
    last_size_ = pick_size();
    void* p = nullptr;
    if (how == 0) {
      p = achunk_memalign(align, last_size_);
    } else if (how == 1) {
      if (align < sizeof(void*)) align = sizeof(void*);
      const int rc = achunk_posix_memalign(&p, align, last_size_);
      if (odd) FUZZ_CHECK(rc == EINVAL && p == nullptr);
      if (rc != 0) p = nullptr;
    } else {
      p = achunk_aligned_alloc(align, last_size_);
    }
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
