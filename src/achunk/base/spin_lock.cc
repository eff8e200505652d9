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
constinit std::atomic<uint32_t> fork_epoch{0};
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

}  // namespace

void SpinLock::lock_slow(bool for_fork_owner) {
  for (int spins = 0; spins < SPINS; ++spins) {
    // Wait on a plain load so waiters do not bounce the cache line between cores.
    if (state_.load(std::memory_order_relaxed) == FREE) {
      if (state_.exchange(LOCKED, std::memory_order_acquire) == FREE) return;
    } else if ((for_fork_owner && passes_for_fork()) || claim_stale()) {
      return;
    }
    cpu_relax();
  }
  const int saved_errno = errno;  // malloc's caller keeps its errno
  // Counted from the first sleep until the lock is had (not just between naps), so
  // hand_off() can tell a woken waiter that has yet to take the lock from none at all.
  bool counted = false;
  for (;;) {
    if (for_fork_owner && passes_for_fork()) break;
    if (state_.exchange(LOCKED, std::memory_order_acquire) == FREE) break;
    if (claim_stale()) {
      counted = false;  // the claim zeroed the count
      break;
    }
    // Announce the sleep, then look once more: an unlock before the announcement is seen
    // here, one after it sees the announcement (or, racing, the timeout covers it).
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
  if (counted) sleepers_.fetch_sub(1, std::memory_order_release);
  errno = saved_errno;
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
