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

// Until `done` holds, or 20 s.
template <typename F>
bool eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// While the fork gate is closed, a thread that holds no lock lets a fork lock go again
// and sleeps until the gate opens; one that holds a lock goes on and is counted, so the
// pass cannot seal the gate; once it is sealed, nobody but the forking thread goes on.
TEST(SpinLockTest, TheClosedGateTurnsBackAThreadHoldingNoLockAndLetsInOneHoldingOne) {
  SpinLock a;  // fork locks: the gate applies to them
  SpinLock b;
  SpinLock own(ForkRole::NOT_HELD);
  SpinLock::close_fork_gate(nullptr);  // no forking thread: this one takes no fork lock
  std::atomic<bool> had_a{false};
  std::thread turned_back([&] {
    a.lock();
    had_a.store(true);
    a.unlock();
  });
  ASSERT_TRUE(eventually([] { return SpinLock::gate_sleepers() == 1; }));
  EXPECT_FALSE(had_a.load());
  EXPECT_FALSE(a.held());  // let go again
  EXPECT_FALSE(a.try_lock());

  const uint64_t before = SpinLock::fork_gate_before_pass();
  bool had_b = false;
  std::thread([&] {
    own.lock();
    b.lock();  // holds `own`: goes on
    had_b = true;
    b.unlock();
    own.unlock();
  }).join();
  EXPECT_TRUE(had_b);
  EXPECT_FALSE(SpinLock::seal_fork_gate(before));  // someone was let in: pass again
  EXPECT_TRUE(SpinLock::seal_fork_gate(SpinLock::fork_gate_before_pass()));
  bool tried = true;
  std::thread([&] {
    own.lock();
    tried = b.try_lock();  // sealed: not even a thread that holds a lock
    own.unlock();
  }).join();
  EXPECT_FALSE(tried);
  EXPECT_FALSE(had_a.load());

  SpinLock::open_fork_gate(false);
  turned_back.join();
  EXPECT_TRUE(had_a.load());
  EXPECT_EQ(SpinLock::gate_sleepers(), 0u);
}

// The forking thread passes its own closed gate, and the pass waits for a held lock
// until its holder lets it go.
TEST(SpinLockTest, TheForkPassWaitsForAHolderAndTheForkingThreadPasses) {
  SpinLock a;
  a.lock();
  std::atomic<bool> passed{false};
  std::thread pass([&] {
    a.wait_free_for_fork();
    passed.store(true);
  });
  const int64_t sleeps = SpinLock::sleeps();
  for (int i = 0; i < 1000 && !passed.load(); ++i) std::this_thread::yield();
  EXPECT_FALSE(passed.load());
  EXPECT_EQ(SpinLock::sleeps(), sleeps);  // the pass is no counted sleeper
  a.unlock();
  pass.join();
  EXPECT_TRUE(passed.load());

  SpinLock::close_fork_gate(spin_lock_detail::this_thread());
  ASSERT_TRUE(SpinLock::seal_fork_gate(SpinLock::fork_gate_before_pass()));
  EXPECT_TRUE(a.try_lock());  // an atfork handler that runs after achunk's may allocate
  a.unlock();
  a.lock();
  a.unlock();
  SpinLock::open_fork_gate(false);
}

// A child frees a lock a thread of the parent's had (a NOT_HELD lock's holder, or a
// thread the gate turned back just after its exchange) and forgets its sleepers.
TEST(SpinLockTest, AChildFreesALockAParentsThreadHadAndForgetsItsSleepers) {
  SpinLock lock(ForkRole::NOT_HELD);  // a test's own lock
  lock.lock();
  Waiter waiter(lock, [] {});
  EXPECT_TRUE(waiter.asleep());
  expect_child_passes([&] {
    // The waiter stays counted between its 1 ms naps, until it has the lock.
    if (!lock.held() || !lock.has_sleepers()) return 2;
    lock.reset_in_child();
    int failures = lock.held() || lock.has_sleepers();
    lock.lock();
    lock.unlock();
    failures += lock.held();
    return failures;
  });
  lock.unlock();
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
