#include "achunk/base/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace achunk {
namespace {

struct Warnings {
  std::vector<std::string> lines;
  static void sink(void* ctx, const char* message) {
    static_cast<Warnings*>(ctx)->lines.emplace_back(message);
  }
};

TEST(OptionsTest, Defaults) {
  Options o;
  EXPECT_EQ(o[OPT_MEMORY_LIMIT], 0);
  EXPECT_EQ(o[OPT_MEMORY_CHUNK_CACHE_SIZE], 0);
  EXPECT_EQ(o[OPT_LARGE_CHUNK_CACHE], 1);
  EXPECT_EQ(o[OPT_CHUNK_CACHE_TTL_MS], 30000);
  EXPECT_EQ(o[OPT_CONTEXT_USE_PM], 1);
  EXPECT_EQ(o[OPT_STATS_PRINT], 0);
  EXPECT_EQ(o[OPT_RELEASE_INTERVAL_MS], 0);
  EXPECT_EQ(o[OPT_SPAN_IDLE_MS], 1000);
  EXPECT_EQ(o[OPT_STATS_REGION], 0);
}

// libachunk_malloc.so runs the housekeeping thread and publishes the stats region.
TEST(OptionsTest, DropInDefaults) {
  Options o(true);
  EXPECT_EQ(o[OPT_RELEASE_INTERVAL_MS], 1000);
  EXPECT_EQ(o[OPT_STATS_REGION], 1);
  EXPECT_EQ(o[OPT_CHUNK_CACHE_TTL_MS], 30000);  // the rest as for library use
  EXPECT_EQ(o[OPT_SPAN_IDLE_MS], 1000);
}

TEST(OptionsTest, ParsesEveryType) {
  Options o;
  Warnings w;
  EXPECT_EQ(parse_conf("memory_chunk_cache_size:2M,memory_limit:8G,large_chunk_cache:false,"
                       "chunk_cache_ttl_ms:-1,span_idle_ms:-1",
                       &o, &Warnings::sink, &w),
            0);
  EXPECT_TRUE(w.lines.empty());
  EXPECT_EQ(o[OPT_MEMORY_CHUNK_CACHE_SIZE], 2 << 20);
  EXPECT_EQ(o[OPT_MEMORY_LIMIT], int64_t{8} << 30);
  EXPECT_EQ(o[OPT_LARGE_CHUNK_CACHE], 0);
  EXPECT_EQ(o[OPT_CHUNK_CACHE_TTL_MS], -1);
  EXPECT_EQ(o[OPT_SPAN_IDLE_MS], -1);
}

TEST(OptionsTest, SizeSuffixes) {
  const OptionDef& def = OPTION_TABLE[OPT_MEMORY_LIMIT];
  char err[128];
  int64_t v = 0;
  struct Case {
    const char* text;
    int64_t expect;
  } cases[] = {{"0", 0},          {"4096", 4096},    {"4K", 4096},
               {"4k", 4096},      {"3MB", 3 << 20},  {"3MiB", 3 << 20},
               {"1G", 1LL << 30}, {"2T", 2LL << 40}, {"7B", 7}};
  for (const Case& c : cases) {
    ASSERT_TRUE(parse_option_value(def, c.text, std::string(c.text).size(), &v, err, sizeof(err)))
        << c.text << ": " << err;
    EXPECT_EQ(v, c.expect) << c.text;
  }
}

TEST(OptionsTest, BadValuesAreRejectedWithAReason) {
  char err[128];
  int64_t v = 77;
  auto parse = [&](OptionId id, const char* text) {
    return parse_option_value(OPTION_TABLE[id], text, std::string(text).size(), &v, err,
                              sizeof(err));
  };
  EXPECT_FALSE(parse(OPT_MEMORY_LIMIT, "lots"));
  EXPECT_NE(std::string(err).find("expected a number"), std::string::npos);
  EXPECT_FALSE(parse(OPT_MEMORY_LIMIT, "5X"));
  EXPECT_NE(std::string(err).find("suffix"), std::string::npos);
  EXPECT_FALSE(parse(OPT_MEMORY_LIMIT, "-1"));
  EXPECT_NE(std::string(err).find("out of range"), std::string::npos);
  EXPECT_FALSE(parse(OPT_MEMORY_LIMIT, "99999999999T"));
  EXPECT_FALSE(parse(OPT_MEMORY_LIMIT, "99999999999999999999"));
  // A negative size whose unit overflows int64 (found by the options fuzzer).
  EXPECT_FALSE(parse(OPT_MEMORY_LIMIT, "-66666666666G"));
  EXPECT_NE(std::string(err).find("out of range"), std::string::npos);
  EXPECT_FALSE(parse(OPT_LARGE_CHUNK_CACHE, "yes please"));
  EXPECT_FALSE(parse(OPT_CHUNK_CACHE_TTL_MS, "-2"));
  EXPECT_FALSE(parse(OPT_CHUNK_CACHE_TTL_MS, "10s"));
  EXPECT_FALSE(parse(OPT_CHUNK_CACHE_TTL_MS, ""));
  EXPECT_EQ(v, 77);  // never written on failure
}

TEST(OptionsTest, EachBadEntryWarnsOnceAndKeepsTheDefault) {
  Options o;
  Warnings w;
  const int n = parse_conf("bogus:1,memory_chunk_cache_size:huge,chunk_cache_ttl_ms:500,noval,,",
                           &o, &Warnings::sink, &w);
  EXPECT_EQ(n, 3);
  ASSERT_EQ(w.lines.size(), 3u);
  EXPECT_NE(w.lines[0].find("'bogus:1': unknown option"), std::string::npos) << w.lines[0];
  EXPECT_NE(w.lines[1].find("memory_chunk_cache_size: expected a number"), std::string::npos)
      << w.lines[1];
  EXPECT_NE(w.lines[1].find("default kept"), std::string::npos);
  EXPECT_NE(w.lines[2].find("'noval'"), std::string::npos) << w.lines[2];
  EXPECT_EQ(o[OPT_MEMORY_CHUNK_CACHE_SIZE], 0);
  EXPECT_EQ(o[OPT_CHUNK_CACHE_TTL_MS], 500);  // the good entry in between still applies
}

TEST(OptionsTest, LaterEntryWins) {
  Options o;
  parse_conf("chunk_cache_ttl_ms:1,chunk_cache_ttl_ms:2", &o, nullptr, nullptr);
  EXPECT_EQ(o[OPT_CHUNK_CACHE_TTL_MS], 2);
}

TEST(OptionsTest, NullAndEmptyConfAreFine) {
  Options o;
  EXPECT_EQ(parse_conf(nullptr, &o, nullptr, nullptr), 0);
  EXPECT_EQ(parse_conf("", &o, nullptr, nullptr), 0);
  EXPECT_EQ(o[OPT_CHUNK_CACHE_TTL_MS], 30000);
}

TEST(OptionsTest, FindOption) {
  EXPECT_EQ(find_option("memory_limit", 12), OPT_MEMORY_LIMIT);
  EXPECT_EQ(find_option("memory_limi", 11), -1);
  EXPECT_EQ(find_option("memory_limitx", 13), -1);
}

}  // namespace
}  // namespace achunk
