#include "tools/dump/log_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

TEST(LogParserTest, GroupedNumbers) {
  int64_t v = 0;
  EXPECT_TRUE(dump::parse_grouped("1,234,567", &v));
  EXPECT_EQ(v, 1234567);
  EXPECT_TRUE(dump::parse_grouped("-1", &v));
  EXPECT_EQ(v, -1);
  EXPECT_TRUE(dump::parse_grouped("9,223,372,036,854,775,807", &v));
  EXPECT_EQ(v, INT64_MAX);
  for (const char* bad :
       {"", "-", "1,23", ",123", "1234,567", "12a", "1,,234", "99999999999999999999"}) {
    EXPECT_FALSE(dump::parse_grouped(bad, &v)) << bad;
  }
}

// achunk's own dump (from the library's printer), the reference's 4.x and 3.x lines.
TEST(LogParserTest, ReadsEveryFormat) {
  FakeOs os;
  FakeClock clock;
  AChunkMgr mgr(os, clock);
  mgr.free_chunk(mgr.alloc_chunk(ACHUNK_SIZE));
  char buf[8192];
  mgr.print(buf, sizeof(buf));
  dump::LogTimeline t;
  std::string dump(buf);
  for (size_t at = 0, nl; (nl = dump.find('\n', at)) != std::string::npos; at = nl + 1) {
    dump::parse_log_line("[2026-11-25 03:00:00.000000] " + dump.substr(at, nl - at), &t);
  }
  dump::parse_log_line(
      "[2024-01-01 10:00:20.123456] INFO [COMMON] x [chunk_mgr] limit=  9,223,372,036,854,775,807 "
      "hold=  1,234,567,890 total_hold=  1,300,000,000 used=  1,000,000,000 freelists_hold=  "
      "234,567,890 total_maps=  100 total_unmaps=  50 large_maps=0 large_unmaps=0 huge_maps=0 "
      "huge_unmaps=0 resident_size=  2,000,000,000 unmanaged_memory_size=0 virtual_memory_used=1 "
      "[OS_PARAMS] vm.max_map_count=65530 transparent_hugepages=never",
      &t);
  dump::parse_log_line(
      "[2019-01-01 10:00:30.000001] INFO [CHUNK_MGR] free=1 pushes=2 pops=3 limit=100 hold=7 "
      "total_hold=8 used=5 freelist_hold=2 maps=4 unmaps=1",
      &t);
  dump::parse_log_line("[2019-01-01 10:00:30.000001] [CHUNK_MGR]   2 MB_CACHE: hold=2 count=1", &t);
  ASSERT_EQ(t.samples.size(), 3u);
  EXPECT_EQ(t.skipped, 0);
  EXPECT_EQ(t.samples[0].values.at("freelists_hold"), 2 * MB);
  EXPECT_EQ(t.samples[0].cache_lines, 11);  // 2, 4, ... 20 MB and >20
  EXPECT_EQ(t.samples[1].values.at("hold"), 1234567890);
  EXPECT_EQ(t.samples[2].values.at("freelists_hold"), 2);  // 3.x "freelist_hold"
  EXPECT_EQ(t.samples[2].cache_lines, 1);
  EXPECT_GT(t.samples[1].seconds, t.samples[2].seconds);  // 2024 after 2019
  EXPECT_NE(dump::format_log_summary(t).find("3 samples, 0 skipped"), std::string::npos);
}

// Random garbage, lines cut at every length and lines spliced into each other: every
// line is counted, nothing crashes, no value is negative, and lines cut inside a group
// ("20,97") are skipped.
TEST(LogParserTest, RandomAndTruncatedInput) {
  const std::string good =
      "[2026-11-25 03:00:00.000000] [chunk_mgr] limit=9,223,372,036,854,775,807 hold=     "
      "20,971,520 total_hold=     20,971,520 used=     10,485,760 freelists_hold=     10,485,760";
  dump::LogTimeline t;
  for (size_t n = 0; n <= good.size(); ++n) dump::parse_log_line(good.substr(0, n), &t);
  EXPECT_EQ(t.lines, static_cast<int64_t>(good.size()) + 1);
  for (const dump::LogSample& s : t.samples) {
    for (const auto& [k, v] : s.values) EXPECT_GE(v, 0) << k;
  }
  EXPECT_GT(t.skipped, 0);
  EXPECT_GT(t.samples.size(), 0u);
  std::mt19937_64 rng(1);
  const std::string alphabet = "[]chunk_mgrCHUNK_MGR =,0123456789-MB_CACHE:abc\t";
  dump::LogTimeline r;
  int64_t fed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string line;
    if (i % 3 == 0) {
      const std::string a = good.substr(0, rng() % good.size());
      line = a + good.substr(rng() % good.size());  // spliced
    } else {
      const size_t len = rng() % 200;
      for (size_t k = 0; k < len; ++k) line += alphabet[rng() % alphabet.size()];
      if (i % 2 == 0) line = "[chunk_mgr] " + line;
    }
    dump::parse_log_line(line, &r);
    ++fed;
  }
  EXPECT_EQ(r.lines, fed);
  EXPECT_GT(r.skipped, 0);
  EXPECT_FALSE(dump::format_log_summary(r).empty());
  EXPECT_FALSE(dump::log_plot_data(r).empty());
}

}  // namespace
}  // namespace achunk::testing
