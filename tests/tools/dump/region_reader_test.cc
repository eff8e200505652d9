#include "tools/dump/region_reader.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "global/stats_region.h"
#include "support/chunk_mgr_fixture.h"
#include "tools/dump/dump_format.h"

namespace achunk::testing {
namespace {

// A valid region's bytes, written by the real writer.
class RegionReaderTest : public ChunkMgrTest {
 public:
  void SetUp() override {
    writer_.tick(clock_.now_us(), true);
    bytes_.assign(writer_.bytes(), writer_.bytes() + stats::REGION_SIZE);
  }
  stats::Header& header() { return *reinterpret_cast<stats::Header*>(bytes_.data()); }
  std::string error() {
    absl::StatusOr<dump::Snapshot> s = dump::parse_region(bytes_.data(), bytes_.size());
    return s.ok() ? "ok" : std::string(s.status().message());
  }
  stats::FieldDesc& field(int i) {
    return reinterpret_cast<stats::FieldDesc*>(bytes_.data() + stats::FIELD_OFFSET)[i];
  }

  ChunkOnlyStatsHost host_;
  StatsRegion writer_{os_, mgr_, host_};
  std::vector<unsigned char> bytes_;
};

TEST_F(RegionReaderTest, AValidRegionParses) {
  EXPECT_EQ(error(), "ok");
}

TEST_F(RegionReaderTest, EveryInconsistencyIsNamed) {
  struct Case {
    const char* expect;
    void (*corrupt)(RegionReaderTest*);
  } cases[] = {
      {"wrong magic", [](RegionReaderTest* t) { t->header().magic ^= 1; }},
      {"unknown region major version 2", [](RegionReaderTest* t) { t->header().major = 2; }},
      {"header size", [](RegionReaderTest* t) { t->header().header_size = 8; }},
      {"exceeds the mapping", [](RegionReaderTest* t) { t->header().region_size = 1 << 30; }},
      {"field table", [](RegionReaderTest* t) { t->header().field_count = 1'000'000; }},
      {"field table", [](RegionReaderTest* t) { t->header().field_offset = 0xfffffff0u; }},
      {"data section", [](RegionReaderTest* t) { t->header().data_size = 1 << 20; }},
      {"control slot", [](RegionReaderTest* t) { t->header().control_offset = 32760; }},
      {"offset", [](RegionReaderTest* t) { t->field(3).offset = 32 * 1024 - 4; }},
      {"offset", [](RegionReaderTest* t) { t->field(3).offset = 4; }},
      {"not terminated", [](RegionReaderTest* t) { std::memset(t->field(0).name, 'x', 48); }},
      {"size 4, not 8", [](RegionReaderTest* t) { t->field(1).size = 4; }},
      {"ctx table", [](RegionReaderTest* t) { t->header().ctx_stride = 8; }},
      {"ctx table", [](RegionReaderTest* t) { t->header().ctx_capacity = 100'000; }},
      {"label table", [](RegionReaderTest* t) { t->header().label_capacity = 100'000; }},
      {"label table", [](RegionReaderTest* t) { t->header().label_offset = 32 * 1024 - 8; }},
  };
  const std::vector<unsigned char> good = bytes_;
  for (const Case& c : cases) {
    bytes_ = good;
    c.corrupt(this);
    EXPECT_NE(error().find(c.expect), std::string::npos) << c.expect << ": " << error();
  }
  bytes_ = good;
  EXPECT_NE(
      std::string(dump::parse_region(bytes_.data(), 100).status().message()).find("too small"),
      std::string::npos);
}

// Random bytes, with a valid magic and major half of the time: the reader answers
// (ok or an error) and never reads outside the buffer (ASan checks that).
TEST_F(RegionReaderTest, RandomRegionsNeverReadOutOfBounds) {
  std::mt19937_64 rng(42);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<unsigned char> b = bytes_;
    const size_t size = i % 3 == 0 ? rng() % b.size() : b.size();
    const int flips = 1 + static_cast<int>(rng() % 64);
    for (int k = 0; k < flips; ++k) {
      // Bias the damage toward the header and the field table, where the offsets live.
      const size_t at = rng() % (k % 2 == 0 ? stats::DATA_OFFSET : b.size());
      b[at] = static_cast<unsigned char>(rng());
    }
    if (i % 2 == 0) {
      std::memcpy(b.data(), &stats::MAGIC, 8);
      const uint16_t major = stats::MAJOR;
      std::memcpy(b.data() + 8, &major, 2);
    }
    std::vector<unsigned char> exact(b.begin(), b.begin() + static_cast<ptrdiff_t>(size));
    ok += dump::parse_region(exact.data(), exact.size()).ok();
  }
  EXPECT_GT(ok, 0);  // some damage is harmless (a counter's value)
}

TEST_F(RegionReaderTest, ATornReadThatNeverSettlesIsAnError) {
  header().seq = 3;  // a writer that never finishes
  auto r = dump::Region::over(bytes_.data(), bytes_.size(), 0);
  absl::StatusOr<dump::Snapshot> s = r->snapshot(50);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("torn read"), std::string::npos);
}

TEST_F(RegionReaderTest, AStaleRegionIsAnError) {
  header().pid = getpid();
  header().start_time = dump::process_start_time(getpid());
  EXPECT_TRUE(dump::Region::over(bytes_.data(), bytes_.size(), getpid())->snapshot().ok());
  auto message = [&] {
    return std::string(
        dump::Region::over(bytes_.data(), bytes_.size(), getpid())->snapshot().status().message());
  };
  header().start_time += 1;
  EXPECT_NE(message().find("start time"), std::string::npos) << message();
  header().start_time -= 1;
  header().pid += 1;
  EXPECT_NE(message().find("names pid"), std::string::npos) << message();
  header().pid -= 1;
  header().generation = 0;
  EXPECT_NE(message().find("has exited"), std::string::npos) << message();
}

TEST_F(RegionReaderTest, AnUnansweredRequestTimesOutNamingReleaseInterval) {
  auto r = dump::Region::over(bytes_.data(), bytes_.size(), 0);
  absl::StatusOr<dump::ControlAnswer> a =
      r->request(stats::ControlOp::SET_OPTION, "span_idle_ms", "5", absl::Milliseconds(30));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(a.status().message().find("release_interval_ms"), std::string::npos);
  // The request is in the slot; the process answers it on its next tick.
  std::memcpy(writer_.mutable_bytes(), bytes_.data(), stats::REGION_SIZE);
  writer_.tick(clock_.now_us() + StatsRegion::REFRESH_US, false);
  const auto* c = reinterpret_cast<const stats::Control*>(writer_.bytes() + stats::CONTROL_OFFSET);
  EXPECT_EQ(c->resp_seq, c->req_seq);
  EXPECT_EQ(host_.options().values[OPT_SPAN_IDLE_MS], 5);
}

TEST(RegionOpenTest, NoSuchProcess) {
  auto r = dump::Region::open_pid(999'999'999, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no such process: 999999999");
}

// A child of the same user without a region; as root, also one that dropped to nobody.
TEST(RegionOpenTest, NoRegionAndOtherUsersProcess) {
  const pid_t child = fork();
  if (child == 0) {
    if (geteuid() == 0 && setuid(65534) != 0) _exit(1);
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  usleep(100'000);
  auto r = dump::Region::open_pid(child, false);
  ASSERT_FALSE(r.ok());
  if (geteuid() == 0) {
    EXPECT_NE(r.status().message().find("refused"), std::string::npos) << r.status();
    r = dump::Region::open_pid(child, true);
    ASSERT_FALSE(r.ok());
  }
  EXPECT_NE(r.status().message().find("has no achunk stats region"), std::string::npos)
      << r.status();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (geteuid() != 0) {
    auto init = dump::Region::open_pid(1, false);
    ASSERT_FALSE(init.ok());
    EXPECT_NE(init.status().message().find("refused"), std::string::npos) << init.status();
  }
}

dump::Snapshot fake_sample(int64_t maps, int64_t unmaps, int64_t expired, int64_t hits,
                           int64_t misses) {
  dump::Snapshot s;
  auto add = [&](const char* name, int64_t v) { s.fields.push_back({name, {}, false, v, ""}); };
  add("chunk_mgr.total_maps", maps);
  add("chunk_mgr.total_unmaps", unmaps);
  add("chunk_mgr.expired_unmaps", expired);
  add("chunk_mgr.cache_hits", hits);
  add("chunk_mgr.cache_misses", misses);
  add("chunk_mgr.hold", 10 << 20);
  add("chunk_mgr.limit", INT64_MAX);
  add("cache.2mb.count", 3);
  return s;
}

TEST(WatchTest, RatesComeFromTwoSamples) {
  const dump::Snapshot a = fake_sample(100, 50, 5, 30, 10);
  const dump::Snapshot b = fake_sample(120, 90, 25, 60, 20);
  const dump::WatchRow r = dump::watch_row(a, b, 2.0, "12:00:00");
  EXPECT_DOUBLE_EQ(r.maps_per_s, 10);
  EXPECT_DOUBLE_EQ(r.unmaps_per_s, 20);
  EXPECT_DOUBLE_EQ(r.expired_per_s, 10);
  EXPECT_DOUBLE_EQ(r.hit_pct, 75);
  EXPECT_EQ(r.hold, 10 << 20);
  EXPECT_EQ(r.cache_2mb_count, 3);
  EXPECT_DOUBLE_EQ(dump::watch_row(a, a, 1.0, "").hit_pct, -1);  // no lookups
  EXPECT_EQ(dump::format_watch_row(r),
            "12:00:00      -0.0      10.0      -0.0      -0.0      -0.0      -0.0         -     "
            "10.0     20.0     10.0   75.0     3\n");
  EXPECT_EQ(dump::format_watch_json(r).rfind("{\"version\":\"1\",\"time\":\"12:00:00\"", 0), 0u);
}

TEST(WatchTest, PlotDataHasOneRowPerSampleAtItsElapsedSeconds) {
  const dump::Snapshot a = fake_sample(100, 50, 5, 30, 10);
  const dump::Snapshot b = fake_sample(120, 90, 25, 60, 20);
  dump::WatchRow r1 = dump::watch_row(a, b, 2.0, "12:00:00");
  r1.elapsed_s = 0.5;
  dump::WatchRow r2 = dump::watch_row(b, b, 0.5, "12:00:01");
  r2.elapsed_s = 1.0;
  EXPECT_NE(dump::format_watch_json(r1).find("\"elapsed_s\":0.500,"), std::string::npos);
  EXPECT_EQ(dump::watch_plot_data({r1, r2}),
            "# x hold used cache rss maps_per_s unmaps_per_s\n"
            "0.500 10.0 -0.0 -0.0 -0.0 10.00 20.00\n"
            "1.000 10.0 -0.0 -0.0 -0.0 0.00 0.00\n");
}

TEST(WatchTest, GroupedNumbers) {
  EXPECT_EQ(dump::grouped(0), "0");
  EXPECT_EQ(dump::grouped(999), "999");
  EXPECT_EQ(dump::grouped(1000), "1,000");
  EXPECT_EQ(dump::grouped(-1234567), "-1,234,567");
  EXPECT_EQ(dump::grouped(INT64_MIN), "-9,223,372,036,854,775,808");
}

}  // namespace
}  // namespace achunk::testing
