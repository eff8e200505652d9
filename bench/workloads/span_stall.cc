// The slowest step, second by second, of a thread that replaces buffers of 64-512 KiB
// (each a span taken and freed under a shard lock) every 200 us, while another thread
// replaces random objects of 8 B-1 KiB among a large live set. Plain malloc/free, linked
// with no allocator, so LD_PRELOAD picks the one measured: a step that waits for a lock
// held across a usage scan or a wash shows as a spike in its second. With `fork`, the
// step is a fork() (the child exits at once) every 20 ms instead: prepare waits for the
// locks the allocator holds across fork.
//
// Usage: achunk_span_stall [live objects, default 500000] [seconds, default 22] [fork]
// Prints one line a second: the steps taken and the slowest, in microseconds.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int REPLACEMENTS_PER_LOOK = 256;
constexpr int BUFFERS = 8;

void replace_objects(size_t live, const std::atomic<bool>& stop) {
  std::mt19937 rng(1);
  auto take = [&] {
    void* p = malloc(8 + rng() % 1017);
    if (p == nullptr) std::abort();
    static_cast<char*>(p)[0] = 1;
    return p;
  };
  std::vector<void*> slots(live);
  for (void*& p : slots) p = take();
  while (!stop.load(std::memory_order_relaxed)) {
    for (int k = 0; k < REPLACEMENTS_PER_LOOK; ++k) {
      void*& p = slots[rng() % live];
      free(p);
      p = take();
    }
  }
  for (void* p : slots) free(p);
}

void fork_step() {
  const pid_t pid = fork();
  if (pid < 0) std::abort();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t live = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 500'000;
  const int seconds = argc > 2 ? std::atoi(argv[2]) : 22;
  const bool forks = argc > 3 && std::strcmp(argv[3], "fork") == 0;
  if (live == 0 || seconds <= 0 || (argc > 3 && !forks)) {
    std::fprintf(stderr, "usage: achunk_span_stall [live objects > 0] [seconds > 0] [fork]\n");
    return 2;
  }
  std::atomic<bool> stop{false};
  std::thread objects(replace_objects, live, std::cref(stop));
  using Clock = std::chrono::steady_clock;
  std::mt19937 rng(2);
  std::vector<void*> buffers(BUFFERS, nullptr);
  const Clock::time_point start = Clock::now();
  for (int second = 0; second < seconds; ++second) {
    double worst_us = 0;
    long steps = 0;
    while (Clock::now() - start < std::chrono::seconds(second + 1)) {
      const Clock::time_point t0 = Clock::now();
      if (forks) {
        fork_step();
      } else {
        void*& p = buffers[rng() % BUFFERS];
        free(p);
        p = malloc((64 + rng() % 449) << 10);
        if (p == nullptr) std::abort();
        static_cast<char*>(p)[0] = 1;
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (us > worst_us) worst_us = us;
      ++steps;
      std::this_thread::sleep_for(std::chrono::microseconds(forks ? 20'000 : 200));
    }
    std::printf("%2d s: %6ld %s steps, worst %9.1f us\n", second, steps, forks ? "fork" : "span",
                worst_us);
    std::fflush(stdout);
  }
  stop.store(true);
  objects.join();
  for (void* p : buffers) free(p);
  return 0;
}
