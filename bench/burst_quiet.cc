// The main job (scripts/demo.sh): a burst of chunk traffic followed by a quiet phase,
// run once per cache setting, each in its own child process so RSS figures do not mix:
//   (a) memory_chunk_cache_size=0, eviction off   - the reference before PR #925
//   (b) memory_chunk_cache_size=2M                - bounded cache, mmap churn
//   (c) memory_chunk_cache_size=0, idle eviction  - this project's default
// Burst: 2 threads allocate and free 2-8 MiB chunks, touching every page, about
// 128 MiB live at the peak; between chunk operations they also ob_malloc and ob_free
// objects of mixed sizes (16 B to 64 KiB) under three labels. Quiet: one thread allocates and frees
// one 2 MiB chunk every 100 ms, so each free may evict one expired chunk, and once a second
// washes the object layer's spans free for span_idle_ms, as the drop-in's housekeeping thread
// does (a library user asks for it: no span is freed while quiet). The burst is split into
// rounds driven in turn (a, c, b, a, c, b, ...) so a noisy neighbour on the machine hits every
// setting alike; each setting's ops/s is the median of its timed rounds. A first, untimed round
// faults the working set in: on a VM the first touch of guest memory the host has not backed yet
// costs several times a normal fault and varies from run to run, which would otherwise drown the
// comparison. A child starts its quiet phase right after its last round, so the quiet phases
// overlap and the whole job takes about one minute. Each child publishes a stats region;
// with --record DIR --dump-tool PATH the parent records every child through it with
// achunk-dump and writes the timeline (burst_timeline.h).
// Usage: achunk_burst_quiet [--quick] [--record DIR --dump-tool PATH]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "achunk/chunk/achunk_mgr.h"
#include "achunk/platform/clock.h"
#include "achunk/platform/linux_os.h"
#include "alloc/object/malloc_allocator.h"
#include "burst_timeline.h"

namespace achunk {
namespace {

constexpr int64_t MB = int64_t{1} << 20;

struct Timing {
  int rounds = 5;  // timed rounds, after one untimed warm-up round
  double round_s = 1.0;
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

constexpr int MODE_COUNT = 3;
constexpr Mode MODES[MODE_COUNT] = {
    {'a', "cache 0, no eviction", 0, false},
    {'b', "cache 2M", 2 * MB, true},
    {'c', "cache 0, idle eviction", 0, true},
};
constexpr int ROUND_ORDER[MODE_COUNT] = {0, 2, 1};  // (a) and (c) back to back

struct Result {
  double ops_per_s = 0;      // chunk ops, median over the rounds
  double obj_ops_per_s = 0;  // ob_malloc+ob_free pairs, median over the rounds
  int64_t rss_burst_end = 0;
  int64_t rss_quiet_end = 0;
  int64_t maps = 0;
  int64_t unmaps = 0;
  int64_t expired_unmaps = 0;
  char dump[4096] = {};
  char usage[4096] = {};
};

struct Rates {
  double chunks = 0;
  double objects = 0;
};

const ObMemAttr LABELS[] = {{OB_SERVER_TENANT_ID, "SqlPlan"},
                            {OB_SERVER_TENANT_ID, "RowCache"},
                            {OB_SERVER_TENANT_ID, "SortBuffer", WORK_AREA}};

// Object traffic beside the chunks: mostly small, some up to 64 KiB.
int64_t object_size(std::mt19937& rng, int* label) {
  const unsigned r = rng() % 16;
  *label = r < 10 ? 0 : r < 15 ? 1 : 2;
  if (*label == 0) return 16 + rng() % 240;
  if (*label == 1) return 64 + rng() % 960;
  return 1024 + rng() % (63 * 1024);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void touch(AChunk* chunk, int64_t size) {
  volatile char* p = static_cast<char*>(chunk->data());
  for (int64_t off = 0; off < size; off += ACHUNK_PAGE_SIZE) p[off] = 1;
}

// One burst thread: keeps up to 64 MiB of chunks live, freeing the oldest to make room,
// and up to 2048 objects, with 16 object pairs per chunk operation.
int64_t burst_thread(AChunkMgr& mgr, ObMallocAllocator& objs, double seconds, unsigned seed,
                     int64_t* obj_ops) {
  constexpr int64_t LIVE_CAP = 64 * MB;
  constexpr size_t LIVE_OBJECTS = 2048;
  std::mt19937 rng(seed);
  std::vector<AChunk*> live;
  std::vector<void*> objects(LIVE_OBJECTS, nullptr);
  int64_t live_bytes = 0;
  int64_t ops = 0;
  size_t oldest = 0;
  size_t next_obj = 0;
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
    for (int k = 0; k < 16; ++k, ++*obj_ops) {
      int label = 0;
      const int64_t osize = object_size(rng, &label);
      void*& slot = objects[next_obj++ % LIVE_OBJECTS];
      ObMallocAllocator::free(slot);
      slot = objs.alloc(osize, LABELS[label]);
      if (slot == nullptr) {
        std::fprintf(stderr, "burst: ob_malloc failed\n");
        std::exit(1);
      }
      static_cast<char*>(slot)[0] = 1;
    }
  }
  for (size_t i = oldest; i < live.size(); ++i) mgr.free_chunk(live[i]);
  for (void* p : objects) ObMallocAllocator::free(p);
  return ops;
}

bool read_full(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_full(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = write(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

Rates burst_round(AChunkMgr& mgr, ObMallocAllocator& objs, double seconds) {
  std::atomic<int64_t> ops{0};
  int64_t obj_ops[2] = {0, 0};
  const auto start = std::chrono::steady_clock::now();
  std::thread a([&] { ops += burst_thread(mgr, objs, seconds, 1, &obj_ops[0]); });
  std::thread b([&] { ops += burst_thread(mgr, objs, seconds, 2, &obj_ops[1]); });
  a.join();
  b.join();
  const double elapsed = seconds_since(start);
  return Rates{static_cast<double>(ops.load()) / elapsed,
               static_cast<double>(obj_ops[0] + obj_ops[1]) / elapsed};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The child: 'R' once its stats region exists, one burst round per 'B' from the parent
// (answering its ops/s), then after the last round the quiet phase, then the Result.
void child_main(const Mode& mode, const Timing& t, int cmd_fd, int out_fd) {
  LinuxOs os;
  MonotonicClock clock;
  AChunkMgr mgr(os, clock);
  mgr.set_max_chunk_cache_size(mode.cache_size, true);
  mgr.set_chunk_cache_ttl_ms(mode.evict ? t.ttl_ms : -1);
  static ObMallocAllocator objs(mgr);  // ~3 MB of directory: not on the stack
  BurstStatsHost host(mgr, objs, mode.cache_size, mode.evict ? t.ttl_ms : -1);
  StatsRegion region(os, mgr, host);
  mgr.set_listener(&region);  // chunk calls refresh it
  region.tick(clock.now_us(), false);
  if (!write_full(out_fd, "R", 1)) _exit(1);

  static Result r;
  std::vector<double> chunk_rates;
  std::vector<double> obj_rates;
  char cmd = 0;
  for (int round = 0; round <= t.rounds; ++round) {
    if (!read_full(cmd_fd, &cmd, 1) || cmd != 'B') _exit(1);
    const Rates rate = burst_round(mgr, objs, t.round_s);
    region.tick(clock.now_us(), false);  // the round's end state, while the child waits
    if (round > 0) {
      chunk_rates.push_back(rate.chunks);
      obj_rates.push_back(rate.objects);
    }
    if (!write_full(out_fd, &rate, sizeof(rate))) _exit(1);
  }
  r.ops_per_s = median(chunk_rates);
  r.obj_ops_per_s = median(obj_rates);
  r.rss_burst_end = os.memory_info().resident_size;
  // Sessions stay connected through the quiet phase: their state stays live.
  std::vector<void*> sessions;
  for (int i = 0; i < 2000; ++i) {
    sessions.push_back(objs.alloc(1000, ObMemAttr(OB_SERVER_TENANT_ID, "SessionState")));
  }

  const auto quiet_start = std::chrono::steady_clock::now();
  const auto step = std::chrono::duration<double>(t.quiet_interval_s);
  const int wash_every = std::max(1, static_cast<int>(1.0 / t.quiet_interval_s));
  for (int i = 1; seconds_since(quiet_start) < t.quiet_s; ++i) {
    AChunk* c = mgr.alloc_chunk(ACHUNK_SIZE);
    touch(c, ACHUNK_SIZE);
    mgr.free_chunk(c);
    if (i % wash_every == 0 && objs.span_idle_us() >= 0) objs.wash_stale_spans(objs.span_idle_us());
    std::this_thread::sleep_until(quiet_start + i * step);
  }
  r.rss_quiet_end = os.memory_info().resident_size;
  const ChunkMgrStats s = mgr.get_stats(false);
  r.maps = s.total_maps;
  r.unmaps = s.total_unmaps;
  r.expired_unmaps = s.expired_unmaps;
  mgr.print(r.dump, sizeof(r.dump));
  objs.print_usage(r.usage, sizeof(r.usage));
  _exit(write_full(out_fd, &r, sizeof(r)) ? 0 : 1);
}

struct Child {
  pid_t pid = -1;
  int cmd_fd = -1;
  int out_fd = -1;
};

bool start_child(const Mode& mode, const Timing& t, Child* child) {
  int cmd[2];
  int out[2];
  if (pipe(cmd) != 0 || pipe(out) != 0) return false;
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(cmd[1]);
    close(out[0]);
    child_main(mode, t, cmd[0], out[1]);
  }
  close(cmd[0]);
  close(out[1]);
  *child = Child{pid, cmd[1], out[0]};
  char ready = 0;
  return read_full(out[0], &ready, 1) && ready == 'R';
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int main_impl(int argc, char** argv) {
  Timing t;
  const char* record_dir = nullptr;
  const char* dump_tool = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      // Every duration, the TTL included, scaled down 10x: same shape, about 8 s.
      t = Timing{3, 0.3, 4.5, 0.01, 3000};
    } else if (std::strcmp(argv[i], "--record") == 0 && i + 1 < argc) {
      record_dir = argv[++i];
    } else if (std::strcmp(argv[i], "--dump-tool") == 0 && i + 1 < argc) {
      dump_tool = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--record DIR --dump-tool PATH]\n", argv[0]);
      return 2;
    }
  }
  if ((record_dir == nullptr) != (dump_tool == nullptr)) {
    std::fprintf(stderr, "--record DIR and --dump-tool PATH go together\n");
    return 2;
  }
  std::printf(
      "burst: 1 warm-up + %d timed rounds x %.1f s per setting (2 threads, 2-8 MiB chunks, every "
      "page "
      "touched, <= 128 MiB live); quiet: %.1f s (one 2 MiB alloc+free every %.0f ms); "
      "ttl %lld ms%s\n",
      t.rounds, t.round_s, t.quiet_s, t.quiet_interval_s * 1000, static_cast<long long>(t.ttl_ms),
      t.ttl_ms != 30000 ? "\n[--quick: every time above is scaled down 10x]" : "");
  Child children[MODE_COUNT];
  for (int i = 0; i < MODE_COUNT; ++i) {
    if (!start_child(MODES[i], t, &children[i])) {
      std::fprintf(stderr, "could not start the child for (%c)\n", MODES[i].id);
      return 1;
    }
  }
  // The watchers start together: their elapsed seconds share this origin.
  TimelineSeries series[MODE_COUNT];
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; record_dir != nullptr && i < MODE_COUNT; ++i) {
    series[i] = TimelineSeries{MODES[i].id, MODES[i].name, -1, -1, -1, MODES[i].evict};
    series[i].watcher = start_watcher(dump_tool, record_dir, MODES[i].id, children[i].pid);
    if (series[i].watcher < 0) {
      std::fprintf(stderr, "could not start %s for (%c)\n", dump_tool, MODES[i].id);
      return 1;
    }
  }
  for (int round = 0; round <= t.rounds; ++round) {
    for (int i : ROUND_ORDER) {
      Rates rate;
      const double now_s = seconds_between(t0, std::chrono::steady_clock::now());
      if (round == 0) series[i].burst_start_s = now_s;
      if (!write_full(children[i].cmd_fd, "B", 1) ||
          !read_full(children[i].out_fd, &rate, sizeof(rate))) {
        std::fprintf(stderr, "child (%c) failed in round %d\n", MODES[i].id, round);
        return 1;
      }
      std::printf("%s %d (%c) %s: %.0f chunk ops/s, %.0f object pairs/s\n",
                  round == 0 ? "warm-up" : "round", round, MODES[i].id, MODES[i].name, rate.chunks,
                  rate.objects);
      std::fflush(stdout);
      // A child's quiet phase starts once it has answered its last round.
      if (round == t.rounds) {
        series[i].quiet_start_s = seconds_between(t0, std::chrono::steady_clock::now());
      }
    }
  }

  static Result results[MODE_COUNT];
  for (int i = 0; i < MODE_COUNT; ++i) {
    int status = 0;
    const bool ok = read_full(children[i].out_fd, &results[i], sizeof(Result));
    waitpid(children[i].pid, &status, 0);
    stop_watcher(series[i].watcher);
    if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "child (%c) failed in the quiet phase\n", MODES[i].id);
      return 1;
    }
    std::printf("--- (%c) %s: dump at quiet end ---\n%s%s", MODES[i].id, MODES[i].name,
                results[i].dump, results[i].usage);
  }
  std::printf(
      "\n| run | setting | burst chunk ops/s (median) | burst object pairs/s (median) | "
      "RSS burst end MiB | RSS quiet end MiB | maps | unmaps | expired_unmaps |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < MODE_COUNT; ++i) {
    const Result& r = results[i];
    std::printf("| (%c) | %s | %.0f | %.0f | %.1f | %.1f | %lld | %lld | %lld |\n", MODES[i].id,
                MODES[i].name, r.ops_per_s, r.obj_ops_per_s,
                static_cast<double>(r.rss_burst_end) / MB,
                static_cast<double>(r.rss_quiet_end) / MB, static_cast<long long>(r.maps),
                static_cast<long long>(r.unmaps), static_cast<long long>(r.expired_unmaps));
  }
  if (record_dir != nullptr && !write_timeline(record_dir, series, MODE_COUNT, t.ttl_ms)) return 1;
  const double speed = results[2].ops_per_s / results[0].ops_per_s;
  const double rss_gap =
      static_cast<double>(results[2].rss_quiet_end - results[1].rss_quiet_end) / MB;
  std::printf(
      "\n(c)/(a) burst ops/s = %.3f (goal >= 0.98); (c) - (b) quiet-end RSS = %.1f MiB "
      "(goal <= 8): %s\n",
      speed, rss_gap, speed >= 0.98 && rss_gap <= 8.0 ? "GOAL MET" : "GOAL MISSED");
  return 0;
}

}  // namespace
}  // namespace achunk

int main(int argc, char** argv) {
  return achunk::main_impl(argc, argv);
}
