// achunk-dump, the printers: a snapshot as the library's own text dump ([chunk_mgr],
// [CHUNK_MGR], [MEMORY], [TOP_LABELS] and [OPTIONS] lines) or as one JSON document, and
// the --watch rows (rates from two snapshots). Pure functions of their input. Depends on
// region_reader.h and abseil.
#pragma once

#include <string>
#include <vector>

#include "tools/dump/region_reader.h"

namespace achunk::dump {

// The JSON documents' "version" field.
inline constexpr char FORMAT_VERSION[] = "1";

std::string format_text(const Snapshot& s);
std::string format_json(const Snapshot& s);

// One --watch sample: levels from `cur`, rates over the `seconds` since `prev`.
struct WatchRow {
  std::string time;      // HH:MM:SS
  double elapsed_s = 0;  // since the watch started (its first snapshot)
  int64_t rss = 0;
  int64_t hold = 0;
  int64_t used = 0;
  int64_t cache_hold = 0;
  int64_t cache_resident = 0;
  int64_t cap = 0;
  int64_t limit = 0;
  double maps_per_s = 0;
  double unmaps_per_s = 0;
  double expired_per_s = 0;
  double hit_pct = 0;  // cache hits over hits + misses in the interval; -1: no lookups
  int64_t cache_2mb_count = 0;
};

WatchRow watch_row(const Snapshot& prev, const Snapshot& cur, double seconds,
                   const std::string& time);
std::string watch_header();
std::string format_watch_row(const WatchRow& r);
std::string format_watch_json(const WatchRow& r);
// The gnuplot data of --watch --plot, in log_plot_data's columns: elapsed seconds, hold,
// used, cache, rss in MiB, maps/s, unmaps/s.
std::string watch_plot_data(const std::vector<WatchRow>& rows);

// "1,234,567" as the library's dump prints numbers.
std::string grouped(int64_t v);

}  // namespace achunk::dump
