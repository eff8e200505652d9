#include "achunk/base/spin_lock.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "achunk/base/tls.h"

namespace achunk {

namespace spin_lock_detail {

std::atomic<const void*> fork_owner{nullptr};
constinit std::atomic<uint64_t> fork_gate{0};
ACHUNK_TLS int held_locks;
constinit std::atomic<int64_t> alive_held{0};
constinit std::atomic<int64_t> sleeps{0};

namespace {
ACHUNK_TLS char thread_self;
}  // namespace

const void* this_thread() {
  return &thread_self;
}

}  // namespace spin_lock_detail

namespace {

// Spins before sleeping: covers a holder that is running (a critical section is a few
// list operations), not one that was preempted.
constexpr int SPINS = 128;
// A sleeper's longest nap: the bound on a wake lost to the unlock's unfenced read.
constexpr long SLEEP_NS = 1'000'000;

uint32_t* futex_word(std::atomic<uint32_t>& state) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(&state);
}

// Threads the closed gate turned back that sleep until it opens, and the futex word they
// sleep on (bumped at each opening).
constinit std::atomic<uint32_t> g_gate_sleepers{0};
constinit std::atomic<uint32_t> g_gate_opens{0};

// Until the fork gate is open: spins, then sleeps until the opener wakes it (or 1 ms).
void wait_for_open_gate() {
  for (int spins = 0; spins < SPINS; ++spins) {
    if (spin_lock_detail::fork_gate.load(std::memory_order_acquire) == 0) return;
    cpu_relax();
  }
  const int saved_errno = errno;
  g_gate_sleepers.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    const uint32_t opens = g_gate_opens.load(std::memory_order_seq_cst);
    if (spin_lock_detail::fork_gate.load(std::memory_order_seq_cst) == 0) break;
    struct timespec timeout = {0, SLEEP_NS};
    syscall(SYS_futex, futex_word(g_gate_opens), FUTEX_WAIT_PRIVATE, opens, &timeout, nullptr, 0);
  }
  g_gate_sleepers.fetch_sub(1, std::memory_order_release);
  errno = saved_errno;
}

}  // namespace

void SpinLock::lock_slow(bool turned_back) {
  const int saved_errno = errno;  // malloc's caller keeps its errno
  // Counted from the first sleep until the lock is had (not just between naps), so
  // hand_off() can tell a woken waiter that has yet to take the lock from none at all.
  bool counted = false;
  for (;;) {
    if (turned_back) {
      release();
      if (counted) sleepers_.fetch_sub(1, std::memory_order_release);
      counted = false;
      wait_for_open_gate();
      turned_back = false;
    }
    bool taken = false;
    for (int spins = 0; spins < SPINS && !taken; ++spins) {
      // Wait on a plain load so waiters do not bounce the cache line between cores.
      if (state_.load(std::memory_order_relaxed) == FREE &&
          state_.exchange(LOCKED, std::memory_order_seq_cst) == FREE) {
        taken = true;
      } else {
        cpu_relax();
      }
    }
    while (!taken) {
      if (state_.exchange(LOCKED, std::memory_order_seq_cst) == FREE) {
        taken = true;
        break;
      }
      // Announce the sleep, then look once more: an unlock before the announcement is
      // seen here, one after it sees the announcement (or, racing, the timeout covers it).
      if (!counted) sleepers_.fetch_add(1, std::memory_order_seq_cst);
      counted = true;
      if (state_.load(std::memory_order_seq_cst) != FREE) {
        spin_lock_detail::sleeps.fetch_add(1, std::memory_order_relaxed);
        struct timespec timeout = {0, SLEEP_NS};
        // Returns at once if the lock was let go meanwhile (EAGAIN), on a signal, or on
        // the timeout.
        syscall(SYS_futex, futex_word(state_), FUTEX_WAIT_PRIVATE, LOCKED, &timeout, nullptr, 0);
      }
    }
    if (keeps_taken_lock()) break;
    turned_back = true;
  }
  if (counted) sleepers_.fetch_sub(1, std::memory_order_release);
  errno = saved_errno;
}

bool SpinLock::passes_closed_gate() {
  if (role_ == ForkRole::NOT_HELD || spin_lock_detail::forking_thread()) return true;
  if (spin_lock_detail::held_locks == 0) return false;
  uint64_t gate = spin_lock_detail::fork_gate.load(std::memory_order_seq_cst);
  for (;;) {
    if (gate == 0) return true;  // opened meanwhile
    if ((gate & spin_lock_detail::GATE_SEALED) != 0) return false;
    if (spin_lock_detail::fork_gate.compare_exchange_weak(
            gate, gate + spin_lock_detail::GATE_LET_IN, std::memory_order_seq_cst)) {
      return true;
    }
  }
}

void SpinLock::close_fork_gate(const void* owner) {
  spin_lock_detail::fork_owner.store(owner, std::memory_order_release);
  // seq_cst: pairs with lock()'s exchange and load (a store-load barrier on both sides,
  // so a thread either sees the gate closed or wait_free_for_fork sees its lock held).
  spin_lock_detail::fork_gate.store(spin_lock_detail::GATE_CLOSED, std::memory_order_seq_cst);
}

void SpinLock::wait_free_for_fork() const {
  for (int i = 0; state_.load(std::memory_order_seq_cst) != FREE; ++i) {
    if (i < SPINS) {
      cpu_relax();
    } else if (i < 2 * SPINS) {
      sched_yield();
    } else {
      // Uncounted naps of at most 1 ms (a count would write the lock's page).
      const int saved_errno = errno;
      struct timespec timeout = {0, SLEEP_NS};
      syscall(SYS_futex, futex_word(const_cast<std::atomic<uint32_t>&>(state_)), FUTEX_WAIT_PRIVATE,
              LOCKED, &timeout, nullptr, 0);
      errno = saved_errno;
    }
  }
}

void SpinLock::open_fork_gate(bool in_child) {
  spin_lock_detail::fork_owner.store(nullptr, std::memory_order_release);
  spin_lock_detail::fork_gate.store(0, std::memory_order_seq_cst);
  // The parent's turned-back threads are not in the child.
  if (in_child && g_gate_sleepers.load(std::memory_order_relaxed) != 0) {
    g_gate_sleepers.store(0, std::memory_order_relaxed);
  }
  if (g_gate_sleepers.load(std::memory_order_seq_cst) != 0) {
    g_gate_opens.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, futex_word(g_gate_opens), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
            0);
  }
}

uint32_t SpinLock::gate_sleepers() {
  return g_gate_sleepers.load(std::memory_order_acquire);
}

bool SpinLock::hand_off(int max_yields) {
  // A sleeper leaves the count only once it has the lock, so no count (or the lock held
  // by someone) means one had its turn, or none waited.
  for (int i = 0; i < max_yields; ++i) {
    if (held() || !has_sleepers()) return true;
    sched_yield();
  }
  return held() || !has_sleepers();
}

void SpinLock::wake_one() {
  syscall(SYS_futex, futex_word(state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace achunk
