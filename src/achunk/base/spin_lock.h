// Base layer: a small test-and-test-and-set lock for short critical sections
// (a few list operations). It never allocates, so the allocator itself can use it.
// Depends on nothing inside achunk.
#pragma once

#include <sched.h>

#include <atomic>

namespace achunk {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class SpinLock {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      // Wait on a plain load so waiters do not bounce the cache line between cores.
      while (locked_.load(std::memory_order_relaxed)) {
        // The holder may be descheduled (2 cores); yield instead of burning its timeslice.
        if (++spins > 64) {
          sched_yield();
        } else {
          cpu_relax();
        }
      }
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace achunk
