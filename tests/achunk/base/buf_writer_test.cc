#include "achunk/base/buf_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace achunk {
namespace {

std::string render(int64_t v, int width, bool grouped) {
  char buf[64];
  BufWriter(buf, sizeof(buf)).num(v, width, grouped);
  return buf;
}

TEST(BufWriterTest, Numbers) {
  EXPECT_EQ(render(0, 0, false), "0");
  EXPECT_EQ(render(1234567, 0, true), "1,234,567");
  EXPECT_EQ(render(123, 0, true), "123");
  EXPECT_EQ(render(-1234, 0, true), "-1,234");
  EXPECT_EQ(render(INT64_MIN, 0, false), "-9223372036854775808");
  EXPECT_EQ(render(2097152, 15, true), "      2,097,152");
}

TEST(BufWriterTest, TruncatesButReportsTheLengthNeeded) {
  char buf[8];
  BufWriter w(buf, sizeof(buf));
  w.str("hello ").str("world");
  EXPECT_EQ(w.length(), 11);
  EXPECT_TRUE(w.truncated());
  EXPECT_STREQ(buf, "hello w");
}

TEST(BufWriterTest, QuotedEscapes) {
  char buf[32];
  BufWriter(buf, sizeof(buf)).quoted("a\"b\\c");
  EXPECT_STREQ(buf, "\"a\\\"b\\\\c\"");
}

TEST(BufWriterTest, ZeroCapacityWritesNothing) {
  char buf[4] = "xyz";
  BufWriter w(buf, 0);
  w.str("abc");
  EXPECT_EQ(w.length(), 3);
  EXPECT_EQ(buf[0], 'x');
}

}  // namespace
}  // namespace achunk
