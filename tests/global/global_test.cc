// The public API over the process-wide chunk manager, on the real OS.
#include "achunk/achunk.hpp"

#include <gtest/gtest.h>

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "achunk/achunk.h"
#include "achunk/platform/linux_os.h"
#include "global/global.h"
#include "global/ob_malloc.h"

namespace achunk {
namespace {

TEST(GlobalApiTest, ChunkAllocFreeRoundTrip) {
  void* p = chunk_alloc(1 << 20);
  ASSERT_NE(p, nullptr);
  std::memset(p, 0xab, 1 << 20);
  const int64_t used = global_chunk_mgr().get_used();
  EXPECT_GE(used, 2 << 20);
  chunk_free(p);
  EXPECT_EQ(global_chunk_mgr().get_used(), used - (2 << 20));
  chunk_free(nullptr);
}

TEST(GlobalApiTest, SetAndGetOptions) {
  char err[128] = "";
  EXPECT_TRUE(set_option("memory_chunk_cache_size", "4M", err, sizeof(err))) << err;
  int64_t v = 0;
  ASSERT_TRUE(get_option("memory_chunk_cache_size", &v));
  EXPECT_EQ(v, 4 << 20);
  EXPECT_EQ(global_chunk_mgr().get_max_chunk_cache_size(), 4 << 20);
  EXPECT_TRUE(set_option("memory_chunk_cache_size", "0", err, sizeof(err)));
  EXPECT_FALSE(set_option("no_such_option", "1", err, sizeof(err)));
  EXPECT_NE(std::string(err).find("unknown option"), std::string::npos);
  EXPECT_FALSE(set_option("chunk_cache_ttl_ms", "soon", err, sizeof(err)));
  ASSERT_TRUE(get_option("chunk_cache_ttl_ms", &v));
  EXPECT_EQ(v, 30000);  // the bad value changed nothing
  EXPECT_FALSE(get_option("no_such_option", &v));
  // The span idle time reaches the tenant directory, whose ctxs' block layers read it;
  // below -1 is refused and changes nothing.
  EXPECT_TRUE(set_option("span_idle_ms", "250", err, sizeof(err))) << err;
  EXPECT_EQ(global_malloc_allocator().span_idle_us(), 250'000);
  EXPECT_EQ(
      global_malloc_allocator().get_tenant_ctx_allocator(OB_SERVER_TENANT_ID, 0)->span_idle_us(),
      250'000);
  EXPECT_FALSE(set_option("span_idle_ms", "-2", err, sizeof(err)));
  EXPECT_EQ(global_malloc_allocator().span_idle_us(), 250'000);
  EXPECT_TRUE(set_option("span_idle_ms", "1000", err, sizeof(err))) << err;
}

TEST(GlobalApiTest, DumpAndFailureMessage) {
  char buf[4096];
  print_chunk_dump(buf, sizeof(buf));
  EXPECT_EQ(std::string(buf).rfind("[chunk_mgr] limit=", 0), 0u);
  print_chunk_dump(buf, sizeof(buf), DumpFormat::JSON);
  EXPECT_EQ(std::string(buf).rfind("{\"chunk_mgr\":", 0), 0u);
  EXPECT_EQ(chunk_alloc(0), nullptr);
  last_failure_message(buf, sizeof(buf));
  EXPECT_EQ(std::string(buf).rfind("INVALID_SIZE", 0), 0u) << buf;
}

TEST(GlobalApiTest, ReleaseFreeMemoryEmptiesTheCache) {
  chunk_free(chunk_alloc(1000));
  EXPECT_GT(global_chunk_mgr().get_freelist_hold(), 0);
  EXPECT_GT(release_free_memory(), 0);
  EXPECT_EQ(global_chunk_mgr().get_freelist_hold(), 0);
}

}  // namespace
}  // namespace achunk

namespace achunk {
namespace {

// ACHUNK_CONF is read once, when the process-wide objects are created, so the check runs
// in a fresh child process (the threadsafe death-test style re-executes the binary).
TEST(GlobalApiDeathTest, BadConfEntryWarnsOnceAndKeepsDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("ACHUNK_CONF", "memory_chunk_cache_size:lots,chunk_cache_ttl_ms:5000", 1);
        int64_t cache = -1;
        int64_t ttl = -1;
        get_option("memory_chunk_cache_size", &cache);
        get_option("chunk_cache_ttl_ms", &ttl);
        std::exit(cache == 0 && ttl == 5000 && global_chunk_mgr().get_chunk_cache_ttl_ms() == 5000
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0),
      "^achunk: ignoring ACHUNK_CONF entry 'memory_chunk_cache_size:lots': "
      "memory_chunk_cache_size: expected a number \\(default kept\\)\n$");
}

}  // namespace
}  // namespace achunk

namespace achunk {
namespace {

// The release thread is created at load time, before a host blocks signals for its own
// sigwait thread; if it did not block every signal itself, a SIGTERM meant for the host
// could land in it (MariaDB then hangs on shutdown). Checked in a fresh process.
TEST(GlobalApiDeathTest, ReleaseThreadBlocksEverySignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("ACHUNK_CONF", "release_interval_ms:100000", 1);
        start_release_thread();
        // The thread records its mask first thing; wait for that, not for time.
        int state = -1;
        for (long spins = 0; state < 0 && spins < 100000000; ++spins) {
          state = release_thread_signals_blocked();
          if (state < 0) sched_yield();
        }
        std::exit(state == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace achunk

namespace achunk {
namespace {

// The tenant directory reserves storage for every (tenant, ctx) allocator, about 3 MB of
// bss. Only the allocators in use may cost RAM: value-initialising the globals once zeroed
// all of it, which put 3 MB into every process the drop-in malloc was loaded into (a
// MariaDB server's whole idle-RSS gap to glibc). Checked in a fresh process, where one
// ctx exists.
TEST(GlobalApiDeathTest, TheTenantDirectoryCostsRamOnlyForTheCtxAllocatorsInUse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        void* p = ob_malloc(64, ObMemAttr(OB_SERVER_TENANT_ID, "resident"));
        ObMallocAllocator& directory = global_malloc_allocator();
        const uintptr_t begin = reinterpret_cast<uintptr_t>(&directory) & ~uintptr_t{4095};
        const uintptr_t end = reinterpret_cast<uintptr_t>(&directory) + sizeof(directory);
        LinuxOs os;
        const int64_t resident =
            os.resident_bytes(reinterpret_cast<void*>(begin), static_cast<int64_t>(end - begin));
        ob_free(p);
        fprintf(stderr, "directory %zu bytes, resident %lld\n", sizeof(directory),
                static_cast<long long>(resident));
        // One ctx allocator (about 18 KiB) and the directory's own fields.
        std::exit(resident >= 0 && resident < 256 * 1024 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace achunk
