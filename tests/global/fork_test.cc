// fork() with the real handlers: the fork-lock registry is complete (a child forked while
// any registry lock, or any operation that takes one, is busy in another thread still
// allocates, prints usage, and creates and destroys a memory context).
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "achunk/achunk.h"
#include "achunk/achunk.hpp"
#include "alloc/object/object_set.h"
#include "context/memory_context.h"
#include "global/child_housekeeping.h"
#include "global/global.h"
#include "global/ob_malloc.h"

namespace achunk {
namespace {

struct Collect final : ForkLockVisitor {
  std::vector<std::pair<SpinLock*, std::string>> locks;
  void visit(SpinLock& lock, const char* name) override { locks.emplace_back(&lock, name); }
};

ContextParam param(const char* label) {
  ContextParam p;
  p.set_mem_attr(OB_SERVER_TENANT_ID, label, DEFAULT_CTX_ID);
  return p;
}

volatile sig_atomic_t g_child_step = 0;

// Ends the process at once: _exit under TSan runs its finaliser, which reports the
// parent's threads and can itself hang in a forked child, so a hang would stay a hang.
[[noreturn]] void exit_now(int status) {
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

// A hang fails the test, naming the step that hung (exit status 100 + step).
void on_alarm(int) {
  exit_now(100 + g_child_step);
}

// What a child must still be able to do; 0 if all of it worked. The bound is wide
// enough for a sanitizer build on a loaded machine, and far below ctest's timeout.
int child_work() {
  signal(SIGALRM, &on_alarm);
  alarm(30);
  static const int64_t sizes[] = {24, 3000, 40000, 1 << 20, 8 << 20};
  for (int64_t n : sizes) {
    g_child_step = g_child_step + 1;
    void* p = ob_malloc(n, ObMemAttr(OB_SERVER_TENANT_ID, "fork_child"));
    if (p == nullptr) return 1;
    std::memset(p, 1, n);
    ob_free(p);
  }
  static char buf[1 << 16];
  g_child_step = 10;
  if (global_malloc_allocator().print_usage(buf, sizeof(buf)) <= 0) return 2;
  g_child_step = 11;
  if (print_chunk_dump(buf, sizeof(buf)) <= 0) return 3;
  g_child_step = 12;
  auto ctx = MemoryContext::root().create_child(param("fork_child_ctx"));
  if (!ctx.ok()) return 4;
  g_child_step = 13;
  void* q = ctx->allocf(100);
  if (q == nullptr || !ctx->free(q).ok() || !ctx->destroy().ok()) return 5;
  g_child_step = 14;
  char err[64];
  if (!set_option("memory_chunk_cache_size", "8M", err, sizeof(err))) return 6;
  // Eviction still runs: with a TTL of 0 a freed chunk leaves the cache at once.
  g_child_step = 15;
  const int64_t expired = global_chunk_mgr().get_expired_unmaps();
  if (!set_option("chunk_cache_ttl_ms", "0", err, sizeof(err))) return 7;
  ob_free(ob_malloc(3 << 20, ObMemAttr(OB_SERVER_TENANT_ID, "fork_child")));
  if (global_chunk_mgr().get_expired_unmaps() == expired) return 8;
  // No lock counts a parent's sleeper: every unlock would make a futex call.
  struct SleeperCheck final : ForkLockVisitor {
    bool any = false;
    void visit(SpinLock& lock, const char*) override { any = any || lock.has_sleepers(); }
  } sleepers;
  visit_fork_locks(sleepers);
  if (sleepers.any) return 9;
  return 0;
}

// Forks, runs child_work() in the child; its exit status (or -1 if it did not exit).
int fork_and_work() {
  const pid_t pid = fork();
  if (pid == 0) exit_now(child_work());
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

class ForkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // No install_fork_handlers(): the wiring registers the handlers at load time, for
    // library users as for the drop-in malloc.
    // An object set and a context exist before the registry is read.
    ob_free(ob_malloc(100, ObMemAttr(OB_SERVER_TENANT_ID, "fork_setup")));
    auto ctx = MemoryContext::root().create_child(param("fork_setup_ctx"));
    ASSERT_TRUE(ctx.ok());
    ASSERT_TRUE(ctx->destroy().ok());
  }
};

TEST_F(ForkTest, RegistryHasEveryLayersLocks) {
  Collect c;
  visit_fork_locks(c);
  std::set<std::string> names;
  for (auto& [lock, name] : c.locks) names.insert(name);
  for (const char* want :
       {"options", "c_api.report", "memory_context.slots", "usage_printer.scratch",
        "malloc_allocator.directory", "label.table", "object_set.registry", "object_set.heaps",
        "object_set.shared", "object_set.ready", "object_mgr.shard", "object_mgr.wash",
        "chunk_mgr.evicting", "chunk_mgr.cap", "thread_state.pool", "chunk_mgr.free_list",
        "memory_context.root_tree", "ob_allocator", "arena"}) {
    EXPECT_EQ(names.count(want), 1u) << want;
  }
  EXPECT_EQ(spin_lock_detail::fork_gate.load(), 0u);  // open outside a fork
}

// Prepare waits for every object set's locks (about a hundred each): a process with every
// tenant and ctx allocator in use still forks, and its child works.
TEST_F(ForkTest, AProcessWithEveryTenantAndCtxInUseForks) {
  for (int t = 0; t < ObMallocAllocator::MAX_TENANTS; ++t) {
    const uint64_t tenant = t == 0 ? OB_SERVER_TENANT_ID : uint64_t{2000} + t;
    for (int ctx_id = 0; ctx_id < MAX_CTX_ID; ++ctx_id) {
      void* p = ob_malloc(100, ObMemAttr(tenant, "fork_many_sets", ctx_id));
      ASSERT_NE(p, nullptr) << tenant << " " << ctx_id;
      ob_free(p);
    }
  }
  Collect c;
  visit_fork_locks(c);
  EXPECT_GT(c.locks.size(), 4096u);  // more than the registry once had room for
  // The registry's room is counted from ObjectSet::FORK_LOCKS: each set visits that many.
  size_t sets = 0;
  size_t per_set = 0;
  for (auto& [lock, name] : c.locks) {
    sets += name == "object_set.heaps";
    per_set += name == "object_set.heaps" || name == "object_set.shared" ||
               name == "object_set.ready" || name.rfind("object_mgr.", 0) == 0;
  }
  EXPECT_EQ(per_set, sets * ObjectSet::FORK_LOCKS);
  EXPECT_EQ(fork_and_work(), 0);
}

#if defined(__SANITIZE_THREAD__)
constexpr bool TSAN = true;
#else
constexpr bool TSAN = false;
#endif

// A fork writes no lock: prepare only reads the registry's locks and the parent handler
// opens the gate, so the parent pays no copy-on-write fault for the pages the locks live
// on (about a dozen per object set; before, every one, at every fork).
TEST_F(ForkTest, AForkWritesNoLockPageInTheParent) {
  if (TSAN) GTEST_SKIP() << "TSan's runtime writes a shadow page for each lock the pass reads";
  for (int t = 0; t < ObMallocAllocator::MAX_TENANTS; ++t) {
    const uint64_t tenant = t == 0 ? OB_SERVER_TENANT_ID : uint64_t{2000} + t;
    for (int ctx_id = 0; ctx_id < MAX_CTX_ID; ++ctx_id) {
      ob_free(ob_malloc(100, ObMemAttr(tenant, "fork_lock_pages", ctx_id)));
    }
  }
  Collect c;
  visit_fork_locks(c);
  std::set<uintptr_t> pages;
  for (auto& [lock, name] : c.locks) pages.insert(reinterpret_cast<uintptr_t>(lock) / 4096);
  ASSERT_GT(pages.size(), 200u);
  constexpr int FORKS = 20;
  rusage before;
  getrusage(RUSAGE_SELF, &before);
  for (int i = 0; i < FORKS; ++i) {
    const pid_t pid = fork();
    if (pid == 0) exit_now(0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }
  rusage after;
  getrusage(RUSAGE_SELF, &after);
  const double faults_per_fork = static_cast<double>(after.ru_minflt - before.ru_minflt) / FORKS;
  EXPECT_LT(faults_per_fork, static_cast<double>(pages.size()) / 4) << pages.size() << " pages";
}

// fork's prepare passes the registry in order, so a lock that may be taken while another is
// held must come after it. The thread-state pool's lock is taken under allocator locks (a
// thread's first allocation in a slow path; the stats region's refresh from a chunk call
// once did): before, prepare held it while waiting for a shard lock whose holder waited
// for it, and fork hung.
TEST_F(ForkTest, ThePoolLockComesAfterEveryAllocatorLock) {
  Collect c;
  visit_fork_locks(c);
  int pool = -1;
  int last_allocator = -1;
  for (size_t i = 0; i < c.locks.size(); ++i) {
    const std::string& name = c.locks[i].second;
    if (name == "thread_state.pool") pool = static_cast<int>(i);
    if (name.rfind("object_set.", 0) == 0 || name.rfind("object_mgr.", 0) == 0 ||
        name.rfind("chunk_mgr.", 0) == 0 || name == "malloc_allocator.directory") {
      last_allocator = static_cast<int>(i);
    }
  }
  ASSERT_GE(pool, 0);
  ASSERT_GE(last_allocator, 0);
  EXPECT_GT(pool, last_allocator);
}

volatile sig_atomic_t g_lock_index = -1;

// For one lock of every kind: another thread holds it until fork's prepare handler waits
// for it, runs `then` still holding it, and lets go; the child must find everything
// usable. g_lock_index is the registry index of the lock being tried. Returns the number
// of kinds tried.
template <typename F>
size_t fork_while_each_lock_is_held(F then) {
  Collect c;
  visit_fork_locks(c);
  std::set<std::string> tried;
  for (size_t i = 0; i < c.locks.size(); ++i) {
    auto& [lock, name] = c.locks[i];
    if (!tried.insert(name).second) continue;
    g_lock_index = static_cast<int>(i);
    std::atomic<bool> holding{false};
    std::atomic<bool> forked{false};
    std::thread holder([&, lock = lock, i] {
      lock->lock();
      holding.store(true);
      while (spin_lock_detail::fork_gate.load() == 0 ||
             fork_locks_passed() != static_cast<int>(i)) {
        sched_yield();
      }
      then();
      lock->unlock();
      // No thread exit while fork runs: a sanitizer's runtime is not fork-safe there.
      while (!forked.load()) sched_yield();
    });
    while (!holding.load()) sched_yield();
    EXPECT_EQ(fork_and_work(), 0) << name;
    forked.store(true);
    holder.join();
    EXPECT_FALSE(lock->held()) << name;
  }
  return tried.size();
}

TEST_F(ForkTest, ForkWhileEachRegistryLockIsHeld) {
  EXPECT_GT(fork_while_each_lock_is_held([] {}), 10u);
}

// A hang fails the test, naming how far it got (exit status 100 + the lock's index).
void on_parent_alarm(int) {
  exit_now(100 + g_lock_index);
}

// A chunk call refreshes the stats region under whatever allocator locks its caller
// holds: with each registry lock held while fork's prepare waits for it, a refresh as a
// chunk call makes it must not wait for a lock prepare holds (once, the thread-state
// pool's, and fork hung).
TEST_F(ForkTest, AChunkCallsRefreshNeverWaitsForALockForkHolds) {
  char err[64];
  ASSERT_TRUE(set_option("stats_region", "1", err, sizeof(err)));
  stats_region_chunk_tick();  // the region is created here, not under a lock
  signal(SIGALRM, &on_parent_alarm);
  alarm(600);
  EXPECT_GT(fork_while_each_lock_is_held([] { stats_region_chunk_tick(); }), 10u);
  alarm(0);
  signal(SIGALRM, SIG_DFL);
  ASSERT_TRUE(set_option("stats_region", "0", err, sizeof(err)));
}

// Other threads run every operation that takes a fork lock while the main thread forks.
TEST_F(ForkTest, ForkWhileEveryOperationRuns) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    std::vector<void*> live;
    for (int64_t i = 0; !stop.load(); ++i) {
      static const char* labels[] = {"fork_a", "fork_b", "fork_c", "fork_d"};
      live.push_back(
          ob_malloc(16 + (i * 7919) % 300000, ObMemAttr(OB_SERVER_TENANT_ID, labels[i % 4])));
      if (live.size() > 64) {
        for (void* p : live) ob_free(p);
        live.clear();
      }
    }
    for (void* p : live) ob_free(p);
  });
  threads.emplace_back([&] {
    while (!stop.load()) {
      auto ctx = MemoryContext::root().create_child(param("fork_busy_ctx"));
      if (ctx.ok()) {
        ctx->free(ctx->allocf(1000)).IgnoreError();
        ctx->destroy().IgnoreError();
      }
    }
  });
  threads.emplace_back([&] {
    static char buf[1 << 16];
    char err[64];
    for (int i = 0; !stop.load(); ++i) {
      global_malloc_allocator().print_usage(buf, sizeof(buf));
      print_chunk_dump(buf, sizeof(buf));
      set_option("memory_chunk_cache_size", i % 2 ? "4M" : "16M", err, sizeof(err));
      release_free_memory();
      global_malloc_allocator().wash_stale_spans(0);
    }
  });
  threads.emplace_back([&] {
    while (!stop.load()) global_chunk_mgr().release_expired();  // the eviction scan
  });
  int failures = 0;
  for (int i = 0; i < 60; ++i) {
    const int status = fork_and_work();
    EXPECT_EQ(status, 0) << "fork " << i;
    failures += status != 0;
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
}

// A usage scan lets go of the shard between chunks, and fork holds the shards, not the
// scan: a fork in the middle of a scan waits for one chunk's visit, and the child, which
// has no scanner, scans on its own (child_work prints usage).
TEST_F(ForkTest, AForkDoesNotWaitForAUsageScan) {
  ObjectSet& set =
      global_malloc_allocator().get_tenant_ctx_allocator(OB_SERVER_TENANT_ID, 0)->object_set();
  std::vector<void*> spans;  // one 2 MiB chunk each: the scan has turns between them
  for (int i = 0; i < 4; ++i) {
    spans.push_back(ob_malloc(1536 * 1024, ObMemAttr(OB_SERVER_TENANT_ID, "fork_scan")));
    ASSERT_NE(spans.back(), nullptr);
  }
  const int64_t chunks = set.object_mgr().sum([](BlockSet& bs) { return bs.chunk_count(); });
  std::atomic<int> turns{0};
  std::atomic<bool> forked{false};
  std::atomic<bool> gave_up{false};
  int64_t visits = 0;
  std::thread scanner([&] {
    set.object_mgr().for_each_chunk_in_turn(
        [&](BlockSet&, AChunk*) { ++visits; },
        [&] {
          if (turns.fetch_add(1) > 0) return;
          // The first turn waits for the fork to be done. A fork that waited for the scan
          // would wait for this turn, and this turn for it, until the deadline.
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (!forked.load()) {
            if (std::chrono::steady_clock::now() > deadline) {
              gave_up.store(true);
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        });
  });
  while (turns.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int status = fork_and_work();
  forked.store(true);
  scanner.join();
  EXPECT_EQ(status, 0);
  EXPECT_FALSE(gave_up.load());
  EXPECT_EQ(visits, chunks);  // the paused scan still visits every chunk once
  for (void* p : spans) ob_free(p);
}

// A slab's owner is a thread marker. In a child, new threads may be given the stacks (and
// TLS blocks) of the parent's other threads, which do not exist there; a new thread must
// not take their markers, or it would free "locally" into a dead thread's slabs.
TEST_F(ForkTest, ChildThreadsNeverTakeADeadParentThreadsMarker) {
  if (TSAN) GTEST_SKIP() << "TSan does not support threads started after a threaded fork";
  constexpr int N = 6;
  std::atomic<const void*> markers[N];
  std::atomic<int> ready{0};
  std::atomic<bool> forked{false};
  std::vector<std::thread> parents;
  for (int i = 0; i < N; ++i) {
    parents.emplace_back([&, i] {
      ob_free(ob_malloc(64, ObMemAttr(OB_SERVER_TENANT_ID, "fork_marker")));
      markers[i].store(this_thread_marker());
      ready.fetch_add(1);
      while (!forked.load()) sched_yield();
    });
  }
  while (ready.load() != N) sched_yield();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    int clashes = 0;
    for (int round = 0; round < 3 * N; ++round) {
      const void* mine = nullptr;
      std::thread t([&] {
        ob_free(ob_malloc(64, ObMemAttr(OB_SERVER_TENANT_ID, "fork_marker")));
        mine = this_thread_marker();
      });
      t.join();
      for (auto& m : markers) clashes += m.load() == mine;
    }
    _exit(clashes == 0 ? 0 : 1);
  }
  forked.store(true);
  for (auto& t : parents) t.join();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a child thread took a dead parent thread's marker";
}

// Whether this process has a stats region: its memfd among its descriptors.
bool has_stats_region() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    char link[300];
    char target[256];
    std::snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
    const ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n > 0 && std::string(target, n).find("achunk-stats") != std::string::npos) found = true;
  }
  closedir(d);
  return found;
}

// Forks a process whose release thread runs and whose region exists, after `in_parent`;
// the child runs `young` and checks it still has neither (it is younger than the
// 100 s interval and holds little), then `grown`, after which its next slow path must
// start its own thread (and the thread make its region). `grown` empty: the child must
// start it at once, in `young` (it holds memory worth returning).
template <typename F, typename G, typename H>
void expect_child_housekeeping(F in_parent, G young, H grown, bool at_once = false) {
  char err[64];
  ASSERT_TRUE(set_option("release_interval_ms", "100000", err, sizeof(err))) << err;
  ASSERT_TRUE(set_option("stats_region", "1", err, sizeof(err))) << err;
  start_release_thread();
  while (release_thread_signals_blocked() < 0) sched_yield();
  while (!has_stats_region()) sched_yield();  // made by the thread's first tick
  in_parent();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);                         // no release thread in the child: the wait below never ends
    if (has_stats_region()) _exit(2);  // the parent's, not dropped
    young();
    if (!at_once && release_thread_signals_blocked() != -1) _exit(3);
    if (!at_once && has_stats_region()) _exit(4);
    grown();
    while (release_thread_signals_blocked() != 1) sched_yield();
    while (!has_stats_region()) sched_yield();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child's release thread or region never came";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(set_option("release_interval_ms", "0", err, sizeof(err)));
  ASSERT_TRUE(set_option("stats_region", "0", err, sizeof(err)));
}

// A small child's allocations, hits and slow paths alike, start no thread and make no
// region while it is young; once it holds memory worth returning, its next slow path
// starts the thread.
TEST_F(ForkTest, ASmallYoungChildStartsNothingUntilItHoldsMemoryWorthReturning) {
  if (TSAN) GTEST_SKIP() << "TSan does not support threads started after a threaded fork";
  const auto allocate = [] {
    ob_free(ob_malloc(100, ObMemAttr(OB_SERVER_TENANT_ID, "fork_release")));
    for (int i = 0; i < 1000; ++i) achunk_free(achunk_malloc(16 + i % 1000));
    achunk_free(achunk_malloc(size_t{1} << 20));
  };
  void* big = nullptr;
  expect_child_housekeeping(allocate, allocate, [&] {
    big = achunk_malloc(child_housekeeping::EARLY_HOLD);
    achunk_free(achunk_malloc(size_t{1} << 20));  // a slow path after the growth
  });
}

// A child that only frees what its parent allocated starts its own on its first slow
// free when it holds memory worth returning: of an object another parent thread allocated
// (free_foreign), or of a big one (the checked free). Without it, the heaps of the
// parent's other threads, which the child frees into and no look then reclaims, and its
// chunk cache would stay for good.
TEST_F(ForkTest, AChildHoldingMuchStartsItsReleaseThreadOnItsFirstSlowFree) {
  if (TSAN) GTEST_SKIP() << "TSan does not support threads started after a threaded fork";
  void* p = nullptr;
  void* held = nullptr;
  expect_child_housekeeping(
      [&] {
        held = achunk_malloc(child_housekeeping::EARLY_HOLD);
        std::thread([&] { p = achunk_malloc(100); }).join();
      },
      [&] { achunk_free(p); }, [] {}, true);
  achunk_free(p);
  expect_child_housekeeping([&] { p = achunk_malloc(size_t{1} << 20); }, [&] { achunk_free(p); },
                            [] {}, true);
  achunk_free(p);
  achunk_free(held);
}

}  // namespace
}  // namespace achunk
