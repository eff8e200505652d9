// The workload matrix: one allocation pattern per run, through the malloc family (and, for
// newdel, C++'s operator new and delete), so the same binary measures any allocator
// preloaded under it (LD_PRELOAD). Prints
// "<pattern> <elapsed ms> <checksum>"; bench/workloads/run.sh adds peak RSS and compares.
// Usage: achunk_workloads PATTERN [scale]   (scale multiplies the work, default 1)
#include <malloc.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

double g_scale = 1.0;
std::atomic<uint64_t> g_sum{0};  // keeps the work observable

int64_t scaled(int64_t n) {
  return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n) * g_scale));
}

void touch(void* p, size_t size) {
  static_cast<char*>(p)[0] = 1;
  static_cast<char*>(p)[size - 1] = 2;
}

// The compiler must assume p's bytes are read: stores right before a free stay.
void keep(void* p) {
  asm volatile("" : : "r"(p) : "memory");
}

// Same-thread pairs: each size class 16 B-4 KiB, a short burst taken by `take(size)` then
// given back by `give(p, size)`.
template <typename Take, typename Give>
void pairs_of(Take take, Give give) {
  uint64_t sum = 0;
  void* held[8];
  for (int64_t round = 0; round < scaled(100'000); ++round) {
    for (size_t size = 16; size <= 4096; size *= 2) {
      for (void*& p : held) {
        p = take(size);
        touch(p, size);
      }
      for (void* p : held) {
        sum += reinterpret_cast<uintptr_t>(p) & 0xF0;
        give(p, size);
      }
    }
  }
  g_sum += sum;
}

void pairs() {
  pairs_of([](size_t size) { return malloc(size); }, [](void* p, size_t) { free(p); });
}

// The same through operator new and the sized delete a C++14 compiler emits for a class
// type, where a C++ server allocates most of its objects.
void newdel() {
  pairs_of([](size_t size) { return ::operator new(size); },
           [](void* p, size_t size) { ::operator delete(p, size); });
}

// Lone objects across the size classes: one object of each size from 16 B to 64 KiB
// (steps of a quarter) allocated, touched and freed in turn, as a thread handling values
// of many sizes does.
void classes() {
  uint64_t sum = 0;
  std::vector<size_t> sizes;
  for (size_t s = 16; s <= 65536 - 64; s += std::max<size_t>(16, s / 4)) sizes.push_back(s);
  for (int64_t round = 0; round < scaled(100'000); ++round) {
    for (size_t size : sizes) {
      void* p = malloc(size);
      touch(p, size);
      sum += reinterpret_cast<uintptr_t>(p) & 0xF0;
      free(p);
    }
  }
  g_sum += sum;
}

// Random replacement: `threads` threads each keep 500k/threads objects of 8 B-1 KiB and
// replace a random one at each step.
void replace(int threads) {
  auto work = [threads](int seed) {
    std::mt19937 rng(seed);
    const size_t live = 500'000 / threads;
    std::vector<void*> slots(live);
    auto size = [&] { return static_cast<size_t>(8 + rng() % 1017); };
    for (void*& p : slots) {
      const size_t s = size();
      p = malloc(s);
      touch(p, s);
    }
    for (int64_t step = 0; step < scaled(2'000'000) / threads; ++step) {
      void*& p = slots[rng() % live];
      free(p);
      const size_t s = size();
      p = malloc(s);
      touch(p, s);
    }
    for (void* p : slots) free(p);
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(work, t + 1);
  for (auto& t : ts) t.join();
}

// Values of a key-value cache as C++ keeps them: 200k std::string values of 10-210
// characters, each step assigning a fresh one to a random slot (operator new and the
// sized delete through std::string's allocator, on a live set far larger than the caches).
void strings() {
  std::mt19937 rng(29);
  std::vector<std::string> values(200'000);
  for (std::string& v : values) v.assign(10 + rng() % 201, 'v');
  uint64_t sum = 0;
  for (int64_t step = 0; step < scaled(4'000'000); ++step) {
    std::string& v = values[rng() % values.size()];
    v = std::string(10 + rng() % 201, static_cast<char>('a' + step % 26));
    sum += static_cast<unsigned char>(v[0]);
  }
  g_sum += sum;
}

// Memory accounting as Redis does it: a live set of 10k objects of 16-512 B, a random
// one replaced at each step, malloc_usable_size asked after each malloc and before each
// free (the bytes counted as used).
void usable() {
  std::mt19937 rng(23);
  std::vector<void*> live(10'000, nullptr);
  uint64_t used = 0;
  for (int64_t step = 0; step < scaled(4'000'000); ++step) {
    void*& p = live[rng() % live.size()];
    if (p != nullptr) used -= malloc_usable_size(p);
    free(p);
    const size_t size = 16 + rng() % 497;
    p = malloc(size);
    touch(p, size);
    used += malloc_usable_size(p);
  }
  for (void* p : live) free(p);
  g_sum += used;
}

// Batches of pointers handed between threads under a mutex (the hand-off is not what is
// measured, so it is amortised over 256 objects).
struct Mailbox {
  std::mutex mu;
  std::deque<std::vector<void*>> batches;
  void put(std::vector<void*>&& b) {
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(std::move(b));
  }
  // The oldest batch, if more than `keep` are queued.
  bool take(std::vector<void*>* out, size_t keep = 0) {
    std::lock_guard<std::mutex> lock(mu);
    if (batches.size() <= keep) return false;
    *out = std::move(batches.front());
    batches.pop_front();
    return true;
  }
  size_t queued() {
    std::lock_guard<std::mutex> lock(mu);
    return batches.size();
  }
};

// One producer allocates small objects; two consumers free them. The pipeline has a fixed
// depth: consumers take a batch only while more than PIPELINE_DEPTH are queued, and the
// producer waits while more than PIPELINE_DEPTH + 2 are. So every allocator runs with the
// same objects in flight, and peak RSS compares what each holds, not how far its
// producer got ahead of the consumers.
constexpr size_t PIPELINE_DEPTH = 32;

void prodcons() {
  Mailbox box;
  std::atomic<bool> done{false};
  auto consumer = [&] {
    std::vector<void*> batch;
    while (true) {
      const bool last = done.load();
      if (box.take(&batch, last ? 0 : PIPELINE_DEPTH)) {
        for (void* p : batch) free(p);
      } else if (last) {
        return;
      } else {
        std::this_thread::yield();
      }
    }
  };
  std::thread c1(consumer), c2(consumer);
  std::mt19937 rng(7);
  for (int64_t b = 0; b < scaled(12'000); ++b) {
    std::vector<void*> batch(256);
    for (void*& p : batch) {
      const size_t s = 16 + rng() % 241;
      p = malloc(s);
      touch(p, s);
    }
    box.put(std::move(batch));
    while (box.queued() > PIPELINE_DEPTH + 2) std::this_thread::yield();
  }
  done = true;
  c1.join();
  c2.join();
}

// Server style: 4 workers allocate requests, hand them to other workers, free what they
// receive; each worker retires after a while and a new thread takes its place.
void server() {
  constexpr int WORKERS = 4;
  Mailbox boxes[WORKERS];
  const int64_t generations = scaled(40);
  auto worker = [&](int id, int seed) {
    std::mt19937 rng(seed);
    std::vector<void*> out[WORKERS];
    std::vector<void*> in;
    for (int op = 0; op < 20'000; ++op) {
      const size_t s = rng() % 8 == 0 ? 1024 + rng() % 7168 : 16 + rng() % 496;
      void* p = malloc(s);
      touch(p, s);
      const int to = static_cast<int>(rng() % WORKERS);
      out[to].push_back(p);
      if (out[to].size() == 64) {
        boxes[to].put(std::move(out[to]));
        out[to].clear();
      }
      if (op % 64 == 0 && boxes[id].take(&in)) {
        for (void* q : in) free(q);
      }
    }
    for (int to = 0; to < WORKERS; ++to) {
      if (!out[to].empty()) boxes[to].put(std::move(out[to]));
    }
  };
  for (int64_t g = 0; g < generations; ++g) {
    std::vector<std::thread> ts;
    for (int w = 0; w < WORKERS; ++w) ts.emplace_back(worker, w, static_cast<int>(g * 10 + w));
    for (auto& t : ts) t.join();
  }
  std::vector<void*> in;
  for (auto& box : boxes) {
    while (box.take(&in)) {
      for (void* q : in) free(q);
    }
  }
}

// A thread inherits the live set of a thread that has just exited: 5,000 objects of
// 8 B-1 KiB, all allocated by its predecessor. It frees a random one and allocates a new
// one, step after step, then hands the set on to a fresh thread; two such lanes at once.
// Every free of an inherited object lands on a slab its owner left behind.
void inherit() {
  constexpr size_t LIVE = 5000;
  constexpr int STEPS = 20'000;
  auto lane = [](uint32_t seed) {
    std::vector<void*> set(LIVE);
    std::thread([&] {
      std::mt19937 rng(seed);
      for (void*& p : set) {
        const size_t s = 8 + rng() % 1017;
        p = malloc(s);
        touch(p, s);
      }
    }).join();
    for (int64_t g = 0; g < scaled(400); ++g) {
      std::thread([&, g] {
        std::mt19937 rng(seed + static_cast<uint32_t>(g) + 1);
        for (int step = 0; step < STEPS; ++step) {
          void*& p = set[rng() % LIVE];
          free(p);
          const size_t s = 8 + rng() % 1017;
          p = malloc(s);
          touch(p, s);
        }
      }).join();
    }
    for (void* p : set) free(p);
  };
  std::thread a(lane, 11), b(lane, 22);
  a.join();
  b.join();
}

// Four threads in a ring: each allocates objects of 8 B-16 KiB (most small, a size class
// drawn on a log scale) and passes them in batches of 64 to the next, which frees them.
void ring() {
  constexpr int THREADS = 4;
  Mailbox boxes[THREADS];
  std::atomic<int> finished{0};
  const int64_t batches = scaled(60'000);
  auto worker = [&](int id) {
    std::mt19937 rng(static_cast<uint32_t>(id) + 5);
    std::vector<void*> in;
    for (int64_t b = 0; b < batches; ++b) {
      std::vector<void*> out(64);
      for (void*& p : out) {
        const size_t s = size_t{8} << (rng() % 12);  // 8 B .. 16 KiB
        const size_t size = s + rng() % s;
        p = malloc(size > 16384 ? 16384 : size);
        touch(p, size > 16384 ? 16384 : size);
      }
      boxes[(id + 1) % THREADS].put(std::move(out));
      // A bounded ring: a thread frees what it was passed before it runs too far ahead.
      while (boxes[id].take(&in)) {
        for (void* q : in) free(q);
      }
      while (boxes[(id + 1) % THREADS].queued() > 8) {
        if (boxes[id].take(&in)) {
          for (void* q : in) free(q);
        } else {
          std::this_thread::yield();
        }
      }
    }
    // Still the next one's consumer until every thread is done producing.
    ++finished;
    while (finished.load() < THREADS) {
      if (boxes[id].take(&in)) {
        for (void* q : in) free(q);
      } else {
        std::this_thread::yield();
      }
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < THREADS; ++t) ts.emplace_back(worker, t);
  for (auto& t : ts) t.join();
  std::vector<void*> in;
  for (auto& box : boxes) {
    while (box.take(&in)) {
      for (void* q : in) free(q);
    }
  }
}

// Thread churn: short-lived threads allocate and free, then exit.
void churn() {
  for (int64_t g = 0; g < scaled(400); ++g) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([seed = g * 4 + t] {
        std::mt19937 rng(static_cast<uint32_t>(seed));
        std::vector<void*> held;
        for (int i = 0; i < 2000; ++i) {
          const size_t s = 16 + rng() % 1008;
          held.push_back(malloc(s));
          touch(held.back(), s);
          if (rng() % 2 == 0) {
            const size_t i = rng() % held.size();
            free(held[i]);
            held[i] = held.back();
            held.pop_back();
          }
        }
        for (void* p : held) free(p);
      });
    }
    for (auto& t : ts) t.join();
  }
}

// Thread start: threads that allocate nothing, four at a time, started and joined
// through pthreads (no std::thread state on the heap): what an allocator's per-thread
// state costs a thread that never calls it.
void spawn() {
  for (int64_t g = 0; g < scaled(10'000); ++g) {
    pthread_t ts[4];
    for (pthread_t& t : ts) {
      pthread_create(
          &t, nullptr,
          [](void*) -> void* {
            g_sum.fetch_add(1, std::memory_order_relaxed);
            return nullptr;
          },
          nullptr);
    }
    for (pthread_t t : ts) pthread_join(t, nullptr);
  }
}

// Connections: a pool of 200 threads alive at once, each holding 100 objects of 16-515 B
// (a connection's session state), then replaced all together by 200 new ones, round
// after round: what an allocator keeps per thread, and whether the next generation of
// threads reuses it.
void conns() {
  constexpr int THREADS = 200;
  for (int64_t round = 0; round < scaled(40); ++round) {
    std::barrier all_held(THREADS);
    std::vector<std::thread> ts;
    for (int t = 0; t < THREADS; ++t) {
      ts.emplace_back([&all_held, t] {
        void* held[100];
        for (int i = 0; i < 100; ++i) {
          const size_t s = 16 + (i * 37 + t) % 500;
          held[i] = malloc(s);
          touch(held[i], s);
        }
        all_held.arrive_and_wait();
        for (void* p : held) free(p);
      });
    }
    for (auto& t : ts) t.join();
  }
}

// Mid-size buffers: 4 threads each keep 200 buffers of 64-512 KiB (sort and join buffers,
// packets) and replace a random one at each step, writing its first and last byte.
void midsize() {
  auto work = [](int seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<char*> live(200, nullptr);
    for (int64_t step = 0; step < scaled(400'000) / 4; ++step) {
      char*& p = live[rng() % live.size()];
      free(p);
      const size_t size = (64 << 10) + rng() % (448 << 10);
      p = static_cast<char*>(malloc(size));
      p[0] = 1;
      p[size - 1] = 2;
    }
    for (char* p : live) free(p);
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) ts.emplace_back(work, t + 1);
  for (auto& t : ts) t.join();
}

// Mid-size buffers one at a time: a thread takes a buffer of 64 KiB-1 MiB (a query's sort,
// join or read buffer), writes its first and last byte and frees it, over and over.
void midpairs() {
  std::mt19937 rng(19);
  uint64_t sum = 0;
  for (int64_t step = 0; step < scaled(800'000); ++step) {
    const size_t size = (64 << 10) + rng() % (960 << 10);
    char* p = static_cast<char*>(malloc(size));
    touch(p, size);
    sum += reinterpret_cast<uintptr_t>(p) & 0xF0;
    keep(p);
    free(p);
  }
  g_sum += sum;
}

// Zeroed mid-size buffers one at a time: calloc of 64 KiB-1 MiB (a per-query hash table
// or bitmap), a quarter of it written, freed.
void midcalloc() {
  std::mt19937 rng(23);
  uint64_t sum = 0;
  for (int64_t step = 0; step < scaled(80'000); ++step) {
    const size_t size = (64 << 10) + rng() % (960 << 10);
    char* p = static_cast<char*>(calloc(1, size));
    sum += static_cast<uint64_t>(p[size / 2]) + static_cast<uint64_t>(p[size - 1]);
    std::memset(p, static_cast<int>(step), size / 4);
    keep(p);
    free(p);
  }
  g_sum += sum;
}

// Big blocks of 5-25 MiB, up to 8 live, the mix of sizes drifting; every page written.
void big() {
  std::mt19937 rng(11);
  std::vector<std::pair<void*, size_t>> live(8, {nullptr, 0});
  for (int64_t step = 0; step < scaled(600); ++step) {
    auto& [p, size] = live[rng() % live.size()];
    free(p);
    const size_t lo = 5 + static_cast<size_t>(step / 60 % 3) * 5;  // 5-15, 10-20, 15-25 MiB
    size = (lo + rng() % 11) << 20;
    p = malloc(size);
    for (size_t off = 0; off < size; off += 4096) static_cast<char*>(p)[off] = 1;
  }
  for (auto& [p, size] : live) free(p);
}

// A work buffer of 32-96 MiB (a sort or hash-join area, a big packet) taken, every page
// written, and freed, over and over by one thread.
void huge_buffers() {
  std::mt19937 rng(17);
  for (int64_t round = 0; round < scaled(200); ++round) {
    const size_t size = (32 + rng() % 65) << 20;
    char* p = static_cast<char*>(malloc(size));
    for (size_t off = 0; off < size; off += 4096) p[off] = 1;
    g_sum += static_cast<uint64_t>(p[size / 2]);
    free(p);
  }
}

// Realloc growth: 64 buffers each grown by small steps from 16 B to 256 KiB, interleaved.
void realloc_growth() {
  for (int64_t round = 0; round < scaled(20); ++round) {
    std::vector<std::pair<void*, size_t>> bufs(64, {nullptr, 0});
    for (size_t target = 16; target <= (size_t{256} << 10); target += target / 8 + 16) {
      for (auto& [p, size] : bufs) {
        p = realloc(p, target);
        static_cast<char*>(p)[target - 1] = 1;
        size = target;
      }
    }
    for (auto& [p, size] : bufs) free(p);
  }
}

// Big buffers grown by realloc: 4 buffers, each grown by an eighth at a time from 1 MiB
// to 128 MiB with every new page written, interleaved (a result set or a blob assembled
// in memory), then freed.
void realloc_big() {
  for (int64_t round = 0; round < scaled(8); ++round) {
    std::vector<std::pair<char*, size_t>> bufs(4, {nullptr, 0});
    for (size_t target = size_t{1} << 20; target <= (size_t{128} << 20); target += target / 8) {
      for (auto& [p, size] : bufs) {
        p = static_cast<char*>(realloc(p, target));
        for (size_t off = size; off < target; off += 4096) p[off] = 1;
        g_sum += static_cast<uint64_t>(p[size / 2]);
        size = target;
      }
    }
    for (auto& [p, size] : bufs) free(p);
  }
}

// A connection's packet buffer, as MariaDB's net layer keeps it: 16 KiB, grown by realloc
// to a big result (1-8 MiB) with every page written, then shrunk back to 16 KiB at the
// end of the command, request after request.
void packet_buffer() {
  std::mt19937 rng(29);
  const size_t small = size_t{16} << 10;
  char* p = static_cast<char*>(malloc(small));
  for (int64_t request = 0; request < scaled(400); ++request) {
    const size_t size = (size_t{1} << 20) << (rng() % 4);
    p = static_cast<char*>(realloc(p, size));
    for (size_t off = 0; off < size; off += 4096) p[off] = static_cast<char>(request);
    g_sum += static_cast<uint64_t>(p[size - 4096]);
    p = static_cast<char*>(realloc(p, small));
  }
  free(p);
}

// Buffers built in a generous one and shrunk to fit (a row or a string assembled before
// its length is known, then kept): 200,000 live, each step replacing one by a fresh 4 KiB
// buffer filled with 16-1,000 bytes and shrunk to them by realloc.
void shrink_to_fit() {
  std::mt19937 rng(37);
  std::vector<char*> slots(static_cast<size_t>(scaled(200'000)), nullptr);
  uint64_t sum = 0;
  for (int64_t step = 0; step < scaled(1'000'000); ++step) {
    const size_t i = rng() % slots.size();
    free(slots[i]);
    char* p = static_cast<char*>(malloc(4096));
    const size_t n = 16 + rng() % 985;
    std::memset(p, static_cast<int>(step), n);
    slots[i] = static_cast<char*>(realloc(p, n));
    sum += static_cast<uint64_t>(slots[i][n - 1]);
  }
  for (char* p : slots) free(p);
  g_sum += sum;
}

// calloc of big zeroed blocks (1-16 MiB), a few bytes read and written.
void calloc_big() {
  std::mt19937 rng(13);
  uint64_t sum = 0;
  for (int64_t i = 0; i < scaled(2000); ++i) {
    const size_t size = (1 + rng() % 16) << 20;
    char* p = static_cast<char*>(calloc(1, size));
    sum += static_cast<uint64_t>(p[size / 2]) + static_cast<uint64_t>(p[size - 1]);
    p[0] = 1;
    free(p);
  }
  g_sum += sum;
}

// Aligned allocations: a live set of 50k objects, each step replacing a random one. Most
// are 16 B-1 KiB aligned to a cache line (C++ alignas(64) types), one in eight a 4-16 KiB
// buffer aligned to a page (direct I/O buffers, InnoDB's memalign'ed pages).
void aligned() {
  std::mt19937 rng(19);
  const size_t live = 50'000;
  std::vector<void*> slots(live, nullptr);
  auto fill = [&](void*& p) {
    const bool page = rng() % 8 == 0;
    const size_t align = page ? 4096 : 64;
    const size_t size = page ? 4096 * (1 + rng() % 4) : 16 + rng() % 1009;
    if (posix_memalign(&p, align, size) != 0) std::abort();
    touch(p, size);
  };
  for (void*& p : slots) fill(p);
  for (int64_t step = 0; step < scaled(2'000'000); ++step) {
    void*& p = slots[rng() % live];
    free(p);
    fill(p);
  }
  for (void* p : slots) free(p);
}

// One thread keeps `count` buffers and replaces a random one at each step by one of
// size_of(rng) bytes aligned to align_of(rng) (posix_memalign), writing its first and
// last byte.
template <typename Align, typename Size>
void replace_aligned(uint32_t seed, size_t count, int64_t steps, Align align_of, Size size_of) {
  std::mt19937 rng(seed);
  std::vector<char*> live(count, nullptr);
  for (int64_t step = 0; step < steps; ++step) {
    char*& p = live[rng() % live.size()];
    free(p);
    const size_t align = align_of(rng);
    const size_t size = size_of(rng);
    void* q = nullptr;
    if (posix_memalign(&q, align, size) != 0) std::abort();
    p = static_cast<char*>(q);
    p[0] = 1;
    p[size - 1] = 2;
  }
  for (char* p : live) free(p);
}

// Big aligned buffers: one thread keeps 2,000 buffers of 64 KiB-1 MiB, each aligned to a
// power of two from 8 KiB to 1 MiB (direct I/O and huge-page-minded buffers), replacing a
// random one at each step and writing its first and last byte.
void bigalign() {
  replace_aligned(
      23, 2'000, scaled(200'000), [](std::mt19937& rng) { return size_t{8192} << (rng() % 8); },
      [](std::mt19937& rng) { return size_t{64 << 10} + rng() % (960 << 10); });
}

// Small buffers grown by appends: two threads each grow 100 buffers by 16-215 bytes at a
// time, 200 appends each (to 3-43 KiB), then free them and start again, as C code
// building strings or arrays with realloc does.
void appends() {
  auto work = [](int seed) {
    std::mt19937 rng(seed);
    for (int64_t round = 0; round < scaled(200); ++round) {
      std::vector<char*> bufs(100, nullptr);
      std::vector<size_t> lens(100, 0);
      for (int step = 0; step < 200; ++step) {
        for (size_t i = 0; i < bufs.size(); ++i) {
          const size_t add = 16 + rng() % 200;
          char* grown = static_cast<char*>(realloc(bufs[i], lens[i] + add));
          if (grown == nullptr) std::abort();
          std::memset(grown + lens[i], 1, add);
          bufs[i] = grown;
          lens[i] += add;
        }
      }
      for (char* b : bufs) free(b);
    }
  };
  std::thread a(work, 1), b(work, 2);
  a.join();
  b.join();
}

// Buffers aligned to megabytes: one thread keeps 16 buffers of 1-4 MiB, each aligned to a
// power of two from 2 to 64 MiB (huge-page and arena-minded buffers), replacing a random
// one at each step and writing its first and last byte.
void hugealign() {
  replace_aligned(
      31, 16, scaled(8'000), [](std::mt19937& rng) { return (size_t{2} << 20) << (rng() % 6); },
      [](std::mt19937& rng) { return (size_t{1} << 20) + rng() % (size_t{3} << 20); });
}

struct Pattern {
  const char* name;
  void (*run)();
};
const Pattern PATTERNS[] = {
    {"pairs", pairs},
    {"newdel", newdel},
    {"classes", classes},
    {"replace1", [] { replace(1); }},
    {"replace2", [] { replace(2); }},
    {"strings", strings},
    {"usable", usable},
    {"prodcons", prodcons},
    {"server", server},
    {"inherit", inherit},
    {"ring", ring},
    {"churn", churn},
    {"spawn", spawn},
    {"conns", conns},
    {"midsize", midsize},
    {"midpairs", midpairs},
    {"midcalloc", midcalloc},
    {"big", big},
    {"huge", huge_buffers},
    {"realloc", realloc_growth},
    {"bigrealloc", realloc_big},
    {"pktbuf", packet_buffer},
    {"shrink", shrink_to_fit},
    {"calloc", calloc_big},
    {"aligned", aligned},
    {"bigalign", bigalign},
    {"hugealign", hugealign},
    {"appends", appends},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATTERN [scale]\npatterns:", argv[0]);
    for (const Pattern& p : PATTERNS) std::fprintf(stderr, " %s", p.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  if (argc > 2) g_scale = std::atof(argv[2]);
  for (const Pattern& p : PATTERNS) {
    if (std::strcmp(argv[1], p.name) != 0) continue;
    const auto start = std::chrono::steady_clock::now();
    p.run();
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    std::printf("%s %.1f %llu\n", p.name, ms.count(),
                static_cast<unsigned long long>(g_sum.load()));
    return 0;
  }
  std::fprintf(stderr, "achunk_workloads: unknown pattern '%s'\n", argv[1]);
  return 2;
}
