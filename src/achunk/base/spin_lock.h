// Base layer: a small lock for short critical sections (a few list operations). A waiter
// spins briefly, then sleeps on a futex until the holder's unlock wakes it: a yield loop
// on an oversubscribed machine leaves the waiter off the CPU for whole timeslices after
// the lock is free. The unlock stays a plain store (an atomic exchange there cost the
// chunk cache's hit 40%), so a wake can be missed in a rare race; a sleeper also wakes
// after 1 ms and looks again. It never allocates, so the allocator itself can use it. It
// can also be held for fork(): then the forking thread enters it freely (see fork_lock()),
// so a pthread_atfork handler that allocates after achunk's prepare ran cannot hang.
// The parent releases each such lock after the fork; the child releases them all at
// once by moving to a new fork epoch (release_fork_holds_in_child), and a lock still held
// for an older epoch is free to the first thread that claims it, so the child writes none
// of the pages the locks live on unless it takes them.
// Every lock says at construction whether fork() holds it (ForkRole), and the process
// tallies the live locks fork() holds, so a test can prove the fork-lock registry
// (fork_locks.h) complete; the tally costs nothing on lock() and unlock(), nor in building
// a lock fork() does not hold (a temporary context builds three). Depends on nothing inside achunk.
#pragma once

#include <atomic>
#include <cstdint>

namespace achunk {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Whether fork() holds a lock. A lock it does not hold says so where it is constructed,
// with the reason, so the registry test (tests/global/fork_lock_registry_test.cc) counts it.
enum class ForkRole : uint8_t { HELD, NOT_HELD };

namespace spin_lock_detail {
// Live locks built at run time with ForkRole::HELD (namespace-scope locks are listed
// instead, see ACHUNK_STATIC_SPIN_LOCK).
extern std::atomic<int64_t> alive_held;
// The thread running fork()'s handlers while it holds the fork locks, else nullptr.
extern std::atomic<const void*> fork_owner;
// Waits that slept on the futex, all locks together (contention seen from outside).
extern std::atomic<int64_t> sleeps;
// This thread's identity for fork_owner (a TLS address: same in the child of a fork).
const void* this_thread();
// Bumped in a forked child: every lock held for a fork of an earlier epoch is free.
extern std::atomic<uint32_t> fork_epoch;
// The fork mark of a lock held for the current epoch's fork (never 0).
inline uint32_t current_fork_mark() {
  return fork_epoch.load(std::memory_order_relaxed) + 1;
}
inline bool forking_thread() {
  const void* owner = fork_owner.load(std::memory_order_acquire);
  return owner != nullptr && owner == this_thread();
}
}  // namespace spin_lock_detail

class SpinLock {
 public:
  struct StaticTag {};
  static constexpr StaticTag STATIC{};

  SpinLock() : SpinLock(ForkRole::HELD) {}
  explicit SpinLock(ForkRole role) : role_(role) {
    if (role == ForkRole::HELD)
      spin_lock_detail::alive_held.fetch_add(1, std::memory_order_relaxed);
  }
  // Only through ACHUNK_STATIC_SPIN_LOCK: constant-initialised, so malloc may take it
  // before any constructor ran, and listed in a section instead of tallied.
  consteval SpinLock(StaticTag, ForkRole role) : role_(role), static_(true) {}
  ~SpinLock() {
    if (!static_ && role_ == ForkRole::HELD) {
      spin_lock_detail::alive_held.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  // Run-time locks alive now that fork() holds (for the registry test).
  static int64_t alive_held() {
    return spin_lock_detail::alive_held.load(std::memory_order_relaxed);
  }
  // Futex naps of waiters, all locks together; each ends at an unlock's wake or after 1 ms.
  static int64_t sleeps() { return spin_lock_detail::sleeps.load(std::memory_order_relaxed); }
  ForkRole fork_role() const { return role_; }
  bool is_static() const { return static_; }

  void lock() {
    // On a lock held for fork this changes nothing: state_ is already LOCKED.
    if (__builtin_expect(state_.exchange(LOCKED, std::memory_order_acquire) == FREE, 1)) return;
    lock_slow(true);
  }
  bool try_lock() {
    if (state_.load(std::memory_order_relaxed) == FREE &&
        state_.exchange(LOCKED, std::memory_order_acquire) == FREE) {
      return true;
    }
    return passes_for_fork() || claim_stale();
  }
  void unlock() {
    // Held for fork: the forking thread entered it and leaves it held. Anyone else who
    // holds the lock reads false here.
    if (__builtin_expect(fork_mark_.load(std::memory_order_relaxed) != 0, 0)) return;
    release();
  }

  // Taken by the forking thread in fork()'s prepare handler; until fork_unlock() every
  // other thread waits in lock(), while the forking thread (once the fork locks are all
  // held and it is published as spin_lock_detail::fork_owner) enters and leaves it without
  // changing it: the fork owner holds every fork lock, so no other thread is inside.
  void fork_lock() {
    lock_slow(false);
    fork_mark_.store(spin_lock_detail::current_fork_mark(), std::memory_order_relaxed);
  }
  // Released after fork() in the parent and the child. Only a lock still held for the fork
  // changes, so releasing twice is harmless.
  void fork_unlock() {
    if (fork_mark_.load(std::memory_order_relaxed) == 0) return;
    fork_mark_.store(0, std::memory_order_relaxed);
    release();
  }
  // In a forked child, for every lock at once: each lock held for the fork becomes free
  // to its first claimant (claim_stale), and the child writes no lock until it takes one.
  static void release_fork_holds_in_child() {
    spin_lock_detail::fork_epoch.fetch_add(1, std::memory_order_relaxed);
  }
  bool held() const { return state_.load(std::memory_order_relaxed) != FREE && !stale(); }
  // Waiters that went to sleep on the lock and have not had it yet (none on a stale lock:
  // the count is the parent's, and its claimant zeroes it).
  bool has_sleepers() const { return sleepers_.load(std::memory_order_relaxed) != 0 && !stale(); }
  // Just after unlock(), by a thread that will take the lock again at once (a loop of
  // holds): if a waiter sleeps, yields until one has had the lock, at most max_yields
  // times, so the loop cannot take it back first each time and starve the waiter.
  // False when it stopped at max_yields with a waiter still asleep.
  bool hand_off(int max_yields);
  // In a forked child: the parent's sleepers are not in the child, and a count left
  // behind would make every unlock there a futex syscall.
  void forget_sleepers() { sleepers_.store(0, std::memory_order_relaxed); }
  // In a forked child, for a lock fork() does not hold: its holder and its sleepers may be
  // threads of the parent's, which the child does not have. Free for the child's threads.
  // Written only if it must be: a write would copy the lock's page into the child.
  void reset_in_child() {
    if (sleepers_.load(std::memory_order_relaxed) != 0) forget_sleepers();
    if (state_.load(std::memory_order_relaxed) != FREE)
      state_.store(FREE, std::memory_order_relaxed);
  }

 private:
  static constexpr uint32_t FREE = 0;
  static constexpr uint32_t LOCKED = 1;

  bool passes_for_fork() const {
    return fork_mark_.load(std::memory_order_relaxed) == spin_lock_detail::current_fork_mark() &&
           spin_lock_detail::forking_thread();
  }
  // Held for the fork of an earlier epoch: in a child, free to whoever claims it.
  bool stale() const {
    const uint32_t mark = fork_mark_.load(std::memory_order_relaxed);
    return mark != 0 && mark != spin_lock_detail::current_fork_mark();
  }
  // Takes a stale lock (its state_ stays LOCKED, now this thread's); one claimant wins.
  // The parent's sleepers counted in it are not in the child.
  bool claim_stale() {
    uint32_t mark = fork_mark_.load(std::memory_order_relaxed);
    if (mark == 0 || mark == spin_lock_detail::current_fork_mark()) return false;
    if (!fork_mark_.compare_exchange_strong(mark, 0, std::memory_order_acquire)) return false;
    sleepers_.store(0, std::memory_order_relaxed);
    return true;
  }
  void release() {
    state_.store(FREE, std::memory_order_release);
    // May read a sleeper's count before the store above is seen (no fence here): that
    // sleeper then wakes after its 1 ms nap.
    if (__builtin_expect(sleepers_.load(std::memory_order_relaxed) != 0, 0)) wake_one();
  }
  // for_fork_owner: whether the fork owner may pass a lock held for fork (not while the
  // fork's prepare handler is still taking the locks).
  void lock_slow(bool for_fork_owner);
  void wake_one();

  std::atomic<uint32_t> state_{FREE};  // the futex word
  std::atomic<uint32_t> sleepers_{0};  // waiters in or about to enter a futex wait
  // 0, or the fork mark (epoch + 1) of the fork it is held for: set only by the fork
  // owner, while it holds the lock.
  std::atomic<uint32_t> fork_mark_{0};
  const ForkRole role_;
  const bool static_ = false;
};

// Namespace-scope locks, listed by address between these symbols (the linker makes them).
extern "C" SpinLock* const __start_achunk_static_locks[];
extern "C" SpinLock* const __stop_achunk_static_locks[];

#define ACHUNK_STATIC_LOCK_CAT2(a, b) a##b
#define ACHUNK_STATIC_LOCK_CAT(a, b) ACHUNK_STATIC_LOCK_CAT2(a, b)
// Defines a namespace-scope SpinLock `name` with fork role `role` (a ForkRole), listed
// in the achunk_static_locks section so the registry test finds it by address.
#define ACHUNK_STATIC_SPIN_LOCK(name, role)                                       \
  constinit ::achunk::SpinLock name{::achunk::SpinLock::STATIC, role};            \
  __attribute__((section("achunk_static_locks"), used)) ::achunk::SpinLock* const \
  ACHUNK_STATIC_LOCK_CAT(achunk_static_lock_entry_, __COUNTER__) = &name

}  // namespace achunk
