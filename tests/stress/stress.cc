// Stress program: worker threads allocate mixed sizes (small classes, spans, big chunks,
// aligned), hand objects to each other for cross-thread frees, grow and shrink realloc
// chains (doubling, halving and steps of an eighth), exit and are replaced (thread
// churn), while the main thread forks in the middle (the child allocates, verifies and
// exits 0). Every byte written carries a per-object pattern that
// is checked before the free. Built twice: on plain malloc (run under LD_PRELOAD of
// libachunk_malloc.so) and with ACHUNK_STRESS_DIRECT on the achunk_* C API (sanitizer
// builds). Usage: stress [seconds]; prints "stress ok" on success.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#ifdef ACHUNK_STRESS_DIRECT
#include "achunk/achunk.h"
#define S_MALLOC achunk_malloc
#define S_FREE achunk_free
#define S_REALLOC achunk_realloc
#define S_POSIX_MEMALIGN achunk_posix_memalign
#define S_USABLE achunk_malloc_usable_size
#else
#include <malloc.h>
#define S_MALLOC malloc
#define S_FREE free
#define S_REALLOC realloc
#define S_POSIX_MEMALIGN posix_memalign
#define S_USABLE malloc_usable_size
#endif

namespace {

constexpr int WORKERS = 6;
constexpr int QUEUES = WORKERS;
constexpr int OPS_PER_THREAD = 1500;  // then the thread exits and a new one starts

struct Obj {
  uint8_t* p;
  size_t size;
  uint32_t seed;
};

uint8_t pattern(uint32_t seed, size_t i) {
  return static_cast<uint8_t>(seed * 2654435761u + i * 131 + (i >> 9));
}

void fail(const char* what, const Obj& o, size_t at) {
  std::fprintf(stderr, "stress: %s: object %p size %zu byte %zu\n", what, static_cast<void*>(o.p),
               o.size, at);
  std::abort();
}

void fill(const Obj& o, size_t from) {
  for (size_t i = from; i < o.size; ++i) o.p[i] = pattern(o.seed, i);
}

void verify(const Obj& o, size_t upto) {
  if (S_USABLE(o.p) < o.size) fail("usable size below the size asked", o, 0);
  for (size_t i = 0; i < upto; ++i) {
    if (o.p[i] != pattern(o.seed, i)) fail("pattern overwritten", o, i);
  }
}

void release(const Obj& o) {
  verify(o, o.size);
  S_FREE(o.p);
}

size_t pick_size(std::mt19937& rng) {
  const uint32_t k = rng() % 100;
  if (k < 70) return 1 + rng() % 1024;
  if (k < 97) return 1 + rng() % (128 << 10);
  return (1 << 20) + rng() % (3 << 20);
}

Obj make(std::mt19937& rng, uint32_t seed) {
  Obj o{nullptr, pick_size(rng), seed};
  if (rng() % 8 == 0) {
    const size_t align = size_t{16} << (rng() % 13);  // 16 B - 64 KiB
    void* p = nullptr;
    if (S_POSIX_MEMALIGN(&p, align, o.size) != 0 || reinterpret_cast<uintptr_t>(p) % align != 0) {
      std::fprintf(stderr, "stress: posix_memalign(%zu, %zu) failed\n", align, o.size);
      std::abort();
    }
    o.p = static_cast<uint8_t*>(p);
  } else {
    o.p = static_cast<uint8_t*>(S_MALLOC(o.size));
  }
  if (o.p == nullptr) {
    std::fprintf(stderr, "stress: allocation of %zu bytes failed\n", o.size);
    std::abort();
  }
  fill(o, 0);
  return o;
}

// Hand-off queues: a worker pushes into a random queue and frees what it pops.
struct Queue {
  std::mutex mu;
  std::vector<Obj> items;
};
Queue queues[QUEUES];
std::atomic<uint64_t> ops{0};
std::atomic<uint64_t> threads_run{0};
std::atomic<bool> stop{false};

void realloc_chain(std::mt19937& rng, uint32_t seed) {
  Obj o = make(rng, seed);
  for (int step = 0; step < 6; ++step) {
    // An eighth more grows in place, down into a free span before it, or moves.
    const uint32_t k = rng() % 3;
    size_t n = k == 0   ? o.size + o.size / 8 + 16
               : k == 1 ? o.size * 2 + rng() % 4096
                        : 1 + o.size / 2;
    if (n > (8 << 20)) n = 1 + o.size / 2;
    const size_t keep = n < o.size ? n : o.size;
    verify(o, o.size);
    auto* q = static_cast<uint8_t*>(S_REALLOC(o.p, n));
    if (q == nullptr) {
      std::fprintf(stderr, "stress: realloc to %zu failed\n", n);
      std::abort();
    }
    o.p = q;
    o.size = n;
    verify(o, keep);  // the old bytes moved with it
    fill(o, keep);
  }
  release(o);
}

void worker(uint32_t id) {
  std::mt19937 rng(id * 7919u + 1);
  std::vector<Obj> own;
  int i = 0;
  for (; i < OPS_PER_THREAD && !stop.load(std::memory_order_relaxed); ++i) {
    const uint32_t k = rng() % 100;
    const uint32_t seed = id * OPS_PER_THREAD + static_cast<uint32_t>(i);
    if (k < 40) {
      own.push_back(make(rng, seed));
    } else if (k < 65 && !own.empty()) {
      const size_t at = rng() % own.size();
      release(own[at]);
      own[at] = own.back();
      own.pop_back();
    } else if (k < 80) {
      Queue& q = queues[rng() % QUEUES];
      const Obj o = make(rng, seed);
      std::lock_guard<std::mutex> lock(q.mu);
      q.items.push_back(o);
    } else if (k < 95) {
      Queue& q = queues[rng() % QUEUES];
      Obj o{};
      {
        std::lock_guard<std::mutex> lock(q.mu);
        if (q.items.empty()) continue;
        o = q.items.back();
        q.items.pop_back();
      }
      release(o);  // most likely allocated by another, perhaps exited, thread
    } else {
      realloc_chain(rng, seed);
    }
    // Keep the footprint bounded: big objects dominate it.
    while (own.size() > 64) {
      release(own.back());
      own.pop_back();
    }
  }
  for (const Obj& o : own) release(o);
  ops.fetch_add(static_cast<uint64_t>(i), std::memory_order_relaxed);
  threads_run.fetch_add(1, std::memory_order_relaxed);
}

// In the forked child: no threads, just allocate, verify, free.
int child_work() {
  std::mt19937 rng(4242);
  Obj objs[200];
  for (int i = 0; i < 200; ++i) objs[i] = make(rng, 900000u + static_cast<uint32_t>(i));
  for (int i = 0; i < 200; ++i) release(objs[i]);
  realloc_chain(rng, 999999);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  const auto fork_at = start + std::chrono::duration<double>(seconds / 2);
  bool forked = false;
  uint32_t next_id = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < WORKERS; ++i) threads.emplace_back(worker, next_id++);
  while (std::chrono::steady_clock::now() < deadline || !forked) {
    // Churn: join the oldest worker and start a new one in its place.
    threads.front().join();
    threads.erase(threads.begin());
    threads.emplace_back(worker, next_id++);
    if (!forked && std::chrono::steady_clock::now() >= fork_at) {
      forked = true;
      const pid_t pid = fork();  // other workers are allocating right now
      if (pid < 0) {
        std::perror("stress: fork");
        return 1;
      }
      if (pid == 0) _exit(child_work());
      int status = 0;
      if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "stress: forked child failed (status %d)\n", status);
        return 1;
      }
    }
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  for (Queue& q : queues) {
    for (const Obj& o : q.items) release(o);
    q.items.clear();
  }
  std::printf("stress ok: %llu ops, %llu threads, fork verified\n",
              static_cast<unsigned long long>(ops.load()),
              static_cast<unsigned long long>(threads_run.load()));
  return 0;
}
