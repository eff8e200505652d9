#include "tools/dump/usage.h"

namespace achunk::dump {

const char* usage_text() {
  return R"(achunk-dump: read and retune the achunk allocator of a running process from outside,
through the stats region it publishes (stats_region, on in libachunk_malloc.so).

Usage:
  achunk-dump PID
      The dump: [chunk_mgr] and [CHUNK_MGR] (OceanBase's chunk cache lines), [THREAD_STATES],
      [MEMORY] (hold, used, limit and free spans of each tenant and ctx), [TOP_LABELS]
      (the 16 labels holding most) and [OPTIONS] (every option's current value).
  achunk-dump --json PID
      The same as one JSON document.
  achunk-dump --watch PID [INTERVAL [COUNT]]
      One row every INTERVAL seconds (default 1), COUNT times (default: until interrupted):
      the time, RSS, hold, used, cache, cache resident, cache cap and limit in MiB; chunk
      maps, unmaps and expired unmaps per second; the cache hit % and the count of cached
      2 MiB chunks. With --json, one JSON object per row.
  achunk-dump --watch PID INTERVAL COUNT --plot OUT.png
      The same rows, then their timeline drawn into OUT.png (needs gnuplot).
  achunk-dump --set NAME=VALUE PID
      Sets option NAME in the process (sizes accept K, M, G and T) and prints
      "NAME: OLD -> NEW". Shrinking memory_chunk_cache_size unmaps the surplus at once.
  achunk-dump --release [expired|all] PID
      expired (the default): unmaps the cached chunks idle past chunk_cache_ttl_ms and
      washes the free spans idle past span_idle_ms; all: unmaps the whole chunk cache and
      washes every free span. Prints the bytes unmapped and washed and RSS before and after.
  achunk-dump --list
      The processes of your user that have a stats region: pid, command, hold, cache and
      RSS in bytes. Then, on stderr, how many processes of other users it skipped and how
      to read them. With --force (as root), every user's processes, with their user.
  achunk-dump --log FILE|- [--plot OUT.png]
      Summarises the [chunk_mgr] lines of a log (stats_interval_ms's, or OceanBase's
      observer.log), and draws their timeline into OUT.png.
  achunk-dump --help
      This text.

Options:
  --json             JSON instead of text (the dump, --watch rows).
  --timeout=DURATION how long --set and --release wait for the process to answer
                     (default 5s; 300ms, 1m, ...). The process answers from its
                     housekeeping thread (release_interval_ms) or its next chunk-level call.
  --force            reads a process of another user. Only the process's own user and root
                     can open its region; without --force even root is refused, so a
                     look at another user's server is always deliberate. Either run the
                     tool as the server's user (sudo -u mysql achunk-dump --list) or as
                     root with --force.

Exit status:
  0  the request was done.
  1  it was not, with one line on stderr saying why: no such process, no stats region
     (not achunk, or stats_region off), another
     user's process without --force, a stale or damaged region, a value the process
     rejected, no answer within --timeout, or a bad command line.
)";
}

}  // namespace achunk::dump
