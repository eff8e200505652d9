#include "global/stats_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "achunk/platform/linux_os.h"
#include "alloc/object/malloc_allocator.h"
#include "global/stats_region_fixture.h"
#include "tools/dump/dump_format.h"
#include "tools/dump/region_reader.h"

namespace achunk::testing {
namespace {

TEST_F(StatsRegionTest, NoRegionUntilTheFirstTickAndNoneWhenOff) {
  EXPECT_EQ(region_.bytes(), nullptr);
  host_.opts.values[OPT_STATS_REGION] = 0;
  tick();
  EXPECT_EQ(region_.bytes(), nullptr);
  EXPECT_EQ(os_.shared_maps(), 0);
  host_.opts.values[OPT_STATS_REGION] = 1;
  tick();
  ASSERT_NE(region_.bytes(), nullptr);
  host_.opts.values[OPT_STATS_REGION] = 0;
  tick();
  EXPECT_EQ(region_.bytes(), nullptr);
}

TEST_F(StatsRegionTest, HeaderDescribesTheProcessAndTheSequenceIsEven) {
  tick();
  const dump::Snapshot s = snapshot();
  EXPECT_EQ(s.major, stats::MAJOR);
  EXPECT_EQ(s.pid, 4242);
  EXPECT_EQ(s.start_time, 777);
  EXPECT_NE(s.generation, 0u);
  EXPECT_EQ(s.heartbeat_ns, clock_.now_us() * 1000);
  const auto* h = reinterpret_cast<const stats::Header*>(region_.bytes());
  EXPECT_EQ(h->seq % 2, 0u);
  EXPECT_EQ(h->seq, 2u);
  region_.mark_exited();
  EXPECT_EQ(snapshot().generation, 0u);
}

// The tool's text is the library's own dump for the same counters.
TEST_F(StatsRegionTest, TextMatchesTheLibraryDump) {
  AChunk* a = alloc_normal();
  AChunk* b = alloc_mb(4);
  AChunk* c = alloc_normal();
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);
  tick();
  char buf[8192];
  mgr_.print(buf, sizeof(buf));
  const std::string text = dump::format_text(snapshot());
  EXPECT_EQ(text.substr(0, std::strlen(buf)), buf);
  mgr_.free_chunk(c);
}

TEST_F(StatsRegionTest, GoldenTextAndJsonForAFixedRegion) {
  host_.allocator().set_tenant_ctx_limit(1002, 0, 64 << 20);
  void* p = host_.allocator().alloc(100, ObMemAttr(1002, "golden"));
  tick();
  const dump::Snapshot s = snapshot();
  const std::string text = dump::format_text(s);
  const size_t mem = text.find("[MEMORY] tenant_id");
  ASSERT_NE(mem, std::string::npos);
  const size_t threads = text.find("[THREAD_STATES]");
  ASSERT_NE(threads, std::string::npos);
  EXPECT_EQ(text.substr(threads, mem - threads),
            "[THREAD_STATES] in_use=       7 free=       3 washed=       1\n"
            "[LOCKS] sleeps=1,234\n"
            "[MEMORY] overhead=        106,496 thread_states=         40,960 "
            "thread_heaps=         16,384 chunk_headers=         16,384 "
            "stats_region=         32,768\n");
  EXPECT_EQ(text.substr(mem),
            "[MEMORY] tenant_id= 1002 ctx_id=DEFAULT_CTX_ID hold=      2,097,152 used=          "
            "  100 limit=     67,108,864 free_spans=      2,048,000 washed=      2,048,000 "
            "free_resident=      2,048,000 usage_hold=      2,097,152 usage_age_ms=       0 "
            "tenant_hold=      2,097,152 tenant_limit=9,223,372,036,854,775,807\n"
            "[MEMORY] ctx_id=DEFAULT_CTX_ID slabs=         16,384 slab_slots=          4,096 "
            "slab_live=            128 empty_slabs=              0 slab_resident=         16,384 "
            "big=              0 big_resident=              0 other=          8,192 "
            "free_resident=      2,048,000 spares_reclaimed=              0 "
            "warm_slabs=              0 usage_age_ms=       0\n"
            "[TOP_LABELS] tenant_id= 1002 ctx_id=DEFAULT_CTX_ID hold=            128 used=     "
            "       100 count=       1 mod=golden\n"
            "[OPTIONS] memory_limit=0\n"
            "[OPTIONS] memory_chunk_cache_size=0\n"
            "[OPTIONS] large_chunk_cache=1\n"
            "[OPTIONS] chunk_cache_ttl_ms=30000\n"
            "[OPTIONS] span_idle_ms=1000\n"
            "[OPTIONS] shared_slab_bytes=0\n"
            "[OPTIONS] dealloc_mismatch=1\n"
            "[OPTIONS] context_use_pm=1\n"
            "[OPTIONS] stats_print=0\n"
            "[OPTIONS] release_interval_ms=0\n"
            "[OPTIONS] stats_region=1\n"
            "[OPTIONS] stats_interval_ms=0\n");
  EXPECT_EQ(
      dump::format_json(s),
      "{\"version\":\"1\",\"region_version\":\"1.9\",\"pid\":4242,\"refreshes\":1,\"chunk_mgr\":{"
      "\"limit\":9223372036854775807,\"hold\":2097152,\"total_hold\":2097152,\"used\":2097152,"
      "\"freelists_hold\":0,\"total_maps\":1,\"total_unmaps\":0,\"large_maps\":0,\"large_unmaps\":"
      "0,\"huge_maps\":0,\"huge_unmaps\":0,\"expired_unmaps\":0,\"resident_size\":128974848,"
      "\"virtual_memory_used\":478150656,\"large_freelists_hold\":0,\"cache_hits\":0,\"cache_"
      "misses\":1,\"max_chunk_cache_size\":9223372036854775807,\"chunk_cache_ttl_ms\":30000,"
      "\"cache_resident\":0,\"cache_resizes\":0,\"live_resizes\":0,\"slack_trims\":0,"
      "\"max_map_count\":65530,"
      "\"transparent_"
      "hugepages\":\"m\"},\"caches\":[{\"size_mb\":2,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":"
      "0,\"maps\":1,\"unmaps\":0},{\"size_mb\":4,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":6,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":8,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":10,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":12,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":14,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":16,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":18,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":20,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0},{\"size_mb\":0,\"hold\":0,\"count\":0,\"pushes\":0,\"pops\":0,"
      "\"maps\":0,\"unmaps\":0}],\"ctx\":[{\"tenant_id\":1002,\"ctx_id\":0,\"ctx\":\"DEFAULT_CTX_"
      "ID\",\"hold\":2097152,\"used\":100,\"limit\":67108864,\"free_spans\":2048000,"
      "\"washed\":2048000,\"free_resident\":2048000,\"usage_hold\":2097152,\"tenant_hold\":2097152,"
      "\"tenant_limit\":9223372036854775807,\"spans\":{\"slabs\":16384,\"slab_slots\":4096,"
      "\"slab_live\":128,\"empty_slabs\":0,\"slab_resident\":16384,\"big\":0,\"big_resident\":0,"
      "\"other\":8192,\"free_resident\":2048000,\"spares_reclaimed\":0,\"warm_slabs\":0}}],\"top_"
      "labels\":[{\"tenant_id\":1002,\"ctx_id\":0,\"ctx\":"
      "\"DEFAULT_CTX_ID\",\"mod\":\"golden\",\"hold\":128,\"used\":100,\"count\":1}],"
      "\"options\":{\"memory_limit\":0,\"memory_chunk_cache_size\":0,"
      "\"large_chunk_cache\":1,\"chunk_cache_ttl_ms\":30000,\"span_idle_ms\":1000,\"shared_slab_"
      "bytes\":0,\"dealloc_mismatch\":1,\"context_use_"
      "pm\":1,"
      "\"stats_print\":0,\"release_interval_ms\":0,\"stats_region\":1,\"stats_interval_ms\":"
      "0},\"ctx_count\":1,"
      "\"requests_served\":0,\"housekeeping_running\":0,\"usage_scans\":1,\"usage_age_ms\":0,"
      "\"thread_states\":7,\"thread_states_free\":3,\"thread_states_washed\":1,"
      "\"lock_sleeps\":1234,\"overhead\":{\"total\":106496,\"thread_states\":40960,"
      "\"thread_heaps\":16384,\"chunk_headers\":16384,\"stats_region\":32768}}\n");
  ObMallocAllocator::free(p);
}

// Chunk-level calls refresh at most every REFRESH_US (counted refreshes, fake clock).
TEST_F(StatsRegionTest, ChunkCallsRefreshAtMostEveryInterval) {
  mgr_.set_listener(&region_);
  AChunk* a = alloc_normal();  // a map: the first refresh creates the region
  ASSERT_NE(region_.bytes(), nullptr);
  EXPECT_EQ(snapshot().refreshes, 1u);
  for (int i = 0; i < 100; ++i) {
    mgr_.free_chunk(a);
    a = alloc_normal();
  }
  EXPECT_EQ(snapshot().refreshes, 1u);
  clock_.advance_us(StatsRegion::REFRESH_US);
  mgr_.free_chunk(a);
  EXPECT_EQ(snapshot().refreshes, 2u);
  EXPECT_EQ(snapshot().get("chunk_mgr.freelists_hold"), 2 * MB);
  mgr_.set_listener(nullptr);
}

TEST_F(StatsRegionTest, SetOptionIsValidatedAppliedAndAnswered) {
  for (int i = 0; i < 3; ++i) mgr_.free_chunk(alloc_normal());
  AChunk* chunks[3];
  for (AChunk*& c : chunks) c = alloc_normal();
  for (AChunk* c : chunks) mgr_.free_chunk(c);
  tick();
  ASSERT_EQ(snapshot().get("chunk_mgr.freelists_hold"), 6 * MB);
  send(stats::ControlOp::SET_OPTION, "memory_chunk_cache_size", "2M");
  tick(false);
  ASSERT_TRUE(answered());
  EXPECT_EQ(control()->result, 0) << control()->message;
  EXPECT_EQ(control()->before, 0);
  EXPECT_EQ(control()->after, 2 << 20);
  const dump::Snapshot s = snapshot();
  EXPECT_EQ(s.get("option.memory_chunk_cache_size"), 2 << 20);
  EXPECT_EQ(s.get("chunk_mgr.freelists_hold"), 2 * MB);  // the surplus unmapped
  EXPECT_EQ(s.get("requests_served"), 1);
  // An operator may let a server's alloc-dealloc mismatches pass without a restart.
  send(stats::ControlOp::SET_OPTION, "dealloc_mismatch", "0");
  tick(false);
  ASSERT_TRUE(answered());
  EXPECT_EQ(control()->result, 0) << control()->message;
  EXPECT_EQ(host_.opts.values[OPT_DEALLOC_MISMATCH], 0);
}

// A reader that sees the answer sees the refresh after it: the answer is published last.
// (Before, a reader could see the answer with the old option value and request count.)
TEST_F(StatsRegionTest, AnAnswerIsPublishedOnlyAfterTheRefreshThatShowsIt) {
  tick();
  host_.watch = control();
  send(stats::ControlOp::SET_OPTION, "span_idle_ms", "250");
  tick(false);
  ASSERT_TRUE(answered());
  EXPECT_EQ(host_.answers_seen_in_refresh, 0);
  send(stats::ControlOp::RELEASE_ALL, "", "");
  tick();
  ASSERT_TRUE(answered());
  EXPECT_EQ(host_.answers_seen_in_refresh, 0);
  EXPECT_EQ(snapshot().get("requests_served"), 2);
}

TEST_F(StatsRegionTest, BadRequestsChangeNothingAndAreAnswered) {
  tick();
  struct Case {
    stats::ControlOp op;
    const char* option;
    const char* value;
    stats::ControlResult result;
    const char* message;
  } cases[] = {
      {stats::ControlOp::SET_OPTION, "nope", "1", stats::ControlResult::BAD_REQUEST,
       "unknown option 'nope'"},
      {stats::ControlOp::SET_OPTION, "memory_chunk_cache_size", "2X",
       stats::ControlResult::REJECTED, "unknown size suffix"},
      {stats::ControlOp::SET_OPTION, "chunk_cache_ttl_ms", "-5", stats::ControlResult::REJECTED,
       "out of range"},
      {stats::ControlOp::SET_OPTION, "stats_region", "0", stats::ControlResult::REJECTED,
       "not settable"},
      {static_cast<stats::ControlOp>(77), "", "", stats::ControlResult::BAD_REQUEST,
       "unknown operation 77"},
  };
  const Options before = host_.opts;
  for (const Case& c : cases) {
    send(c.op, c.option, c.value);
    tick();
    ASSERT_TRUE(answered()) << c.option;
    EXPECT_EQ(control()->result, static_cast<int32_t>(c.result)) << c.option;
    EXPECT_NE(std::string(control()->message).find(c.message), std::string::npos)
        << control()->message;
  }
  // Unterminated strings and random bytes everywhere the tool writes.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    stats::Control* c = control();
    auto* raw = reinterpret_cast<unsigned char*>(&c->op);
    for (size_t k = 0; k < offsetof(stats::Control, resp_seq) - offsetof(stats::Control, op); ++k) {
      raw[k] = static_cast<unsigned char>(rng());
    }
    if (i % 2 == 0) c->op = static_cast<uint32_t>(stats::ControlOp::SET_OPTION);
    c->req_seq = rng();
    tick(false);
    ASSERT_TRUE(answered());
    EXPECT_NE(control()->result, 0);
  }
  for (int id = 0; id < OPTION_COUNT; ++id) EXPECT_EQ(host_.opts.values[id], before.values[id]);
}

TEST_F(StatsRegionTest, ABusyHostIsAskedAgainOnTheNextTick) {
  tick();
  host_.busy = true;
  send(stats::ControlOp::SET_OPTION, "span_idle_ms", "5");
  tick();
  EXPECT_FALSE(answered());
  host_.busy = false;
  tick();
  ASSERT_TRUE(answered());
  EXPECT_EQ(host_.opts.values[OPT_SPAN_IDLE_MS], 5);
}

// Spans are washed under ctx locks a chunk-level caller may hold: with a housekeeping
// thread, a release waits for it.
TEST_F(StatsRegionTest, ReleaseWaitsForTheHousekeepingThreadWhenThereIsOne) {
  AChunk* a = alloc_normal();
  AChunk* b = alloc_normal();
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);
  tick();
  host_.housekeeping = true;
  send(stats::ControlOp::RELEASE_ALL, "", "");
  tick(false);
  EXPECT_FALSE(answered());
  tick(true);
  ASSERT_TRUE(answered());
  EXPECT_EQ(control()->result, 0);
  EXPECT_EQ(control()->unmapped, 4 * MB);
  EXPECT_EQ(control()->washed, 4096);
  EXPECT_EQ(host_.washes, 1);
  EXPECT_EQ(control()->before, 123 << 20);  // the fake RSS
  EXPECT_EQ(snapshot().get("chunk_mgr.freelists_hold"), 0);
}

TEST_F(StatsRegionTest, ReleaseExpiredUnmapsOnlyExpiredChunks) {
  AChunk* a = alloc_normal();
  mgr_.free_chunk(a);
  clock_.advance_ms(31'000);
  AChunk* b = alloc_normal();
  AChunk* c = alloc_normal();
  mgr_.free_chunk(c);
  tick();
  send(stats::ControlOp::RELEASE_EXPIRED, "", "");
  tick(false);  // no housekeeping thread: served here, spans left alone
  ASSERT_TRUE(answered());
  EXPECT_EQ(host_.washes, 0);
  EXPECT_NE(std::string(control()->message).find("housekeeping"), std::string::npos);
  EXPECT_EQ(snapshot().get("chunk_mgr.freelists_hold"), 2 * MB);
  mgr_.free_chunk(b);
}

TEST_F(StatsRegionTest, AForkedChildGetsItsOwnRegion) {
  tick();
  const uint64_t parent_generation = snapshot().generation;
  region_.forget_after_fork(clock_.now_us());
  EXPECT_EQ(region_.bytes(), nullptr);
  tick();
  ASSERT_NE(region_.bytes(), nullptr);
  EXPECT_GT(snapshot().generation, parent_generation);
  EXPECT_EQ(os_.shared_maps(), 2);
}

// Another library's child handler may allocate before achunk's runs: until then the
// region is the parent's (not even mapped in the child), and no tick touches it.
TEST_F(StatsRegionTest, AForkedChildLeavesTheParentsRegionAloneUntilItsHandlerRuns) {
  tick();
  const uint64_t refreshes = snapshot().refreshes;
  os_.set_process_id(4243);
  clock_.advance_ms(1000);
  tick();
  region_.on_chunk_call(clock_.now_us());
  EXPECT_EQ(snapshot().refreshes, refreshes);  // nothing written
  EXPECT_EQ(os_.shared_maps(), 1);
  region_.forget_after_fork(clock_.now_us());
  tick();
  ASSERT_NE(region_.bytes(), nullptr);
  EXPECT_EQ(os_.shared_maps(), 2);
  EXPECT_EQ(snapshot().pid, 4243);
}

// A short-lived child's chunk-level calls make no region: only from the time it was
// given on, or from its housekeeping thread.
TEST_F(StatsRegionTest, AForkedChildsChunkCallsMakeNoRegionBeforeItsTime) {
  tick();
  region_.forget_after_fork(clock_.now_us() + 1'000'000);
  region_.on_chunk_call(clock_.now_us());
  clock_.advance_ms(999);
  region_.on_chunk_call(clock_.now_us());
  EXPECT_EQ(region_.bytes(), nullptr);
  EXPECT_EQ(os_.shared_maps(), 1);
  clock_.advance_ms(1);
  region_.on_chunk_call(clock_.now_us());
  EXPECT_NE(region_.bytes(), nullptr);
  EXPECT_EQ(os_.shared_maps(), 2);

  region_.forget_after_fork(clock_.now_us() + 1'000'000);
  tick();  // the housekeeping thread's first tick, at once
  EXPECT_NE(region_.bytes(), nullptr);
}

// Counters only: no 8-byte word of the region points into this process's memory.
TEST_F(StatsRegionTest, HoldsNoPointerLikeValues) {
  AChunk* a = alloc_normal();
  void* p = host_.allocator().alloc(100, ObMemAttr(1002, "ptr"));
  mgr_.free_chunk(a);
  tick();
  send(stats::ControlOp::SET_OPTION, "span_idle_ms", "5");
  tick();
  std::ifstream maps("/proc/self/maps");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (std::string line; std::getline(maps, line);) {
    uint64_t lo = 0;
    uint64_t hi = 0;
    // Sanitizer shadows span terabytes and hold no object a counter could point to.
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && hi - lo < (uint64_t{1} << 30)) {
      ranges.emplace_back(lo, hi);
    }
  }
  ASSERT_FALSE(ranges.empty());
  for (int64_t off = 0; off + 8 <= stats::REGION_SIZE; off += 8) {
    uint64_t w = 0;
    std::memcpy(&w, region_.bytes() + off, 8);
    for (const auto& [lo, hi] : ranges) {
      EXPECT_FALSE(w >= lo && w < hi) << "offset " << off << " value " << std::hex << w;
    }
  }
  ObMallocAllocator::free(p);
}

// The real region: a memfd of mode 0600, close-on-exec, named for the tool to find.
TEST(StatsRegionLinuxTest, TheRegionIsAPrivateCloseOnExecMemfd) {
  LinuxOs os;
  FakeClock clock;
  AChunkMgr mgr(os, clock);
  TestHost host(mgr);
  StatsRegion region(os, mgr, host);
  region.tick(clock.now_us(), true);
  ASSERT_NE(region.bytes(), nullptr);
  struct stat st;
  ASSERT_EQ(fstat(region.fd(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, stats::REGION_SIZE);
  EXPECT_NE(fcntl(region.fd(), F_GETFD) & FD_CLOEXEC, 0);
  char target[128] = {};
  const std::string link = "/proc/self/fd/" + std::to_string(region.fd());
  ASSERT_GT(readlink(link.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_EQ(std::string(target).rfind("/memfd:achunk-stats", 0), 0u) << target;
  const dump::Snapshot s = *dump::parse_region(region.bytes(), stats::REGION_SIZE);
  EXPECT_EQ(s.pid, getpid());
  EXPECT_EQ(s.start_time, dump::process_start_time(getpid()));
}

}  // namespace
}  // namespace achunk::testing
