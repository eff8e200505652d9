// Base layer: a small lock for short critical sections (a few list operations). A waiter
// spins briefly, then sleeps on a futex until the holder's unlock wakes it: a yield loop
// on an oversubscribed machine leaves the waiter off the CPU for whole timeslices after
// the lock is free. The unlock stays a plain store (an atomic exchange there cost the
// chunk cache's hit 40%), so a wake can be missed in a rare race; a sleeper also wakes
// after 1 ms and looks again. It never allocates, so the allocator itself can use it.
// fork() must find every lock that says so (ForkRole::HELD) free, and writes none: after
// a fork every page is copy-on-write, and each lock page written costs a fault and a
// copy. So fork's prepare handler closes the fork gate and passes the registry, waiting
// until each lock is free (wait_free_for_fork). While the gate is closed a thread that
// holds no lock waits before it takes one; one that holds a lock goes on (its holds may
// be what the pass waits for) and is counted, and a pass during which one went on is run
// again; a clean pass seals the gate, and from then on only the forking thread takes a
// fork lock, so an atfork handler that allocates after achunk's prepare cannot hang. The
// parent and child handlers open the gate; the child also frees a lock that a thread
// turned back had for an instant (reset_in_child), reading every other.
// Every lock says at construction whether fork() holds it (ForkRole), and the process
// tallies the live locks fork() holds, so a test can prove the fork-lock registry
// (fork_locks.h) complete; the tally costs nothing on lock() and unlock(), nor in building
// a lock fork() does not hold (a temporary context builds three). Depends on nothing inside achunk.
#pragma once

#include <atomic>
#include <cstdint>

#include "achunk/base/tls.h"

namespace achunk {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Whether fork() waits for a lock to be free (HELD: the lock is in the fork-lock registry).
// A lock it does not wait for says so where it is constructed,
// with the reason, so the registry test (tests/global/fork_lock_registry_test.cc) counts it.
enum class ForkRole : uint8_t { HELD, NOT_HELD };

namespace spin_lock_detail {
// Live locks built at run time with ForkRole::HELD (namespace-scope locks are listed
// instead, see ACHUNK_STATIC_SPIN_LOCK).
extern std::atomic<int64_t> alive_held;
// The thread running fork()'s handlers while the gate is closed, else nullptr.
extern std::atomic<const void*> fork_owner;
// Waits that slept on the futex, all locks together (contention seen from outside).
extern std::atomic<int64_t> sleeps;
// This thread's identity for fork_owner (a TLS address: same in the child of a fork).
const void* this_thread();
// 0 while no fork runs. Else GATE_CLOSED, GATE_SEALED once a pass found every fork lock
// free with nobody let in, and the number of threads let in times GATE_LET_IN.
extern std::atomic<uint64_t> fork_gate;
inline constexpr uint64_t GATE_CLOSED = 1;
inline constexpr uint64_t GATE_SEALED = 2;
inline constexpr uint64_t GATE_LET_IN = 4;
// Locks (of either role) this thread holds.
extern ACHUNK_TLS int held_locks;
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
    // seq_cst: the exchange and the gate's load pair with the prepare handler's closing
    // of the gate and its loads of state_ (see wait_free_for_fork).
    if (__builtin_expect(state_.exchange(LOCKED, std::memory_order_seq_cst) == FREE, 1)) {
      if (__builtin_expect(keeps_taken_lock(), 1)) return;
      lock_slow(true);
      return;
    }
    lock_slow(false);
  }
  bool try_lock() {
    if (state_.load(std::memory_order_relaxed) != FREE ||
        state_.exchange(LOCKED, std::memory_order_seq_cst) != FREE) {
      return false;
    }
    if (__builtin_expect(keeps_taken_lock(), 1)) return true;
    release();
    return false;
  }
  void unlock() {
    --spin_lock_detail::held_locks;
    release();
  }

  // fork()'s prepare handler: closes the gate (`owner`, the forking thread, passes it),
  // then passes the registry with wait_free_for_fork() until seal_fork_gate() succeeds.
  static void close_fork_gate(const void* owner);
  // Returns once the lock is free, writing nothing to it.
  void wait_free_for_fork() const;
  // The gate's word before a pass, for seal_fork_gate().
  static uint64_t fork_gate_before_pass() {
    return spin_lock_detail::fork_gate.load(std::memory_order_seq_cst);
  }
  // After a pass: seals the gate if nobody was let in since `before`; false if someone
  // was (then the pass runs again).
  static bool seal_fork_gate(uint64_t before) {
    return spin_lock_detail::fork_gate.compare_exchange_strong(
        before, before | spin_lock_detail::GATE_SEALED, std::memory_order_seq_cst);
  }
  // The parent and child handlers, after the fork.
  static void open_fork_gate(bool in_child);
  // Threads the closed gate turned back that sleep until it opens (for tests).
  static uint32_t gate_sleepers();
  bool held() const { return state_.load(std::memory_order_relaxed) != FREE; }
  // Waiters that went to sleep on the lock and have not had it yet.
  bool has_sleepers() const { return sleepers_.load(std::memory_order_relaxed) != 0; }
  // Just after unlock(), by a thread that will take the lock again at once (a loop of
  // holds): if a waiter sleeps, yields until one has had the lock, at most max_yields
  // times, so the loop cannot take it back first each time and starve the waiter.
  // False when it stopped at max_yields with a waiter still asleep.
  bool hand_off(int max_yields);
  // In a forked child: the parent's sleepers are not in the child, and a count left
  // behind would make every unlock there a futex syscall.
  void forget_sleepers() { sleepers_.store(0, std::memory_order_relaxed); }
  // In a forked child, for every lock: its holder and its sleepers may be threads of the
  // parent's (a NOT_HELD lock's holder, or a thread the closed gate turned back just
  // after its exchange), which the child does not have. Free for the child's threads.
  // Written only if it must be: a write would copy the lock's page into the child.
  void reset_in_child() {
    if (sleepers_.load(std::memory_order_relaxed) != 0) forget_sleepers();
    if (state_.load(std::memory_order_relaxed) != FREE)
      state_.store(FREE, std::memory_order_relaxed);
  }

 private:
  static constexpr uint32_t FREE = 0;
  static constexpr uint32_t LOCKED = 1;

  // Just after this thread's exchange took state_: whether it keeps the lock (then counted
  // in held_locks). The seq_cst load pairs with close_fork_gate (see wait_free_for_fork).
  bool keeps_taken_lock() {
    if (__builtin_expect(spin_lock_detail::fork_gate.load(std::memory_order_seq_cst) != 0, 0) &&
        !passes_closed_gate()) {
      return false;
    }
    ++spin_lock_detail::held_locks;
    return true;
  }
  // Just after this thread's exchange took state_ with the gate closed: whether it keeps
  // the lock. A lock fork() does not wait for, the forking thread, and (until the gate is
  // sealed) a thread that holds a lock, counted as let in, keep it.
  bool passes_closed_gate();
  void release() {
    state_.store(FREE, std::memory_order_release);
    // May read a sleeper's count before the store above is seen (no fence here): that
    // sleeper then wakes after its 1 ms nap.
    if (__builtin_expect(sleepers_.load(std::memory_order_relaxed) != 0, 0)) wake_one();
  }
  // lock() when the lock was held, or (turned_back) taken while the closed gate turned
  // this thread back: then it lets the lock go and waits for the gate first.
  void lock_slow(bool turned_back);
  void wake_one();

  std::atomic<uint32_t> state_{FREE};  // the futex word
  std::atomic<uint32_t> sleepers_{0};  // waiters in or about to enter a futex wait
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
