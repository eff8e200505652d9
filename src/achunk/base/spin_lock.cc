#include "achunk/base/spin_lock.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "achunk/base/tls.h"

namespace achunk {

namespace spin_lock_detail {

std::atomic<const void*> fork_owner{nullptr};
constinit std::atomic<int64_t> alive[2] = {};
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

uint32_t* futex_word(std::atomic<uint32_t>& state) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(&state);
}

}  // namespace

void SpinLock::lock_slow(bool for_fork_owner) {
  for (int spins = 0; spins < SPINS; ++spins) {
    // Wait on a plain load so waiters do not bounce the cache line between cores.
    uint32_t seen = state_.load(std::memory_order_relaxed);
    if (seen == FREE) {
      if (state_.compare_exchange_weak(seen, LOCKED, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return;
      }
    } else if (for_fork_owner && passes_for_fork()) {
      return;
    }
    cpu_relax();
  }
  // Mark the lock as having sleepers, so its holder's unlock wakes one; a waiter that
  // finds it free takes it in the same step (and its unlock may wake nobody).
  const int saved_errno = errno;  // malloc's caller keeps its errno
  for (;;) {
    if (for_fork_owner && passes_for_fork()) break;
    if (state_.exchange(SLEEPERS, std::memory_order_acquire) == FREE) break;
    spin_lock_detail::sleeps.fetch_add(1, std::memory_order_relaxed);
    // Returns at once if the state changed since the exchange (EAGAIN), or on a signal.
    syscall(SYS_futex, futex_word(state_), FUTEX_WAIT_PRIVATE, SLEEPERS, nullptr, nullptr, 0);
  }
  errno = saved_errno;
}

void SpinLock::wake_one() {
  syscall(SYS_futex, futex_word(state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace achunk
