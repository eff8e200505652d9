#include "global/global.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

#include "achunk/achunk.hpp"
#include "achunk/base/alloc_failure.h"
#include "achunk/base/buf_writer.h"
#include "achunk/base/error_report.h"
#include "achunk/base/spin_lock.h"
#include "achunk/platform/clock.h"
#include "achunk/platform/linux_os.h"
#include "alloc/object/object_check.h"
#include "alloc/object/object_set.h"
#include "context/context_env.h"
#include "global/child_housekeeping.h"
#include "global/stats_log.h"
#include "global/stats_region.h"

namespace achunk {

// The context layer is optional: a program that never creates a context links none of it
// (the drop-in malloc is built without it), and then these are null.
void install_context_env(ContextEnvSource source) __attribute__((weak, visibility("hidden")));
void memory_context_visit_fork_locks(ForkLockVisitor& v)
    __attribute__((weak, visibility("hidden")));

// Defined only in libachunk_malloc.so, which thereby gets the drop-in option defaults
// (the housekeeping thread, the stats region) before its first allocation.
extern const bool drop_in_malloc_linked __attribute__((weak));

namespace {

std::atomic<bool> g_release_thread_started{false};

struct Globals final : StatsHost {
  LinuxOs os;
  MonotonicClock clock;
  AChunkMgr chunk_mgr{os, clock};
  ObMallocAllocator malloc_allocator{chunk_mgr};
  SpinLock options_lock;  // serialises option changes; values are written atomically
  Options options{&drop_in_malloc_linked != nullptr};
  std::atomic<bool> context_use_pm{true};
  StatsRegion stats{os, chunk_mgr, *this};

  // StatsHost: lock-free reads, a change only when options_lock is free.
  int64_t option_value(int id) override {
    return std::atomic_ref<int64_t>(options.values[id]).load(std::memory_order_relaxed);
  }
  SetResult try_set_option(int id, int64_t value) override {
    if (!options_lock.try_lock()) return SetResult::BUSY;
    std::atomic_ref<int64_t>(options.values[id]).store(value, std::memory_order_relaxed);
    apply_one(static_cast<OptionId>(id));
    options_lock.unlock();
    return SetResult::OK;
  }
  int collect_ctx(stats::CtxRow* rows, int cap) override {
    return collect_ctx_rows(malloc_allocator, rows, cap);
  }
  void measure_usage(UsageScan* scan) override { achunk::measure_usage(malloc_allocator, scan); }
  int64_t wash_spans(bool all) override {
    const int64_t idle_us = all ? 0 : malloc_allocator.span_idle_us();
    return idle_us >= 0 ? malloc_allocator.wash_stale_spans(idle_us) : 0;
  }
  bool housekeeping_running() override {
    return g_release_thread_started.load(std::memory_order_relaxed);
  }
  ThreadStatePoolStats thread_states() override { return thread_state_pool_stats(); }
  int64_t lock_sleeps() override { return SpinLock::sleeps(); }
  AllocatorOverhead overhead() override { return malloc_allocator.overhead(); }

  // Pushes every option value to the objects that use them (at start-up).
  void apply() {
    chunk_mgr.apply_options(options);
    malloc_allocator.set_span_idle_ms(options[OPT_SPAN_IDLE_MS]);
    apply_object_options();
    context_use_pm.store(options[OPT_CONTEXT_USE_PM] != 0, std::memory_order_relaxed);
  }
  void apply_object_options() {
    ObjectSet::set_shared_slab_bytes(options[OPT_SHARED_SLAB_BYTES]);
    set_report_dealloc_mismatch(options[OPT_DEALLOC_MISMATCH] != 0 &&
                                !global_detail::origins_foreign.load(std::memory_order_relaxed));
  }
  // A change of one option reaches its owner alone: a new TTL flushes no cache. The
  // drop-in malloc's options are read where they are used.
  void apply_one(OptionId id) {
    switch (OPTION_TABLE[id].owner) {
      case OptionOwner::CHUNK:
        chunk_mgr.apply_option(id, options);
        break;
      case OptionOwner::BLOCK:
        malloc_allocator.set_span_idle_ms(options[OPT_SPAN_IDLE_MS]);
        break;
      case OptionOwner::OBJECT:
        apply_object_options();
        break;
      case OptionOwner::CONTEXT:
        context_use_pm.store(options[OPT_CONTEXT_USE_PM] != 0, std::memory_order_relaxed);
        break;
      case OptionOwner::DROPIN:
        break;
    }
  }
};

std::atomic<Globals*> g_created{nullptr};

void warn_to_stderr(void*, const char* message) {
  write_stderr_line(message);
}

Globals* create_globals() {
  alignas(Globals) static unsigned char storage[sizeof(Globals)];
  // Default-initialised, not value-initialised: `Globals()` would first zero the whole
  // object, and the tenant directory's 3 MB of ctx storage (bss, untouched until a ctx is
  // created) would then sit in RAM in every process the drop-in malloc is loaded into.
  Globals* g = new (storage) Globals;
  parse_conf(::getenv("ACHUNK_CONF"), &g->options, &warn_to_stderr, nullptr);
  g->apply();
  g->chunk_mgr.set_listener(&g->stats);
  g_created.store(g, std::memory_order_release);
  return g;
}

// pthread_once, not a function-local static: the drop-in links no libstdc++ (its guard).
pthread_once_t g_globals_once = PTHREAD_ONCE_INIT;

Globals& globals() {
  if (Globals* g = g_created.load(std::memory_order_acquire)) return *g;
  pthread_once(&g_globals_once, [] { create_globals(); });
  return *g_created.load(std::memory_order_acquire);
}

ContextEnv context_env() {
  Globals& g = globals();
  return ContextEnv{&g.malloc_allocator, &g.context_use_pm};
}

// At load time the layers below get their way to the process objects, which are still
// built on first use (ACHUNK_CONF is read then). Consumers of the static library keep
// this object linked with -u achunk_wiring (see CMakeLists.txt).
void install_fork_handlers_once();

__attribute__((constructor(101))) void wire_at_load() {
  if (install_context_env != nullptr) install_context_env(&context_env);
  // Library users fork too: a child must not inherit a lock another thread held.
  install_fork_handlers_once();
}

}  // namespace

extern "C" const char achunk_wiring = 0;

namespace {

// fork()'s prepare pass: with the gate closed, waits in the registry's order until each
// fork lock is free, writing none. `passed` counts the locks seen free (for tests).
class ForkPass final : public ForkLockVisitor {
 public:
  void visit(SpinLock& lock, const char*) override {
    lock.wait_free_for_fork();
    passed_.store(passed_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void restart() { passed_.store(0, std::memory_order_relaxed); }
  int passed() const { return passed_.load(std::memory_order_acquire); }

 private:
  std::atomic<int> passed_{0};
};

// In the child: frees a lock a thread of the parent's had for an instant (turned back by
// the gate), writing only such a lock.
class ForkChildReset final : public ForkLockVisitor {
 public:
  void visit(SpinLock& lock, const char*) override { lock.reset_in_child(); }
};

ForkPass g_fork_pass;

void fork_prepare() {
  // Nothing built yet (a library user forking before its first allocation): no lock to
  // wait for, and building the process objects inside fork is no place for it.
  if (g_created.load(std::memory_order_acquire) == nullptr) return;
  // The forking thread passes the gate: an atfork handler that runs after this one
  // (registered earlier) may allocate.
  g_fork_pass.restart();
  SpinLock::close_fork_gate(spin_lock_detail::this_thread());
  // Again while a thread was let in during the pass: it may hold a lock the pass had
  // already seen free. The threads let in finish their holds, and no other starts one.
  for (;;) {
    const uint64_t before = SpinLock::fork_gate_before_pass();
    visit_fork_locks(g_fork_pass);
    if (SpinLock::seal_fork_gate(before)) break;
    g_fork_pass.restart();
  }
}

void fork_parent() {
  SpinLock::open_fork_gate(false);
}

// -1 until the release thread runs, then 1 if it found every signal blocked, else 0.
std::atomic<int> g_release_thread_masked{-1};

// A forked child's birth on the chunk layer's clock (see child_housekeeping.h): its
// first slow path, not the fork, so that the fork handler reads no clock (a child that
// exits at once would fault in the clock's pages for nothing). 0 until then.
std::atomic<int64_t> g_child_born_us{0};

// The slow-path hook of a child whose parent had (or was waiting for) a housekeeping
// thread or a stats region: true once the child has started the one and made the other,
// or found them switched off.
bool start_housekeeping_when_due() {
  // Not from inside a fork's handlers (an atfork handler that allocates).
  if (spin_lock_detail::fork_gate.load(std::memory_order_acquire) != 0) return false;
  Globals* g = g_created.load(std::memory_order_acquire);
  if (g == nullptr) return false;
  const int64_t now = g->chunk_mgr.now_us();
  int64_t born = 0;
  if (g_child_born_us.compare_exchange_strong(born, now, std::memory_order_relaxed)) born = now;
  const int64_t interval_ms = g->option_value(OPT_RELEASE_INTERVAL_MS);
  if (!child_housekeeping::due(born, now, interval_ms, g->chunk_mgr.get_total_hold())) {
    return false;
  }
  if (interval_ms > 0) {
    start_release_thread();  // whose first tick makes the region
  } else {
    g->stats.tick(now, false);  // never allocates, so fine on any slow path
  }
  return true;
}

// Cold: with the child's other fork code, so a forked child faults in few text pages.
__attribute__((cold)) void fork_child() {
  ObjectSet::on_fork_child();
  // The parent's thread is not in the child; a child of a child still waiting for its
  // own waits too.
  const bool thread = g_release_thread_started.load(std::memory_order_relaxed);
  if (thread) g_release_thread_started.store(false, std::memory_order_relaxed);
  bool wanted = thread || ObjectSet::slow_path_hook_armed();
  if (Globals* g = g_created.load(std::memory_order_acquire)) {
    // The child must not write the parent's region; it makes its own when the hook
    // finds it due, so chunk-level calls before then leave it alone.
    g->stats.forget_after_fork(INT64_MAX);
    wanted = wanted || g->option_value(OPT_STATS_REGION) != 0;
  }
  if (wanted) {
    if (thread) g_release_thread_masked.store(-1, std::memory_order_relaxed);
    // Written only if set (a child of a child): each page written here is copied.
    if (g_child_born_us.load(std::memory_order_relaxed) != 0) {
      g_child_born_us.store(0, std::memory_order_relaxed);
    }
    ObjectSet::arm_slow_path_hook(&start_housekeeping_when_due);
  }
  if (g_created.load(std::memory_order_acquire) != nullptr) {
    ForkChildReset reset;
    visit_fork_locks(reset);
  }
  SpinLock::open_fork_gate(true);
}

// Readers of the region see generation 0 once the process exits.
__attribute__((destructor)) void mark_stats_region_exited() {
  if (Globals* g = g_created.load(std::memory_order_acquire)) g->stats.mark_exited();
}

std::atomic<bool> g_fork_handlers_installed{false};

void* release_loop(void*) {
  pthread_setname_np(pthread_self(), "achunk-bg");
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  const bool blocked = sigismember(&mask, SIGTERM) == 1 && sigismember(&mask, SIGINT) == 1 &&
                       sigismember(&mask, SIGUSR1) == 1 && sigismember(&mask, SIGHUP) == 1;
  g_release_thread_masked.store(blocked ? 1 : 0, std::memory_order_release);
  globals().stats.tick(global_chunk_mgr().now_us(), true);  // the region appears at once
  for (;;) {
    int64_t interval_ms = 0;
    get_option("release_interval_ms", &interval_ms);
    // Switched off at run time: look again in a second.
    const int64_t ms = interval_ms > 0 ? interval_ms : 1000;
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
    if (interval_ms > 0) {
      global_chunk_mgr().release_expired();
      // Free spans inside chunks that still hold live objects are resident too; a silent
      // process frees no span that would wash them, so the thread does.
      const int64_t span_idle_us = global_malloc_allocator().span_idle_us();
      if (span_idle_us >= 0) global_malloc_allocator().wash_stale_spans(span_idle_us);
    }
    globals().stats.tick(global_chunk_mgr().now_us(), true);
    maybe_print_stats_log(global_chunk_mgr().now_us(), globals().clock.wall_us());
  }
  return nullptr;
}

}  // namespace

void start_release_thread() {
  int64_t interval_ms = 0;
  if (!get_option("release_interval_ms", &interval_ms) || interval_ms <= 0) return;
  if (g_release_thread_started.exchange(true)) return;
  pthread_t tid;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The thread starts with every signal blocked: it is created on the first allocation,
  // usually before the host sets its own masks, and must never take a signal meant for the host (a
  // server's sigwait thread would wait forever for a SIGTERM delivered here).
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  if (pthread_create(&tid, &attr, &release_loop, nullptr) != 0) {
    write_stderr_line("achunk: could not start the release thread; idle release stays free-driven");
    g_release_thread_started.store(false);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  pthread_attr_destroy(&attr);
}

int release_thread_signals_blocked() {
  return g_release_thread_masked.load(std::memory_order_acquire);
}

void visit_fork_locks(ForkLockVisitor& v) {
  Globals& g = globals();
  // Outer locks first: a memory context takes a slot under g_slots_lock and then
  // allocates; option changes reach the chunk manager; the directory creates object sets.
  v.visit(g.options_lock, "options");
  c_api_visit_fork_locks(v);
  if (memory_context_visit_fork_locks != nullptr) memory_context_visit_fork_locks(v);
  g.malloc_allocator.visit_fork_locks(v);
  label_visit_fork_locks(v);
  ObjectSet::visit_all_fork_locks(v);
  g.chunk_mgr.visit_fork_locks(v);
  // A leaf: a thread that needs a state may hold any lock above.
  thread_state_visit_fork_locks(v);
}

void stats_region_chunk_tick() {
  globals().stats.tick(global_chunk_mgr().now_us(), false);
}

int fork_locks_passed() {
  return g_fork_pass.passed();
}

namespace {
void install_fork_handlers_once() {
  if (!g_fork_handlers_installed.exchange(true)) {
    pthread_atfork(&fork_prepare, &fork_parent, &fork_child);
  }
}
}  // namespace

void install_fork_handlers() {
  globals();  // created before the first fork, not inside one
  install_fork_handlers_once();
}

AChunkMgr& global_chunk_mgr() {
  return globals().chunk_mgr;
}

AllocatorOverhead global_overhead() {
  Globals& g = globals();
  AllocatorOverhead o = g.malloc_allocator.overhead();
  o.stats_region = g.stats.mapped_bytes();
  return o;
}
namespace global_detail {
std::atomic<ObMallocAllocator*> malloc_allocator{nullptr};
std::atomic<uint32_t> malloc_allocator_id{0};
std::atomic<bool> origins_foreign{false};

ObMallocAllocator& create_and_get_malloc_allocator() {
  Globals& g = globals();
  // The process's first allocation (or a forked child's): published before the thread
  // starts, so pthread_create's own allocations take the ordinary path.
  malloc_allocator.store(&g.malloc_allocator, std::memory_order_release);
  malloc_allocator_id.store(g.malloc_allocator.id(), std::memory_order_relaxed);
  // A forked child whose parent had yet to allocate: its hook starts the thread once it
  // is due (a short-lived child starts none).
  if (!ObjectSet::slow_path_hook_armed()) start_release_thread();
  return g.malloc_allocator;
}
}  // namespace global_detail

void* chunk_alloc(int64_t size) {
  AChunk* chunk = global_chunk_mgr().alloc_chunk(size);
  return chunk != nullptr ? chunk->data() : nullptr;
}

void chunk_free(void* payload) {
  if (payload == nullptr) return;
  global_chunk_mgr().free_chunk(AChunk::ptr2chunk(payload));
}

bool set_option(const char* name, const char* value, char* err, int64_t err_len) {
  const int id = find_option(name, __builtin_strlen(name));
  if (id < 0) {
    BufWriter(err, err_len).str(name).str(": unknown option");
    return false;
  }
  int64_t v = 0;
  if (!parse_option_value(OPTION_TABLE[id], value, __builtin_strlen(value), &v, err, err_len)) {
    return false;
  }
  Globals& g = globals();
  std::lock_guard<SpinLock> guard(g.options_lock);
  std::atomic_ref<int64_t>(g.options.values[id]).store(v, std::memory_order_relaxed);
  g.apply_one(static_cast<OptionId>(id));
  return true;
}

bool get_option(const char* name, int64_t* value) {
  const int id = find_option(name, __builtin_strlen(name));
  if (id < 0) return false;
  Globals& g = globals();
  std::lock_guard<SpinLock> guard(g.options_lock);
  *value = g.options.values[id];
  return true;
}

int64_t print_chunk_dump(char* buf, int64_t len, DumpFormat format) {
  const AChunkMgr& mgr = global_chunk_mgr();
  return format == DumpFormat::JSON ? mgr.print_json(buf, len) : mgr.print(buf, len);
}

int64_t last_failure_message(char* buf, int64_t len) {
  return format_alloc_failure(last_alloc_failure(), buf, len);
}

int64_t release_free_memory() {
  return global_chunk_mgr().sync_wash();
}

}  // namespace achunk
