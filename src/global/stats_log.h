// Global layer: the periodic dump behind stats_interval_ms. The housekeeping thread
// writes the [chunk_mgr], [CHUNK_MGR] and [MEMORY] lines to stderr, each prefixed with
// "[YYYY-MM-DD hh:mm:ss.uuuuuu] " (UTC), as the reference server logs them, so that
// achunk-dump --log has logs to read. Never allocates. Depends on buf_writer.h and the
// print functions of the layers below.
#pragma once

#include <cstdint>

namespace achunk {

// "[2026-01-02 03:04:05.000006] " for `wall_us` microseconds after the epoch (UTC).
void write_log_timestamp(int64_t wall_us, char* buf, int64_t len);
// Every line of `text`, prefixed with the timestamp, into buf (NUL-terminated);
// returns the length needed, like snprintf.
int64_t prefix_log_lines(const char* text, int64_t wall_us, char* buf, int64_t len);
// From the housekeeping thread on each tick: prints the dump to stderr when
// stats_interval_ms (> 0) has passed since the last one.
void maybe_print_stats_log(int64_t now_us, int64_t wall_us);

}  // namespace achunk
