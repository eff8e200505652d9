// The main job (scripts/demo.sh): a burst of chunk traffic followed by a quiet phase,
// run once per cache setting, each in its own child process so RSS figures do not mix:
//   (a) memory_chunk_cache_size=0, eviction off   - the reference before PR #925
//   (b) memory_chunk_cache_size=2M                - bounded cache, mmap churn
//   (c) memory_chunk_cache_size=0, idle eviction  - this project's default
// Burst: 2 threads allocate and free 2-8 MiB chunks, touching every page, about
// 128 MiB live at the peak. Quiet: one thread allocates and frees one 2 MiB chunk every
// 100 ms, so each free may evict one expired chunk.
// Usage: achunk_burst_quiet [--quick] [--mode=a|b|c]
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "achunk/achunk_mgr.h"
#include "achunk/clock.h"
#include "achunk/linux_os.h"

namespace achunk {
namespace {

constexpr int64_t MB = int64_t{1} << 20;

struct Timing {
  double burst_s = 5.0;
  double quiet_s = 45.0;
  double quiet_interval_s = 0.1;
  int64_t ttl_ms = 30000;
};

struct Mode {
  char id;
  const char* name;
  int64_t cache_size;
  bool evict;
};

constexpr Mode MODES[] = {
    {'a', "cache 0, no eviction", 0, false},
    {'b', "cache 2M", 2 * MB, true},
    {'c', "cache 0, idle eviction", 0, true},
};

struct Result {
  double ops_per_s = 0;
  int64_t rss_burst_end = 0;
  int64_t rss_quiet_end = 0;
  int64_t maps = 0;
  int64_t unmaps = 0;
  int64_t expired_unmaps = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void touch(AChunk* chunk, int64_t size) {
  volatile char* p = static_cast<char*>(chunk->data());
  for (int64_t off = 0; off < size; off += ACHUNK_PAGE_SIZE) p[off] = 1;
}

// One burst thread: keeps up to 64 MiB of chunks live, freeing the oldest to make room.
int64_t burst_thread(AChunkMgr& mgr, double seconds, unsigned seed) {
  constexpr int64_t LIVE_CAP = 64 * MB;
  std::mt19937 rng(seed);
  std::vector<AChunk*> live;
  int64_t live_bytes = 0;
  int64_t ops = 0;
  size_t oldest = 0;
  const auto start = std::chrono::steady_clock::now();
  while ((ops & 63) != 0 || seconds_since(start) < seconds) {
    const int64_t mapped = 2 * MB * (1 + static_cast<int64_t>(rng() % 4));  // 2..8 MiB
    const int64_t size = mapped - ACHUNK_HEADER_SIZE;
    while (live_bytes + mapped > LIVE_CAP && oldest < live.size()) {
      live_bytes -= live[oldest]->aligned();
      mgr.free_chunk(live[oldest++]);
    }
    AChunk* c = mgr.alloc_chunk(size);
    if (c == nullptr) {
      std::fprintf(stderr, "burst: alloc_chunk failed\n");
      std::exit(1);
    }
    touch(c, size);
    live.push_back(c);
    live_bytes += mapped;
    ++ops;
    if (oldest > 1024) {  // compact the FIFO now and then
      live.erase(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(oldest));
      oldest = 0;
    }
  }
  for (size_t i = oldest; i < live.size(); ++i) mgr.free_chunk(live[i]);
  return ops;
}

Result run_mode(const Mode& mode, const Timing& t) {
  LinuxOs os;
  MonotonicClock clock;
  AChunkMgr mgr(os, clock);
  mgr.set_max_chunk_cache_size(mode.cache_size, true);
  mgr.set_chunk_cache_ttl_ms(mode.evict ? t.ttl_ms : -1);

  Result r;
  std::atomic<int64_t> ops{0};
  const auto start = std::chrono::steady_clock::now();
  std::thread a([&] { ops += burst_thread(mgr, t.burst_s, 1); });
  std::thread b([&] { ops += burst_thread(mgr, t.burst_s, 2); });
  a.join();
  b.join();
  r.ops_per_s = static_cast<double>(ops.load()) / seconds_since(start);
  r.rss_burst_end = os.memory_info().resident_size;

  const auto quiet_start = std::chrono::steady_clock::now();
  const auto step = std::chrono::duration<double>(t.quiet_interval_s);
  for (int i = 1; seconds_since(quiet_start) < t.quiet_s; ++i) {
    AChunk* c = mgr.alloc_chunk(ACHUNK_SIZE);
    touch(c, ACHUNK_SIZE);
    mgr.free_chunk(c);
    std::this_thread::sleep_until(quiet_start + i * step);
  }
  r.rss_quiet_end = os.memory_info().resident_size;
  const ChunkMgrStats s = mgr.get_stats(false);
  r.maps = s.total_maps;
  r.unmaps = s.total_unmaps;
  r.expired_unmaps = s.expired_unmaps;

  static char dump[8192];
  mgr.print(dump, sizeof(dump));
  std::printf("--- (%c) %s: [chunk_mgr] dump at quiet end ---\n%s", mode.id, mode.name, dump);
  std::fflush(stdout);
  return r;
}

// Runs one mode in a child process and reads its Result back through a pipe.
bool run_in_child(const Mode& mode, const Timing& t, Result* out) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Result r = run_mode(mode, t);
    const bool ok = write(fds[1], &r, sizeof(r)) == static_cast<ssize_t>(sizeof(r));
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  const bool ok = read(fds[0], out, sizeof(*out)) == static_cast<ssize_t>(sizeof(*out));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main_impl(int argc, char** argv) {
  Timing t;
  char only = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      // Every duration, the TTL included, scaled down 10x: same shape, ~16 s in all.
      t = Timing{1.0, 4.5, 0.01, 3000};
    } else if (std::strncmp(argv[i], "--mode=", 7) == 0 && argv[i][7] >= 'a' &&
               argv[i][7] <= 'c' && argv[i][8] == '\0') {
      only = argv[i][7];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--mode=a|b|c]\n", argv[0]);
      return 2;
    }
  }
  std::printf("burst %.1f s (2 threads, 2-8 MiB chunks, every page touched, ~128 MiB peak), "
              "quiet %.1f s (one 2 MiB alloc+free every %.0f ms), ttl %lld ms%s\n",
              t.burst_s, t.quiet_s, t.quiet_interval_s * 1000, static_cast<long long>(t.ttl_ms),
              t.ttl_ms != 30000 ? " [--quick: all times scaled down]" : "");
  Result results[3];
  bool ran[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    if (only != 0 && MODES[i].id != only) continue;
    if (!run_in_child(MODES[i], t, &results[i])) {
      std::fprintf(stderr, "mode (%c) failed\n", MODES[i].id);
      return 1;
    }
    ran[i] = true;
  }
  std::printf("\n| run | setting | burst chunk ops/s | RSS burst end MiB | RSS quiet end MiB | "
              "maps | unmaps | expired_unmaps |\n|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < 3; ++i) {
    if (!ran[i]) continue;
    const Result& r = results[i];
    std::printf("| (%c) | %s | %.0f | %.1f | %.1f | %lld | %lld | %lld |\n", MODES[i].id,
                MODES[i].name, r.ops_per_s, static_cast<double>(r.rss_burst_end) / MB,
                static_cast<double>(r.rss_quiet_end) / MB, static_cast<long long>(r.maps),
                static_cast<long long>(r.unmaps), static_cast<long long>(r.expired_unmaps));
  }
  if (ran[0] && ran[1] && ran[2]) {
    const double speed = results[2].ops_per_s / results[0].ops_per_s;
    const double rss_gap =
        static_cast<double>(results[2].rss_quiet_end - results[1].rss_quiet_end) / MB;
    const bool ok = speed >= 0.98 && rss_gap <= 8.0;
    std::printf("\n(c)/(a) burst ops/s = %.3f (goal >= 0.98); (c) - (b) quiet-end RSS = %.1f MiB "
                "(goal <= 8): %s\n",
                speed, rss_gap, ok ? "GOAL MET" : "GOAL MISSED");
  }
  return 0;
}

}  // namespace
}  // namespace achunk

int main(int argc, char** argv) { return achunk::main_impl(argc, argv); }
