// Run under LD_PRELOAD=libachunk_malloc.so with short release_interval_ms, span_idle_ms
// and chunk_cache_ttl_ms: a parent holds 200 MB of objects allocated by two threads, one
// of which stays alive (and does not exist in the child); a forked child frees them all
// and then only waits, making no allocation. Its memory must still go back (the chunks
// held, cache included, and the RSS near where the parent started), as a process that
// forks workers which drop the parent's data expects. The wait is for the housekeeping
// thread's looks and the short TTL, no sleep standing in for either.
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "check.h"

namespace {

// Resident bytes from /proc/self/statm with read(2): stdio would allocate.
size_t rss_bytes() {
  char buf[128] = {};
  const int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  const char* second = strchr(buf, ' ');
  return second == nullptr ? 0 : strtoull(second + 1, nullptr, 10) * 4096;
}

void fill(std::vector<void*>& objs, uint32_t seed) {
  for (size_t i = 0; i < objs.size(); ++i) {
    const size_t size = 16 + (static_cast<uint32_t>(i) * 2654435761u + seed) % 2040;
    objs[i] = malloc(size);
    memset(objs[i], 1, size);
  }
}

}  // namespace

int main() {
  constexpr size_t N = 100'000;
  const size_t start_hold = mallinfo2().arena;
  const size_t start_rss = rss_bytes();
  std::vector<void*> mine(N);
  std::vector<void*> theirs(N);
  std::atomic<int> stage{0};
  std::thread owner([&] {
    fill(theirs, 7);
    stage.store(1);
    while (stage.load() != 2) usleep(1000);  // alive in the parent, making no call
  });
  fill(mine, 3);
  while (stage.load() != 1) usleep(1000);
  const size_t full_hold = mallinfo2().arena;
  CHECK(full_hold >= start_hold + (150u << 20));

  const pid_t pid = fork();
  if (pid == 0) {
    for (void* p : mine) free(p);
    for (void* p : theirs) free(p);
    size_t hold = full_hold;
    size_t rss = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      hold = mallinfo2().arena;
      rss = rss_bytes();
      if (hold <= start_hold + (8u << 20) && rss <= start_rss + (16u << 20)) break;
      usleep(20'000);
    }
    printf(
        "child: held %zu at start, %zu with the objects, %zu after the frees; rss %zu at "
        "start, %zu after\n",
        start_hold, full_hold, hold, start_rss, rss);
    CHECK(hold <= start_hold + (8u << 20));
    CHECK(rss <= start_rss + (16u << 20));
    fflush(stdout);
    _exit(g_failures == 0 ? 0 : 1);
  }
  CHECK(pid > 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  stage.store(2);
  owner.join();
  for (void* p : mine) free(p);
  for (void* p : theirs) free(p);
  if (g_failures == 0) printf("fork_child_frees ok\n");
  return g_failures == 0 ? 0 : 1;
}
