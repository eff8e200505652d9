// Wiring, the top: the one place where achunk's process-wide objects are wired: the real OS, the
// real clock, the global AChunkMgr, the tenant directory behind ob_malloc and the current option
// values, configured from ACHUNK_CONF on first use and never destroyed (so frees after exit() still
// work). Depends on every layer below it.
#pragma once

#include <atomic>

#include "achunk/base/fork_locks.h"
#include "achunk/base/options.h"
#include "achunk/chunk/achunk_mgr.h"
#include "alloc/object/malloc_allocator.h"

namespace achunk {

namespace global_detail {
// Set once the globals exist; read on every ob_malloc, so the accessor is a load.
extern std::atomic<ObMallocAllocator*> malloc_allocator;
// Its id() while it is published, else 0: the drop-in malloc's hit checks the thread's
// entry against it without reading the allocator (MallocShim::malloc_fast).
extern std::atomic<uint32_t> malloc_allocator_id;
ObMallocAllocator& create_and_get_malloc_allocator();
// The process's operators new or delete are not all the drop-in malloc's (a program
// defines its own): objects carry no origin and dealloc_mismatch has no effect.
extern std::atomic<bool> origins_foreign;
}  // namespace global_detail

AChunkMgr& global_chunk_mgr();
// What the process-wide allocator holds for itself, its stats region included. Lock-free.
AllocatorOverhead global_overhead();
inline ObMallocAllocator& global_malloc_allocator() {
  ObMallocAllocator* a = global_detail::malloc_allocator.load(std::memory_order_acquire);
  return a != nullptr ? *a : global_detail::create_and_get_malloc_allocator();
}
// The fork-lock registry: passes every lock fork() must find free to `v`, outer locks
// first (a lock taken while another is held comes after it), by calling each layer's
// visit function. Stable only while the object set list does not change (it is during a
// fork, once the prepare handler's pass is past the object-set list lock).
void visit_fork_locks(ForkLockVisitor& v);
// The C API's report buffer lock (c_api.cc), in the registry.
void c_api_visit_fork_locks(ForkLockVisitor& v);
// How many registry locks the prepare handler of the last fork has seen free: while it
// waits for lock i, it is i. For tests.
int fork_locks_passed();
// Registers pthread_atfork handlers that make fork() find every registry lock free (the
// fork gate, see spin_lock.h), so a child forked while other threads allocate can
// allocate, and the forking thread passes the gate, so atfork handlers that run after
// achunk's may allocate. Idempotent. Not
// called from inside malloc (pthread_atfork may allocate). The wiring registers the
// handlers at load time in every build; the drop-in malloc also builds the process objects
// then, through this.
void install_fork_handlers();
// Starts the housekeeping (release) thread, named achunk-bg, with every signal blocked, if
// release_interval_ms > 0: every interval it unmaps all cached chunks that idled for
// chunk_cache_ttl_ms, so a process that has gone completely silent (no frees, so no
// eviction) still gives its cache back, washes the free spans of every ctx that had no
// span change during the interval, and serves the stats region. Idempotent. Called on
// the process's first allocation (release_interval_ms is 1000 in the drop-in malloc, 0
// for library use) and again on a forked child's first allocation.
void start_release_thread();
// The stats region's refresh as a chunk call makes it (not the housekeeping thread's),
// now. Chunk calls come with any allocator lock held, so it must never wait for a lock.
// For tests.
void stats_region_chunk_tick();
// -1 while the release thread has not run in this process (or was never started), then 1 if it runs
// with every signal blocked, 0 if not. For tests.
int release_thread_signals_blocked();

}  // namespace achunk
