// Global layer: the live stats region. A memfd (see stats_layout.h) that publishes the
// chunk manager's dump fields, the (tenant, ctx) holds, limits and usage, the labels with
// the largest hold and every option's value under a sequence lock, refreshed at most
// every REFRESH_US from chunk-level calls and by the housekeeping thread, and a control
// slot through which achunk-dump sets an option or releases idle memory. Never allocates.
// Depends on the chunk layer (AChunkMgr, Os, options), the object layer (tenant
// directory, CtxUsage) and stats_layout.h; options and housekeeping come through StatsHost.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/base/options.h"
#include "achunk/base/spin_lock.h"
#include "achunk/chunk/achunk_mgr.h"
#include "achunk/platform/os.h"
#include "alloc/object/ctx_usage.h"
#include "alloc/object/malloc_allocator.h"
#include "alloc/object/thread_state.h"
#include "global/stats_layout.h"

namespace achunk {

// The last usage scan: per ctx the usage dump's figures, and the process's labels with
// the largest hold. Fixed storage (the region never allocates).
struct UsageScan {
  struct Ctx {
    uint64_t tenant_id;
    int64_t ctx_id;
    int64_t used;
    int64_t free_spans;
    int64_t washed;
    int64_t free_resident;
    int64_t hold;  // the ctx's, right after its figures were measured
    stats::CtxSpans spans;
  };
  Ctx ctxs[stats::CTX_CAPACITY];
  int nctx = 0;
  stats::LabelRow top[stats::LABEL_CAPACITY];  // largest hold first
  int ntop = 0;
  CtxUsage scratch;  // one ctx at a time
};

// What the region needs from the layers above the chunk layer.
class StatsHost {
 public:
  enum class SetResult { OK, BUSY };
  // An option's current value (lock-free: the caller may hold allocator locks).
  virtual int64_t option_value(int id) = 0;
  // Applies an already validated value, as set_option does; BUSY when that cannot be
  // done without waiting (asked again on the next tick).
  virtual SetResult try_set_option(int id, int64_t value) = 0;
  // Fills at most `cap` rows (not their usage figures); returns how many.
  virtual int collect_ctx(stats::CtxRow* rows, int cap) = 0;
  // Measures every ctx into *scan. Takes ctx locks and walks live objects: only the
  // housekeeping thread calls it.
  virtual void measure_usage(UsageScan* scan) = 0;
  // Washes every free span (`all`) or those idle for span_idle_ms; the bytes washed.
  virtual int64_t wash_spans(bool all) = 0;
  virtual bool housekeeping_running() = 0;
  // The per-thread caches' pool (thread_state_pool_stats()).
  virtual ThreadStatePoolStats thread_states() = 0;
  // Lock waits that slept, all locks of the process (SpinLock::sleeps()).
  virtual int64_t lock_sleeps() = 0;
  // What the allocator holds for itself (ObMallocAllocator::overhead()); lock-free. The
  // region adds its own size.
  virtual AllocatorOverhead overhead() = 0;

 protected:
  ~StatsHost() = default;
};

// A host for a chunk manager with nothing above it (benchmarks, tests of the region):
// the region on, options kept in memory, no ctx, no spans, no housekeeping thread.
class ChunkOnlyStatsHost final : public StatsHost {
 public:
  ChunkOnlyStatsHost() { opts_.values[OPT_STATS_REGION] = 1; }
  int64_t option_value(int id) override { return opts_.values[id]; }
  SetResult try_set_option(int id, int64_t value) override {
    opts_.values[id] = value;
    return SetResult::OK;
  }
  int collect_ctx(stats::CtxRow*, int) override { return 0; }
  void measure_usage(UsageScan* scan) override {
    scan->nctx = 0;
    scan->ntop = 0;
  }
  int64_t wash_spans(bool) override { return 0; }
  bool housekeeping_running() override { return false; }
  ThreadStatePoolStats thread_states() override { return {}; }
  int64_t lock_sleeps() override { return SpinLock::sleeps(); }
  AllocatorOverhead overhead() override { return {}; }
  const Options& options() const { return opts_; }

 private:
  Options opts_;
};

// The (tenant, ctx) rows of `allocator`, at most `cap`; returns how many. Lock-free.
int collect_ctx_rows(ObMallocAllocator& allocator, stats::CtxRow* rows, int cap);
// measure_ctx_usage for each of the first CTX_CAPACITY ctxs of `allocator`, keeping the
// LABEL_CAPACITY labels with the largest hold (ties: the first found). O(live objects +
// spans + chunks) plus one residency probe per span and chunk, and CtxUsage::MAX_LABELS
// x LABEL_CAPACITY steps per ctx for the top labels.
void measure_usage(ObMallocAllocator& allocator, UsageScan* scan);

class StatsRegion final : public ChunkListener {
 public:
  static constexpr int64_t REFRESH_US = 100'000;
  // The usage scan walks every live object: at most this often (the reference prints its
  // usage every 10 s too).
  static constexpr int64_t USAGE_REFRESH_US = 10'000'000;

  StatsRegion(Os& os, AChunkMgr& chunk_mgr, StatsHost& host);
  ~StatsRegion();
  StatsRegion(const StatsRegion&) = delete;
  StatsRegion& operator=(const StatsRegion&) = delete;

  // From free_chunk and chunk maps: a tick when REFRESH_US has passed, else a load.
  void on_chunk_call(int64_t now_us) override {
    if (now_us >= next_us_.load(std::memory_order_relaxed)) tick(now_us, false);
  }
  // Creates the region if the option is on (drops it if off), serves a pending request,
  // refreshes. Only the housekeeping thread (`housekeeping`) washes spans, measures the
  // cache's resident bytes and scans usage (at most every USAGE_REFRESH_US): other callers
  // may hold allocator locks and publish the last values. One thread at a time; a
  // concurrent call returns at once.
  void tick(int64_t now_us, bool housekeeping);
  // The process is exiting: readers see generation 0.
  void mark_exited();
  // In a forked child: drops the parent's mapping without writing to it; the first tick
  // from `not_before_us` on (a chunk-level call's, or the housekeeping thread's at any
  // time) creates the child's own region.
  void forget_after_fork(int64_t not_before_us);

  // For tests: the mapped region (nullptr when none) and its descriptor.
  const unsigned char* bytes() const { return static_cast<const unsigned char*>(region_.addr); }
  unsigned char* mutable_bytes() { return static_cast<unsigned char*>(region_.addr); }
  int fd() const { return region_.fd; }
  int64_t requests_served() const { return served_; }
  // Bytes of the region while it is mapped, else 0; read by any thread.
  int64_t mapped_bytes() const { return mapped_bytes_.load(std::memory_order_relaxed); }
  int64_t usage_scans() const { return usage_scans_; }

 private:
  bool create();
  void destroy();
  void write_field_table();
  // Serves a pending request; its sequence number when answered (published by tick()
  // after the refresh, so a reader that sees the answer sees its effect), else 0.
  uint64_t serve_request(bool housekeeping);
  void refresh(int64_t now_us, bool housekeeping);
  // The last scan's figures into the rows (-1 for a ctx it did not see) and label rows.
  void publish_usage(stats::CtxRow* rows, int nrows);
  stats::Header* header() { return static_cast<stats::Header*>(region_.addr); }
  // False between a fork and the child's forget_after_fork: region_ is the parent's (and
  // not mapped in the child). One getpid a tick.
  bool owns_region() { return region_.addr == nullptr || region_pid_ == os_.process_id(); }
  stats::Control* control() {
    return reinterpret_cast<stats::Control*>(mutable_bytes() + stats::CONTROL_OFFSET);
  }

  Os& os_;
  AChunkMgr& chunk_mgr_;
  StatsHost& host_;
  std::atomic<int64_t> next_us_{0};
  std::atomic<bool> busy_{false};
  // Owned by the thread that holds busy_.
  Os::SharedRegion region_;
  // The process region_ was made in: a forked child whose fork handler has not run yet
  // (another library's child handler ran first) must not touch its parent's region.
  int64_t region_pid_ = 0;
  std::atomic<int64_t> mapped_bytes_{0};  // region_'s size while mapped (mapped_bytes)
  bool create_failed_ = false;            // warned once; not retried on every call
  uint64_t last_request_ = 0;
  int64_t served_ = 0;
  int64_t cache_resident_ = -1;  // measured by the housekeeping thread only
  UsageScan usage_;              // likewise
  int64_t next_usage_us_ = 0;
  int64_t usage_at_us_ = -1;  // when usage_ was measured; -1: never
  int64_t usage_scans_ = 0;
};

}  // namespace achunk
