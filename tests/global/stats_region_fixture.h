// Tests of the live stats region: a host over a real ObMallocAllocator and a fixture that
// ticks the region on the fake clock and reads it back with achunk-dump's reader.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "alloc/object/malloc_allocator.h"
#include "global/stats_region.h"
#include "support/chunk_mgr_fixture.h"
#include "tools/dump/region_reader.h"

namespace achunk::testing {

class TestHost final : public StatsHost {
 public:
  explicit TestHost(AChunkMgr& mgr) : mgr_(mgr), alloc_(std::make_unique<ObMallocAllocator>(mgr)) {
    opts.values[OPT_STATS_REGION] = 1;
  }
  int64_t option_value(int id) override { return opts.values[id]; }
  SetResult try_set_option(int id, int64_t value) override {
    if (busy) return SetResult::BUSY;
    opts.values[id] = value;
    mgr_.apply_options(opts);
    return SetResult::OK;
  }
  int collect_ctx(stats::CtxRow* rows, int cap) override {
    return collect_ctx_rows(*alloc_, rows, cap);
  }
  void measure_usage(UsageScan* scan) override { achunk::measure_usage(*alloc_, scan); }
  int64_t wash_spans(bool) override {
    ++washes;
    return 4096;
  }
  bool housekeeping_running() override { return housekeeping; }
  // Called by every refresh: notes an answer already visible while the refresh runs.
  ThreadStatePoolStats thread_states() override {
    if (watch != nullptr && watch->req_seq != 0 &&
        __atomic_load_n(&watch->resp_seq, __ATOMIC_ACQUIRE) == watch->req_seq) {
      ++answers_seen_in_refresh;
    }
    return threads;
  }
  int64_t lock_sleeps() override { return sleeps; }
  // Fixed, as thread_states is (the region adds its own size).
  AllocatorOverhead overhead() override {
    AllocatorOverhead o;
    o.thread_states = 40960;
    o.thread_heaps = 16384;
    o.chunk_headers = 16384;
    return o;
  }
  ObMallocAllocator& allocator() { return *alloc_; }

  Options opts;
  bool busy = false;
  bool housekeeping = false;
  ThreadStatePoolStats threads{48, 7, 3, 1};
  int64_t sleeps = 1234;  // lock_sleeps
  int washes = 0;
  const stats::Control* watch = nullptr;
  int answers_seen_in_refresh = 0;

 private:
  AChunkMgr& mgr_;
  std::unique_ptr<ObMallocAllocator> alloc_;
};

class StatsRegionTest : public ChunkMgrTest {
 protected:
  dump::Snapshot snapshot() {
    absl::StatusOr<dump::Snapshot> s = dump::parse_region(region_.bytes(), stats::REGION_SIZE);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : dump::Snapshot{};
  }
  stats::Control* control() {
    return reinterpret_cast<stats::Control*>(region_.mutable_bytes() + stats::CONTROL_OFFSET);
  }
  void send(stats::ControlOp op, const char* option, const char* value) {
    stats::Control* c = control();
    c->op = static_cast<uint32_t>(op);
    std::strncpy(c->option, option, sizeof(c->option) - 1);
    std::strncpy(c->value, value, sizeof(c->value) - 1);
    c->req_seq += 1;
  }
  bool answered() { return control()->resp_seq == control()->req_seq; }
  void tick(bool housekeeping = true) {
    clock_.advance_us(StatsRegion::REFRESH_US);
    region_.tick(clock_.now_us(), housekeeping);
  }

  TestHost host_{mgr_};
  StatsRegion region_{os_, mgr_, host_};
};

}  // namespace achunk::testing
