#include "achunk/chunk/chunk_stats.h"

#include <gtest/gtest.h>

#include <string>

#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

using ChunkStatsTest = ChunkMgrTest;

TEST_F(ChunkStatsTest, TextDumpHasReferenceLinesAndFields) {
  AChunk* a = alloc_normal();
  AChunk* b = alloc_mb(4);
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);
  char buf[8192];
  const int64_t n = mgr_.print(buf, sizeof(buf));
  ASSERT_LT(n, static_cast<int64_t>(sizeof(buf)));
  const std::string out(buf);
  EXPECT_EQ(out.rfind("[chunk_mgr] limit=", 0), 0u) << out;
  for (const char* field :
       {" hold=", " total_hold=", " used=", " freelists_hold=", " total_maps=", " total_unmaps=",
        " large_maps=", " large_unmaps=", " huge_maps=", " huge_unmaps=", " expired_unmaps=",
        " resident_size=", " virtual_memory_used=", "vm.max_map_count=65530",
        "transparent_hugepages=m"}) {
    EXPECT_NE(out.find(field), std::string::npos) << field;
  }
  EXPECT_NE(out.find("freelists_hold=      6,291,456"), std::string::npos) << out;
  EXPECT_NE(out.find("[CHUNK_MGR]  2 MB_CACHE: hold=      2,097,152 count=              1"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[CHUNK_MGR]  4 MB_CACHE: hold=      4,194,304 count=              1"),
            std::string::npos);
  EXPECT_NE(out.find("[CHUNK_MGR] 20 MB_CACHE:"), std::string::npos);
  EXPECT_NE(out.find("\n[CHUNK_MGR] >20 MB_CACHE: hold="), std::string::npos);
  int lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 12);
}

TEST_F(ChunkStatsTest, CacheResidentSumsWhatTheCachedChunksKeepInRam) {
  AChunk* a = alloc_normal();
  AChunk* b = alloc_mb(4);
  AChunk* live = alloc_normal();  // not cached: not counted
  mgr_.free_chunk(a);
  mgr_.free_chunk(b);
  os_.set_resident_per_range(300 * 1024);
  const int64_t calls = os_.resident_calls();
  EXPECT_EQ(mgr_.get_stats().cache_resident, 600 * 1024);
  EXPECT_EQ(os_.resident_calls() - calls, 2);          // one probe per cached chunk
  EXPECT_EQ(mgr_.get_stats(false).cache_resident, 0);  // no OS figures: no probe
  char buf[8192];
  mgr_.print(buf, sizeof(buf));
  EXPECT_NE(std::string(buf).find(
                " cache_resident=        614,400 cache_resizes=              0 live_resizes=      "
                "        0 slack_trims=              0 [OS_PARAMS]"),
            std::string::npos)
      << buf;
  os_.set_resident_per_range(-1);
  mgr_.free_chunk(live);
}

TEST_F(ChunkStatsTest, JsonHasTheSameFields) {
  AChunk* a = alloc_normal();
  mgr_.free_chunk(a);
  char buf[8192];
  mgr_.print_json(buf, sizeof(buf));
  const std::string out(buf);
  EXPECT_EQ(out.rfind("{\"chunk_mgr\":{\"limit\":", 0), 0u) << out;
  EXPECT_NE(out.find("\"freelists_hold\":2097152"), std::string::npos) << out;
  EXPECT_NE(out.find("\"transparent_hugepages\":\"m\""), std::string::npos);
  EXPECT_NE(out.find("{\"size_mb\":2,\"hold\":2097152,\"count\":1,\"pushes\":1,\"pops\":0,"
                     "\"maps\":1,\"unmaps\":0}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("{\"size_mb\":20,"), std::string::npos);
  // Balanced braces and brackets: a cheap structural check without a JSON library.
  int depth = 0;
  for (char c : out) {
    depth += (c == '{' || c == '[') - (c == '}' || c == ']');
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
}

TEST_F(ChunkStatsTest, ShortBufferReportsNeededLength) {
  char small[32];
  const int64_t need = mgr_.print(small, sizeof(small));
  EXPECT_GT(need, static_cast<int64_t>(sizeof(small)));
  EXPECT_EQ(small[sizeof(small) - 1], '\0');
  std::string big(static_cast<size_t>(need) + 1, '\0');
  EXPECT_EQ(mgr_.print(big.data(), need + 1), need);
}

}  // namespace
}  // namespace achunk::testing
