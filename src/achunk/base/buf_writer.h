// Base layer: formatting into a caller's buffer without allocating, for code
// that malloc reaches (dumps, error reports). Keeps counting past the end so callers
// learn the size they needed, as with snprintf. Depends on nothing.
#pragma once

#include <cstdint>

namespace achunk {

class BufWriter {
 public:
  BufWriter(char* buf, int64_t cap) : buf_(buf), cap_(cap > 0 ? static_cast<uint64_t>(cap) : 0) {
    terminate();
  }

  BufWriter& str(const char* s) {
    while (*s != '\0') put(*s++);
    terminate();
    return *this;
  }
  BufWriter& ch(char c) {
    put(c);
    terminate();
    return *this;
  }
  // Decimal, optionally with thousands separators, right-aligned in `width` columns.
  BufWriter& num(int64_t v, int width = 0, bool grouped = false) {
    char tmp[32];
    int n = 0;
    // Work on the magnitude as unsigned so INT64_MIN does not overflow.
    uint64_t m = v < 0 ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v);
    int digits = 0;
    do {
      if (grouped && digits > 0 && digits % 3 == 0) tmp[n++] = ',';
      tmp[n++] = static_cast<char>('0' + m % 10);
      m /= 10;
      ++digits;
    } while (m != 0);
    if (v < 0) tmp[n++] = '-';
    for (int pad = width - n; pad > 0; --pad) put(' ');
    while (n > 0) put(tmp[--n]);
    terminate();
    return *this;
  }
  // A JSON string literal; the strings achunk prints never need more than these escapes.
  BufWriter& quoted(const char* s) {
    put('"');
    for (; *s != '\0'; ++s) {
      if (*s == '"' || *s == '\\') put('\\');
      put(*s);
    }
    put('"');
    terminate();
    return *this;
  }

  // Bytes the whole output needs, excluding the terminating NUL.
  int64_t length() const { return len_; }
  bool truncated() const { return static_cast<uint64_t>(len_) >= cap_; }

 private:
  void put(char c) {
    if (pos_ + 1 < cap_) buf_[pos_++] = c;
    ++len_;
  }
  void terminate() {
    if (cap_ > 0) buf_[pos_] = '\0';
  }

  char* buf_;
  uint64_t cap_;
  uint64_t pos_ = 0;  // bytes stored, always below cap_ so the NUL fits
  int64_t len_ = 0;   // bytes the output needs
};

}  // namespace achunk
