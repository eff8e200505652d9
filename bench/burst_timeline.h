// The main job's timeline (achunk_burst_quiet --record DIR --dump-tool PATH): each child
// publishes its own stats region (BurstStatsHost), the parent has one achunk-dump
// --watch --json per child record it every 500 ms, and at the end writes the samples as
// gnuplot data plus a script that draws RSS and cache hold of every setting over time,
// with the burst and the TTL marked. Depends on the chunk and object layers and on
// src/global (StatsRegion); the bench sits above every layer.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "achunk/base/options.h"
#include "achunk/chunk/achunk_mgr.h"
#include "alloc/object/malloc_allocator.h"
#include "global/stats_region.h"

namespace achunk {

// A child's answer to its region: the options it runs with (the region on, no
// housekeeping thread), changes applied to its own chunk manager.
class BurstStatsHost final : public StatsHost {
 public:
  BurstStatsHost(AChunkMgr& mgr, ObMallocAllocator& objs, int64_t cache_size, int64_t ttl_ms);
  int64_t option_value(int id) override;
  SetResult try_set_option(int id, int64_t value) override;
  int collect_ctx(stats::CtxRow* rows, int cap) override;
  void measure_usage(UsageScan* scan) override { achunk::measure_usage(objs_, scan); }
  int64_t wash_spans(bool all) override;
  bool housekeeping_running() override { return false; }
  ThreadStatePoolStats thread_states() override { return {}; }
  int64_t lock_sleeps() override { return SpinLock::sleeps(); }
  AllocatorOverhead overhead() override { return objs_.overhead(); }

 private:
  AChunkMgr& mgr_;
  ObMallocAllocator& objs_;
  Options options_{true};
};

// One recorded setting: its watcher and what the parent saw of its phases, in seconds
// since the watchers started.
struct TimelineSeries {
  char id = '?';
  const char* name = "";
  pid_t watcher = -1;
  double burst_start_s = -1;
  double quiet_start_s = -1;
  bool evicts = false;
};

constexpr double TIMELINE_INTERVAL_S = 0.5;

// Starts `tool --watch --json PID 0.5` with its rows going to DIR/<id>.jsonl (errors to
// DIR/<id>.err); -1 on failure.
pid_t start_watcher(const char* tool, const char* dir, char id, pid_t pid);
// Ends a watcher started above (its child is gone or about to be).
void stop_watcher(pid_t watcher);
// Writes DIR/<id>.dat for each series and DIR/timeline.gp, which draws DIR/timeline.png.
// False (with a line on stderr) when a file cannot be written.
bool write_timeline(const char* dir, const TimelineSeries* series, int count, int64_t ttl_ms);

}  // namespace achunk
