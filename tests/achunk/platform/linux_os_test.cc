// The real platform layer, on the real kernel: alignment, release and /proc reads.
#include "achunk/platform/linux_os.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "achunk/chunk/achunk_header.h"

namespace achunk {
namespace {

TEST(LinuxOsTest, MapsAlignedZeroedWritableMemory) {
  LinuxOs os;
  for (int64_t size : {ACHUNK_ALIGN, 3 * ACHUNK_ALIGN}) {
    int err = 0;
    char* p = static_cast<char*>(os.map_aligned(size, ACHUNK_ALIGN, &err));
    ASSERT_NE(p, nullptr) << std::strerror(err);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % ACHUNK_ALIGN, 0u);
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[size - 1], 0);
    p[0] = 1;
    p[size - 1] = 1;
    EXPECT_EQ(os.release_pages(p, size), 0);
    EXPECT_EQ(p[0], 0);  // released pages read back as zero
    EXPECT_EQ(os.unmap(p, size), 0);
  }
}

TEST(LinuxOsTest, ResidentBytesFollowTouchesAndReleases) {
  LinuxOs os;
  const int64_t size = 3 * ACHUNK_ALIGN;  // more than one mincore piece
  int err = 0;
  char* p = static_cast<char*>(os.map_aligned(size, ACHUNK_ALIGN, &err));
  ASSERT_NE(p, nullptr) << std::strerror(err);
  EXPECT_EQ(os.resident_bytes(p, size), 0);  // nothing touched yet
  const int64_t page = 4096;
  p[0] = 1;
  p[ACHUNK_ALIGN + 5 * page] = 1;
  p[size - 1] = 1;
  const int64_t touched = os.resident_bytes(p, size);
  // Three pages, or whole huge pages where THP is "always".
  EXPECT_GE(touched, 3 * page);
  EXPECT_LE(touched, size);
  EXPECT_EQ(os.resident_bytes(p + page, page), 0);  // a page in between stays out
  EXPECT_EQ(os.release_pages(p, size), 0);
  EXPECT_EQ(os.resident_bytes(p, size), 0);
  EXPECT_EQ(os.unmap(p, size), 0);
}

TEST(LinuxOsTest, ResidentPagesMarkTheTouchedPages) {
  LinuxOs os;
  const int64_t size = ACHUNK_ALIGN;
  int err = 0;
  char* p = static_cast<char*>(os.map_aligned(size, ACHUNK_ALIGN, &err));
  ASSERT_NE(p, nullptr) << std::strerror(err);
  std::vector<unsigned char> vec(static_cast<size_t>(size / 4096));
  ASSERT_EQ(os.resident_pages(p, size, vec.data()), 4096);
  for (unsigned char v : vec) EXPECT_EQ(v & 1, 0);  // nothing touched yet
  p[3 * 4096] = 1;
  ASSERT_EQ(os.resident_pages(p, size, vec.data()), 4096);
  EXPECT_EQ(vec[3] & 1, 1);
  EXPECT_EQ(os.release_pages(p, size), 0);
  ASSERT_EQ(os.resident_pages(p, size, vec.data()), 4096);
  EXPECT_EQ(vec[3] & 1, 0);
  EXPECT_EQ(os.unmap(p, size), 0);
  // An unmapped range: the OS cannot tell.
  EXPECT_EQ(os.resident_pages(p, size, vec.data()), -1);
}

TEST(LinuxOsTest, ReportsErrnoOnFailure) {
  LinuxOs os;
  int err = 0;
  EXPECT_EQ(os.map_aligned(int64_t{1} << 62, ACHUNK_ALIGN, &err), nullptr);
  EXPECT_EQ(err, ENOMEM);
  EXPECT_EQ(os.unmap(reinterpret_cast<void*>(4097), 4096), EINVAL);
}

TEST(LinuxOsTest, MemoryInfoIsSane) {
  LinuxOs os;
  const OsMemoryInfo info = os.memory_info();
  EXPECT_GT(info.resident_size, 0);
  EXPECT_GE(info.virtual_memory_used, info.resident_size);
  EXPECT_GT(info.max_map_count, 0);
  const std::string thp = info.thp_mode;
  EXPECT_TRUE(thp == "always" || thp == "madvise" || thp == "never" || thp == "unknown") << thp;
}

// The barrier the object layer's look at idle heaps relies on: where the kernel offers it,
// it works (registering on first use), from any thread and in a forked child, and leaves
// errno as it was.
TEST(LinuxOsTest, ProcessBarrierWorksWhereOfferedAndKeepsErrno) {
  LinuxOs os;
  if (!os.process_barrier_available()) GTEST_SKIP() << "no private expedited membarrier here";
  errno = 1234;
  EXPECT_TRUE(os.process_barrier());
  EXPECT_TRUE(os.process_barrier());
  bool from_thread = false;
  std::thread t([&] { from_thread = os.process_barrier(); });
  t.join();
  EXPECT_TRUE(from_thread);
  EXPECT_EQ(errno, 1234);
  // A forked child is a process of its own, registered or not: it works there too.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(os.process_barrier() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace achunk
