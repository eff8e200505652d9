#include "global/stats_log.h"

#include <unistd.h>

#include "achunk/achunk.hpp"
#include "achunk/base/buf_writer.h"
#include "global/ob_malloc.h"

namespace achunk {

namespace {

// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm): no gmtime_r, which
// may take locks and read time zone files.
void civil_from_days(int64_t z, int64_t* y, int* m, int* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

BufWriter& two(BufWriter& w, int64_t v) {
  return w.ch(static_cast<char>('0' + v / 10)).ch(static_cast<char>('0' + v % 10));
}

void write_all(const char* p, int64_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, static_cast<size_t>(n));
    if (w <= 0) return;
    p += w;
    n -= w;
  }
}

// Only the housekeeping thread prints: its buffers and its last time.
char g_text[128 * 1024];
char g_out[160 * 1024];
int64_t g_last_us = -1;

}  // namespace

void write_log_timestamp(int64_t wall_us, char* buf, int64_t len) {
  const int64_t secs = wall_us / 1'000'000;
  const int64_t days = secs / 86400;
  const int64_t sod = secs % 86400;
  int64_t y = 0;
  int m = 0;
  int d = 0;
  civil_from_days(days, &y, &m, &d);
  BufWriter w(buf, len);
  w.ch('[').num(y).ch('-');
  two(w, m).ch('-');
  two(w, d).ch(' ');
  two(w, sod / 3600).ch(':');
  two(w, sod / 60 % 60).ch(':');
  two(w, sod % 60).ch('.');
  const int64_t us = wall_us % 1'000'000;
  for (int64_t div = 100'000; div > 0; div /= 10) w.ch(static_cast<char>('0' + us / div % 10));
  w.str("] ");
}

int64_t prefix_log_lines(const char* text, int64_t wall_us, char* buf, int64_t len) {
  char stamp[40];
  write_log_timestamp(wall_us, stamp, sizeof(stamp));
  BufWriter w(buf, len);
  bool line_start = true;
  for (const char* p = text; *p != '\0'; ++p) {
    if (line_start) w.str(stamp);
    w.ch(*p);
    line_start = *p == '\n';
  }
  return w.length();
}

void maybe_print_stats_log(int64_t now_us, int64_t wall_us) {
  int64_t interval_ms = 0;
  if (!get_option("stats_interval_ms", &interval_ms) || interval_ms <= 0) return;
  if (g_last_us >= 0 && now_us - g_last_us < interval_ms * 1000) return;
  g_last_us = now_us;
  for (int what = 0; what < 2; ++what) {
    if (what == 0) {
      print_chunk_dump(g_text, sizeof(g_text));
    } else {
      ob_print_usage(g_text, sizeof(g_text));
    }
    int64_t n = prefix_log_lines(g_text, wall_us, g_out, sizeof(g_out));
    if (n >= static_cast<int64_t>(sizeof(g_out))) n = sizeof(g_out) - 1;
    write_all(g_out, n);
  }
}

}  // namespace achunk
