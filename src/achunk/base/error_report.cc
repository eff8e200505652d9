#include "achunk/base/error_report.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "achunk/base/buf_writer.h"

namespace achunk {

namespace {

void default_handler(ErrorKind, const void*, const char* message) {
  write_stderr_line(message);
  std::abort();
}

std::atomic<ErrorHandler> g_handler{&default_handler};

const char* kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::DOUBLE_FREE:
      return "double free";
    case ErrorKind::CORRUPTION:
      return "heap corruption";
    case ErrorKind::DEALLOC_MISMATCH:
      return "alloc-dealloc mismatch";
    case ErrorKind::INVALID_FREE:
      break;
  }
  return "invalid free";
}

}  // namespace

void write_stderr_line(const char* message) {
  char line[512];
  BufWriter w(line, sizeof(line));
  w.str(message).ch('\n');
  int64_t n = w.length();
  if (w.truncated()) {  // cut the message, never the newline
    n = static_cast<int64_t>(sizeof(line)) - 1;
    line[n - 1] = '\n';
  }
  [[maybe_unused]] ssize_t r = ::write(STDERR_FILENO, line, static_cast<size_t>(n));
}

ErrorHandler set_error_handler(ErrorHandler handler) {
  return g_handler.exchange(handler != nullptr ? handler : &default_handler);
}

void report_error(ErrorKind kind, const void* ptr, const char* detail) {
  char message[400];
  BufWriter w(message, sizeof(message));
  w.str("achunk: ").str(kind_name(kind)).str(" of 0x");
  // Hex by hand keeps BufWriter small; pointers are the only hex achunk prints.
  const uintptr_t v = reinterpret_cast<uintptr_t>(ptr);
  for (int shift = 60; shift >= 0; shift -= 4) w.ch("0123456789abcdef"[(v >> shift) & 0xF]);
  w.str(": ").str(detail);
  g_handler.load()(kind, ptr, message);
}

}  // namespace achunk
