// achunk-dump --log: reads [chunk_mgr] / [CHUNK_MGR] lines from a log (achunk's own
// format, with or without a "[YYYY-MM-DD hh:mm:ss.uuuuuu]" prefix, and the reference
// server's 4.x and 3.x formats: thousands separators, "freelist_hold", continuation
// "N MB_CACHE" lines) into a timeline. Garbage and lines cut short are skipped and
// counted, never fatal. Pure functions. Depends on abseil.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace achunk::dump {

struct LogSample {
  double seconds = -1;  // from the line's timestamp (seconds since the epoch, UTC); -1: none
  std::string time;     // the timestamp as written
  std::map<std::string, int64_t> values;  // the main line's fields (freelist_hold renamed)
  int64_t cache_lines = 0;                // MB_CACHE lines that followed it
};

struct LogTimeline {
  int64_t lines = 0;
  int64_t skipped = 0;  // marker lines that did not parse (garbage, cut short, interleaved)
  std::vector<LogSample> samples;
};

// Feeds one line (without its newline).
void parse_log_line(absl::string_view line, LogTimeline* t);
// "1,234,567" or "1234567" (optionally negative) -> value; false for anything else.
bool parse_grouped(absl::string_view text, int64_t* out);

std::string format_log_summary(const LogTimeline& t);
// The gnuplot data: one row per sample (seconds or index, hold, used, cache, rss in MiB,
// maps/s and unmaps/s since the previous sample).
std::string log_plot_data(const LogTimeline& t);

}  // namespace achunk::dump
