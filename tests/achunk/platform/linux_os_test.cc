// The real platform layer, on the real kernel: alignment, release and /proc reads.
#include "achunk/platform/linux_os.h"

#include <fcntl.h>
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

// Whether this process maps a file whose name contains `name` (/proc/self/maps).
bool maps_file_named(const char* name) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string maps;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) maps.append(buf, static_cast<size_t>(n));
  close(fd);
  return maps.find(name) != std::string::npos;
}

// A fork copies none of the stats region's page tables: the child inherits the
// descriptor but not the mapping, and dropping the parent's region there closes the
// descriptor and leaves the parent's bytes alone.
TEST(LinuxOsTest, AForkedChildGetsTheRegionsDescriptorButNotItsMapping) {
  LinuxOs os;
  int err = 0;
  Os::SharedRegion region = os.map_shared_region("achunk-os-test-region", 4096, &err);
  ASSERT_NE(region.addr, nullptr) << std::strerror(err);
  EXPECT_FALSE(region.shared_with_child);
  static_cast<char*>(region.addr)[0] = 7;
  ASSERT_TRUE(maps_file_named("achunk-os-test-region"));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int failures = 0;
    failures += maps_file_named("achunk-os-test-region");
    failures += fcntl(region.fd, F_GETFD) < 0;
    os.drop_parents_region(region, 4096);
    failures += fcntl(region.fd, F_GETFD) >= 0;
    _exit(failures);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(static_cast<char*>(region.addr)[0], 7);
  EXPECT_GE(fcntl(region.fd, F_GETFD), 0);
  os.unmap_shared_region(region, 4096);
  EXPECT_FALSE(maps_file_named("achunk-os-test-region"));
}

}  // namespace
}  // namespace achunk
