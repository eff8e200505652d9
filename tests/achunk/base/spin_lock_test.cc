#include "achunk/base/spin_lock.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace achunk {
namespace {

// The scheduler state of thread `tid` ('R' running, 'S' sleeping, ...) from /proc.
char thread_state(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the name may hold spaces and parentheses
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// Waits until `tid` sleeps in the kernel and SpinLock::sleeps() passed `sleeps_before`; a
// waiter that polled with sched_yield would stay runnable and fail this after 20 s.
bool waits_asleep(pid_t tid, int64_t sleeps_before) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (SpinLock::sleeps() > sleeps_before && (tid == 0 || thread_state(tid) == 'S')) {
      return true;
    }
    std::this_thread::yield();
  }
  return false;
}

// Forks a child that runs `child` and exits with its result, straight through exit_group
// (TSan's exit hook would report the parent's unjoined threads); expects 0.
template <typename F>
void expect_child_passes(F child) {
  const pid_t pid = fork();
  if (pid == 0) syscall(SYS_exit_group, child());
  int status = -1;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A thread that takes `lock`, runs `inside` and lets it go, started while the lock is
// held elsewhere, so it waits.
class Waiter {
 public:
  template <typename F>
  Waiter(SpinLock& lock, F inside)
      : thread_([this, &lock, inside] {
          tid_.store(static_cast<pid_t>(syscall(SYS_gettid)));
          lock.lock();
          inside();
          lock.unlock();
        }) {
    while (tid_.load() == 0) std::this_thread::yield();
  }
  // Whether it sleeps on the lock (see waits_asleep).
  bool asleep() const { return waits_asleep(tid_.load(), sleeps_before_); }
  void join() { thread_.join(); }

 private:
  const int64_t sleeps_before_ = SpinLock::sleeps();
  std::atomic<pid_t> tid_{0};
  std::thread thread_;
};

TEST(SpinLockTest, CountsStayExactUnderContention) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  int64_t count = 0;
  constexpr int THREADS = 4;
  constexpr int ROUNDS = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < THREADS; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < ROUNDS; ++i) {
        std::lock_guard<SpinLock> guard(lock);
        const int64_t seen = count;
        for (int k = 0; k < 20; ++k) cpu_relax();  // long enough for others to queue
        count = seen + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(count, THREADS * ROUNDS);
  EXPECT_FALSE(lock.held());
}

TEST(SpinLockTest, AWaiterSleepsUntilTheUnlockWakesIt) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  lock.lock();
  std::atomic<bool> entered{false};
  Waiter waiter(lock, [&] {
    entered.store(true);
    // A malloc that waited leaves its caller's errno alone: the thread's starts at 0, and
    // the futex calls set EAGAIN or ETIMEDOUT.
    EXPECT_EQ(errno, 0);
  });
  EXPECT_TRUE(waiter.asleep());
  // One more nap: the first ended by its timeout (ETIMEDOUT), which errno must not keep.
  EXPECT_TRUE(waits_asleep(0, SpinLock::sleeps()));
  EXPECT_FALSE(entered.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(entered.load());
  EXPECT_FALSE(lock.held());
}

TEST(SpinLockTest, TryLockFailsWhileHeldAndTakesAFreeLock) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  ASSERT_TRUE(lock.try_lock());
  bool other = true;
  std::thread([&] { other = lock.try_lock(); }).join();
  EXPECT_FALSE(other);
  lock.unlock();
  std::thread([&] {
    other = lock.try_lock();
    if (other) lock.unlock();
  }).join();
  EXPECT_TRUE(other);
}

TEST(SpinLockTest, ForkUnlockWakesAThreadThatSleptOnALockHeldForFork) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  lock.fork_lock();
  lock.unlock();  // the fork owner leaves it held
  EXPECT_TRUE(lock.held());
  Waiter waiter(lock, [] {});
  EXPECT_TRUE(waiter.asleep());
  lock.fork_unlock();
  waiter.join();
  EXPECT_FALSE(lock.held());
}

// A child forked while a thread slept on a lock inherits the count but not the thread;
// forget_sleepers() (the fork handler's, for every registry lock) clears it.
TEST(SpinLockTest, AForkedChildForgetsTheParentsSleepers) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  lock.lock();
  Waiter waiter(lock, [] {});
  EXPECT_TRUE(waiter.asleep());
  // The waiter stays counted between its 1 ms naps, until it has the lock.
  expect_child_passes([&] {
    if (!lock.has_sleepers()) return 2;
    lock.forget_sleepers();
    lock.unlock();
    return !lock.has_sleepers() && !lock.held() ? 0 : 1;
  });
  lock.unlock();
  waiter.join();
}

// A child releases every lock held for its fork at once, by a new epoch, writing none:
// each is free to the first thread that takes it (and then an ordinary lock), while the
// parent, whose epoch never moves, keeps it held until fork_unlock().
TEST(SpinLockTest, ANewForkEpochFreesTheLocksHeldForTheForkToTheirFirstClaimant) {
  SpinLock a(ForkRole::NOT_HELD);  // the test's own locks
  SpinLock b(ForkRole::NOT_HELD);
  SpinLock c(ForkRole::NOT_HELD);
  a.fork_lock();
  b.fork_lock();
  c.fork_lock();
  EXPECT_TRUE(a.held());
  bool other = true;
  std::thread([&] { other = a.try_lock(); }).join();
  EXPECT_FALSE(other);  // held for this epoch's fork: not claimable
  expect_child_passes([&] {
    SpinLock::release_fork_holds_in_child();  // as the wiring's fork handler does
    int failures = 0;
    failures += a.held() || b.held() || c.held();
    failures += !a.try_lock();  // claimed: an ordinary lock of this thread's now
    failures += !a.held();
    a.unlock();
    failures += a.held();
    b.lock();  // through lock()'s slow path
    failures += !b.held();
    b.unlock();
    failures += b.held() || b.has_sleepers();
    c.fork_lock();  // a child forking again takes it for its own epoch
    c.fork_unlock();
    failures += c.held();
    return failures;
  });
  // The parent's: still held until released.
  EXPECT_TRUE(a.held() && b.held() && c.held());
  a.fork_unlock();
  b.fork_unlock();
  c.fork_unlock();
  EXPECT_FALSE(a.held() || b.held() || c.held());
}

// A child's claim of a lock held for its fork forgets the parent's sleepers counted in it.
TEST(SpinLockTest, AClaimInTheChildForgetsTheParentsSleepers) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  lock.fork_lock();
  Waiter waiter(lock, [] {});
  EXPECT_TRUE(waiter.asleep());
  expect_child_passes([&] {
    // The wiring's fork handler moved the epoch already (a second move changes nothing).
    SpinLock::release_fork_holds_in_child();
    lock.lock();
    lock.unlock();
    return !lock.has_sleepers() && !lock.held() ? 0 : 1;
  });
  lock.fork_unlock();
  waiter.join();
}

// A loop that lets the lock go and takes it again at once (the housekeeping wash between
// batches) hands it to a sleeping waiter first: hand_off() returns only once the waiter
// had it, so the loop's next lock() waits for the waiter's unlock. A single sched_yield
// in its place returned before the woken waiter ran, and the loop took the lock back.
TEST(SpinLockTest, HandOffLetsASleepingWaiterHaveTheLockBeforeTheHolderTakesItBack) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  EXPECT_TRUE(lock.hand_off(0));      // nobody waits: at once
  for (int round = 0; round < 20; ++round) {
    lock.lock();
    std::atomic<bool> had{false};
    Waiter waiter(lock, [&] { had.store(true); });
    ASSERT_TRUE(waiter.asleep());
    lock.unlock();
    // Generous: the bound only covers a waiter that never runs.
    EXPECT_TRUE(lock.hand_off(100'000'000));
    lock.lock();
    EXPECT_TRUE(had.load()) << "round " << round;
    EXPECT_FALSE(lock.has_sleepers());
    lock.unlock();
    waiter.join();
  }
}

}  // namespace
}  // namespace achunk
