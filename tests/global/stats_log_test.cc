#include "global/stats_log.h"

#include <gtest/gtest.h>

#include <string>

#include "support/fake_clock.h"
#include "tools/dump/log_parser.h"

namespace achunk::testing {
namespace {

TEST(StatsLogTest, TimestampIsUtcWithMicroseconds) {
  char buf[64];
  write_log_timestamp(0, buf, sizeof(buf));
  EXPECT_STREQ(buf, "[1970-01-01 00:00:00.000000] ");
  FakeClock clock;
  clock.advance_us(6);
  write_log_timestamp(clock.wall_us(), buf, sizeof(buf));
  EXPECT_STREQ(buf, "[2026-01-02 03:04:05.000006] ");
  write_log_timestamp(951'782'400'123'456, buf, sizeof(buf));  // a leap day
  EXPECT_STREQ(buf, "[2000-02-29 00:00:00.123456] ");
}

// Every line gets the prefix, and achunk-dump --log reads the result back.
TEST(StatsLogTest, PrefixedLinesAreWhatTheLogReaderReads) {
  const char* text =
      "[chunk_mgr] limit=              0 hold=      2,097,152 used=              0\n"
      "[CHUNK_MGR]  2 MB_CACHE: hold=      2,097,152 count=              1\n";
  char buf[512];
  const int64_t n = prefix_log_lines(text, 1'767'323'045'000'000, buf, sizeof(buf));
  ASSERT_LT(n, static_cast<int64_t>(sizeof(buf)));
  const std::string out(buf);
  EXPECT_EQ(out.rfind("[2026-01-02 03:04:05.000000] [chunk_mgr] limit=", 0), 0u);
  EXPECT_NE(out.find("\n[2026-01-02 03:04:05.000000] [CHUNK_MGR]  2 MB_CACHE:"), std::string::npos);
  dump::LogTimeline t;
  for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1) {
    dump::parse_log_line(out.substr(at, nl - at), &t);
  }
  ASSERT_EQ(t.samples.size(), 1u);
  EXPECT_EQ(t.samples[0].values.at("hold"), 2 << 20);
  EXPECT_DOUBLE_EQ(t.samples[0].seconds, 1'767'323'045.0);
  EXPECT_EQ(t.samples[0].cache_lines, 1);
}

}  // namespace
}  // namespace achunk::testing
