// The C API (achunk/achunk.h) over the process-wide objects: options and dumps through
// C, and glibc's extras (mallinfo2, malloc_trim, mallopt, malloc_info).
#include "achunk/achunk.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "achunk/achunk.hpp"

namespace achunk {
namespace {

TEST(CApiTest, COptionsAndDumps) {
  char err[128];
  EXPECT_EQ(achunk_set_option("chunk_cache_ttl_ms", "12345", err, sizeof(err)), 0);
  int64_t v = 0;
  EXPECT_EQ(achunk_get_option("chunk_cache_ttl_ms", &v), 0);
  EXPECT_EQ(v, 12345);
  EXPECT_EQ(achunk_set_option("chunk_cache_ttl_ms", "x", err, sizeof(err)), -1);
  EXPECT_NE(std::string(err).find("expected a number"), std::string::npos);
  EXPECT_EQ(achunk_get_option("nope", &v), -1);
  void* p = achunk_malloc(100);
  char buf[8192];
  achunk_print_chunk_dump(buf, sizeof(buf), 0);
  EXPECT_EQ(std::string(buf).rfind("[chunk_mgr]", 0), 0u);
  achunk_print_usage(buf, sizeof(buf), 0);
  EXPECT_NE(std::string(buf).find("ctx_id=GLIBC"), std::string::npos) << buf;
  EXPECT_NE(std::string(buf).find("mod=glibc_malloc"), std::string::npos);
  achunk_free(p);
  EXPECT_GE(achunk_release_free_memory(), 0);
  // The process's options outlive the test: later tests in this process expect defaults.
  EXPECT_EQ(achunk_set_option("chunk_cache_ttl_ms", "30000", err, sizeof(err)), 0);
}
// glibc's extras as the C API serves them (libachunk_malloc.so exports them by glibc's names).
TEST(CApiTest, MallinfoAndTrimReportTheChunkCache) {
  char err[64];
  ASSERT_TRUE(set_option("memory_chunk_cache_size", "64M", err, sizeof(err))) << err;
  void* p = chunk_alloc(4 << 20);
  ASSERT_NE(p, nullptr);
  const achunk_mallinfo during = achunk_mallinfo2();
  EXPECT_GE(during.arena, size_t{4} << 20);
  EXPECT_GE(during.uordblks, size_t{4} << 20);
  chunk_free(p);
  const achunk_mallinfo cached = achunk_mallinfo2();
  EXPECT_GE(cached.fordblks, size_t{4} << 20);
  EXPECT_EQ(cached.keepcost, cached.fordblks);
  EXPECT_EQ(achunk_malloc_trim(0), 1);
  EXPECT_EQ(achunk_mallinfo2().fordblks, 0u);
  EXPECT_EQ(achunk_mallopt(-1, 0), 1);  // M_TRIM_THRESHOLD
  EXPECT_EQ(achunk_mallopt(-3, 0), 1);  // M_MMAP_THRESHOLD
  EXPECT_EQ(achunk_mallopt(-8, 2), 0);  // M_ARENA_MAX
}

TEST(CApiTest, MallocInfoWritesXml) {
  char buf[4096] = {};
  FILE* f = fmemopen(buf, sizeof(buf) - 1, "w");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(achunk_malloc_info(0, f), 0);
  fclose(f);
  const std::string xml(buf);
  EXPECT_EQ(xml.rfind("<malloc version=\"achunk-1\">", 0), 0u) << xml;
  EXPECT_NE(xml.find("<total type=\"arena\" size=\""), std::string::npos);
  EXPECT_NE(xml.find("</malloc>"), std::string::npos);
  EXPECT_EQ(achunk_malloc_info(1, stderr), -1);  // options other than 0
}

}  // namespace
}  // namespace achunk
