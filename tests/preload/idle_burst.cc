// Run under LD_PRELOAD=libachunk_malloc.so by the dump tool's live test: a burst of
// chunk-sized allocations, all freed (so the chunk cache holds them), then idle. With
// "fork", a child forked after the burst allocates and idles too and its pid is printed.
// With "nobody" (started as root), it turns into user nobody after the burst, so that
// /proc shows it as another user's process, as a database server run as mysql is. With
// "young", a small parent forks a child that allocates a little and idles.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// Keeps the compiler from eliding a malloc/free pair whose memory nobody reads.
void* volatile g_sink;

int main(int argc, char** argv) {
  pid_t child = 0;
  // "young": no burst, so the parent holds little, and a child that allocates a little
  // and idles, too young for a region of its own.
  if (argc > 1 && std::strcmp(argv[1], "young") == 0) {
    std::free(std::malloc(100));
    child = fork();
    if (child == 0) {
      for (int i = 0; i < 100; ++i) g_sink = std::malloc(16 + i);
      sleep(60);
      return 0;
    }
    std::printf("ready %d\n", static_cast<int>(child));
    std::fflush(stdout);
    sleep(60);
    kill(child, SIGKILL);
    return 0;
  }
  constexpr int N = 24;
  void* blocks[N];
  for (void*& b : blocks) {
    b = std::malloc(1536 * 1024);
    std::memset(b, 1, 4096);
    g_sink = b;
  }
  for (void* b : blocks) std::free(b);
  if (argc > 1 && std::strcmp(argv[1], "nobody") == 0) {
    constexpr uid_t NOBODY = 65534;
    // A set-uid leaves the process undumpable, and /proc would show it as root's.
    if (setresgid(NOBODY, NOBODY, NOBODY) != 0 || setresuid(NOBODY, NOBODY, NOBODY) != 0 ||
        prctl(PR_SET_DUMPABLE, 1) != 0) {
      std::perror("idle_burst: becoming nobody");
      return 1;
    }
  }
  if (argc > 1 && std::strcmp(argv[1], "fork") == 0) {
    child = fork();
    if (child == 0) {
      void* p = std::malloc(1536 * 1024);  // the child's first allocation
      std::memset(p, 2, 4096);
      g_sink = p;
      std::free(p);
      sleep(60);
      return 0;
    }
  }
  std::printf("ready %d\n", static_cast<int>(child));
  std::fflush(stdout);
  sleep(60);
  if (child > 0) kill(child, SIGKILL);
  return 0;
}
