#include "alloc/object/thread_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "achunk/platform/linux_os.h"
#include "alloc/object/label.h"
#include "alloc/object/malloc_allocator.h"
#include "alloc/object/object_set.h"
#include "support/chunk_mgr_fixture.h"
#include "support/fake_os.h"

namespace achunk::testing {
namespace {

// Whether every byte of the state's caches reads zero.
bool all_zero(const ThreadState* state) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(state);
  for (size_t i = 0; i < offsetof(ThreadState, dirty); ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

TEST(ThreadStateTest, AThreadThatNeverAllocatesOwnsNone) {
  bool owned = true;
  std::thread([&] {
    owned = thread_state_owned();
    // Lookups read the empty state: no heap, no front entry, no cached label.
    EXPECT_EQ(thread_state().heaps[0], nullptr);
    EXPECT_EQ(thread_state().entries[malloc_front::ENTRIES].allocator_id, 0u);
    // A label lookup works, and caches nothing (the empty state is read-only: a write
    // would fault).
    EXPECT_EQ(label_id_cached("t_state_none"), label_id("t_state_none"));
    EXPECT_FALSE(thread_state_owned());
  }).join();
  EXPECT_FALSE(owned);
}

class ThreadStateSetTest : public ChunkMgrTest {
 protected:
  DirectChunkSource source_{mgr_};
};

TEST_F(ThreadStateSetTest, TheFirstAllocationTakesAStateAndExitGivesItBack) {
  ObjectSet set(source_);
  const ThreadStatePoolStats before = thread_state_pool_stats();
  ThreadState* taken = nullptr;
  std::thread([&] {
    EXPECT_FALSE(thread_state_owned());
    void* p = set.alloc(64, label_id("t_state"));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(thread_state_owned());
    taken = &thread_state();
    EXPECT_EQ(thread_state_pool_stats().in_use, before.in_use + 1);
    EXPECT_EQ(set.existing_heap(), thread_state().heaps[set.index()]);
    ObjectSet::free(p);
  }).join();
  const ThreadStatePoolStats after = thread_state_pool_stats();
  EXPECT_EQ(after.in_use, before.in_use);
  // Back in the pool: the thread took the pool's newest state, or a fresh one if it had none.
  EXPECT_EQ(after.free, before.free == 0 ? 1 : before.free);
  // The next thread to allocate reuses it, cleared: nothing maps a new one.
  std::thread([&] {
    ThreadState* state = ObjectSet::own_thread_state();
    EXPECT_EQ(state, taken);
    EXPECT_EQ(state->heaps[set.index()], nullptr);
    EXPECT_EQ(thread_state_pool_stats().mapped, after.mapped);
  }).join();
}

TEST_F(ThreadStateSetTest, WithoutAStateSmallObjectsStillComeAsSpans) {
  ObjectSet set(source_);
  FakeOs failing;
  failing.fail_next_maps(1 << 20);
  set_thread_state_os(&failing);
  // Every state the pool has, so the next thread's must be mapped, and that fails.
  std::vector<ThreadState*> drained;
  while (ThreadState* state = acquire_thread_state()) drained.push_back(state);
  EXPECT_GE(failing.map_calls(), 1);
  std::thread([&] {
    void* p = set.alloc(64, label_id("t_no_state"));
    ASSERT_NE(p, nullptr);
    EXPECT_FALSE(thread_state_owned());
    EXPECT_EQ(set.existing_heap(), nullptr);
    EXPECT_EQ(ObjectSet::object_size(p, load_header(p)), 64);
    EXPECT_TRUE(tail_intact(p, 64));
    std::memset(p, 0x44, 64);
    ObjectSet::free(p);
  }).join();
  EXPECT_EQ(set.span_used(), 0);
  set_thread_state_os(nullptr);
  for (ThreadState* state : drained) release_thread_state(state);
}

TEST(ThreadStatePoolTest, AReusedStateStartsEmpty) {
  ThreadState* state = acquire_thread_state();
  ASSERT_NE(state, nullptr);
  EXPECT_TRUE(all_zero(state));
  std::memset(static_cast<void*>(state), 0x5A, offsetof(ThreadState, dirty));
  release_thread_state(state);
  ThreadState* again = acquire_thread_state();
  EXPECT_EQ(again, state);  // newest first
  EXPECT_TRUE(all_zero(again));
  release_thread_state(again);
}

// How many of `states` keep no page.
int count_washed(const std::vector<ThreadState*>& states) {
  LinuxOs os;
  int none = 0;
  for (ThreadState* state : states) none += os.resident_bytes(state, sizeof(ThreadState)) == 0;
  return none;
}

TEST(ThreadStatePoolTest, StatesGoBackByIdleTimeBeyondTheKeptOnes) {
  constexpr int COUNT = THREAD_STATES_KEPT + 8;
  std::vector<ThreadState*> states;
  for (int i = 0; i < COUNT; ++i) {
    ThreadState* state = acquire_thread_state();
    ASSERT_NE(state, nullptr);
    std::memset(static_cast<void*>(state), 0x5A, offsetof(ThreadState, dirty));
    states.push_back(state);
  }
  wash_idle_thread_states(true);  // what earlier tests left
  const ThreadStatePoolStats before = thread_state_pool_stats();
  for (ThreadState* state : states) release_thread_state(state);
  // A thread's exit washes nothing: the next threads find their states resident.
  ThreadStatePoolStats after = thread_state_pool_stats();
  EXPECT_EQ(after.free, before.free + COUNT);
  EXPECT_EQ(after.washed, before.washed);
  EXPECT_EQ(count_washed(states), 0);
  // The first look after the exits sees threads still coming and going.
  EXPECT_EQ(wash_idle_thread_states(false), 0);
  // A whole interval with none: all but the kept ones give their pages back.
  EXPECT_GE(wash_idle_thread_states(false), COUNT - THREAD_STATES_KEPT);
  after = thread_state_pool_stats();
  EXPECT_EQ(after.free - after.washed, THREAD_STATES_KEPT);
  // A washed state keeps no page: the pool keeps its address outside it.
  EXPECT_GE(count_washed(states), COUNT - THREAD_STATES_KEPT);
  // All come back cleared, washed or not.
  std::vector<ThreadState*> again;
  for (int i = 0; i < COUNT; ++i) {
    again.push_back(acquire_thread_state());
    ASSERT_NE(again.back(), nullptr);
    EXPECT_TRUE(all_zero(again.back())) << i;
  }
  EXPECT_EQ(thread_state_pool_stats().mapped, after.mapped);
  for (ThreadState* state : again) release_thread_state(state);
}

TEST(ThreadStatePoolTest, AStateTakenOrGivenBackSinceTheLastLookKeepsThemResident) {
  std::vector<ThreadState*> states;
  for (int i = 0; i < THREAD_STATES_KEPT + 4; ++i) states.push_back(acquire_thread_state());
  for (ThreadState* state : states) release_thread_state(state);
  wash_idle_thread_states(false);  // the releases above: busy
  release_thread_state(acquire_thread_state());
  EXPECT_EQ(wash_idle_thread_states(false), 0);
  // A trim does not wait for an idle interval.
  release_thread_state(acquire_thread_state());
  EXPECT_GE(wash_idle_thread_states(true), 4);
  const ThreadStatePoolStats after = thread_state_pool_stats();
  EXPECT_EQ(after.free - after.washed, THREAD_STATES_KEPT);
}

TEST(ThreadStatePoolTest, ABurstOfThreadsLeavesNoPagesInThePool) {
  // More washed states than the first array of their addresses holds, so it is moved.
  constexpr int COUNT = THREAD_STATES_KEPT + 600;
  std::vector<ThreadState*> states;
  for (int i = 0; i < COUNT; ++i) {
    states.push_back(acquire_thread_state());
    ASSERT_NE(states.back(), nullptr);
    states.back()->heaps[0] = reinterpret_cast<ThreadHeap*>(static_cast<uintptr_t>(i) + 1);
  }
  const ThreadStatePoolStats before = thread_state_pool_stats();
  for (ThreadState* state : states) release_thread_state(state);
  ThreadStatePoolStats after = thread_state_pool_stats();
  // At once beyond the most kept resident while threads come and go.
  EXPECT_GE(after.washed - before.washed, COUNT - THREAD_STATES_RESIDENT_MAX);
  LinuxOs os;
  auto resident = [&] {
    int64_t bytes = 0;
    for (ThreadState* state : states) bytes += os.resident_bytes(state, sizeof(ThreadState));
    return bytes;
  };
  EXPECT_LE(resident(), int64_t{THREAD_STATES_RESIDENT_MAX} * int64_t{sizeof(ThreadState)});
  // Once idle, the kept states' pages only (up to three each); the washed ones have none.
  wash_idle_thread_states(true);
  after = thread_state_pool_stats();
  EXPECT_GE(after.washed - before.washed, COUNT - THREAD_STATES_KEPT);
  EXPECT_LE(resident(), int64_t{THREAD_STATES_KEPT} * int64_t{sizeof(ThreadState)});
  // Every state comes back exactly once, cleared, none mapped anew.
  std::vector<ThreadState*> again;
  for (int i = 0; i < COUNT; ++i) {
    again.push_back(acquire_thread_state());
    ASSERT_NE(again.back(), nullptr);
    EXPECT_EQ(again.back()->heaps[0], nullptr) << i;
  }
  EXPECT_EQ(thread_state_pool_stats().mapped, after.mapped);
  std::vector<ThreadState*> sorted_before = states, sorted_again = again;
  std::sort(sorted_before.begin(), sorted_before.end());
  std::sort(sorted_again.begin(), sorted_again.end());
  EXPECT_EQ(std::adjacent_find(sorted_again.begin(), sorted_again.end()), sorted_again.end());
  for (ThreadState* state : again) release_thread_state(state);
}

TEST(ThreadStatePoolTest, AFailedMappingIsNotRetriedAtEveryAcquire) {
  FakeOs failing;
  failing.fail_next_maps(1 << 20);
  set_thread_state_os(&failing);
  std::vector<ThreadState*> drained;
  while (ThreadState* state = acquire_thread_state()) drained.push_back(state);
  ASSERT_EQ(failing.map_calls(), 1);
  // 10,000 more tries (a state-less thread's mallocs) map a few times, not 10,000.
  for (int i = 0; i < 10'000; ++i) EXPECT_EQ(acquire_thread_state(), nullptr);
  // Skips of 16, 32, ... 1,024, then 1,024 each time: 15 mappings tried in all.
  EXPECT_LE(failing.map_calls(), 16);
  EXPECT_GE(failing.map_calls(), 10);
  // Once mapping works again, a state comes within the longest back-off.
  failing.fail_next_maps(0);
  ThreadState* state = nullptr;
  int tries = 0;
  while ((state = acquire_thread_state()) == nullptr && tries < 2'000) ++tries;
  EXPECT_NE(state, nullptr);
  EXPECT_LE(tries, 1024);
  set_thread_state_os(nullptr);
  if (state != nullptr) drained.push_back(state);
  for (ThreadState* s : drained) release_thread_state(s);
}

// The stats region reads the pool's figures from chunk calls made under allocator locks,
// which fork() takes after the pool lock: the read must not wait for it. (It did, and a
// fork hung: prepare held the pool lock and waited for a shard lock whose holder, in a
// chunk call, waited for the pool lock.)
TEST(ThreadStatePoolTest, FiguresAreReadWhileAnotherThreadHoldsThePoolLock) {
  struct Find final : ForkLockVisitor {
    SpinLock* pool = nullptr;
    void visit(SpinLock& lock, const char*) override { pool = &lock; }
  } find;
  thread_state_visit_fork_locks(find);
  ASSERT_NE(find.pool, nullptr);
  ThreadState* state = acquire_thread_state();
  ASSERT_NE(state, nullptr);
  const ThreadStatePoolStats expected = thread_state_pool_stats();
  find.pool->lock();
  std::atomic<bool> done{false};
  ThreadStatePoolStats seen;
  std::thread reader([&] {
    seen = thread_state_pool_stats();
    done.store(true);
  });
  // A bound, not a timing: a read that waits for the lock never finishes while it is held.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  const bool read_while_held = done.load();
  find.pool->unlock();
  reader.join();
  EXPECT_TRUE(read_while_held) << "thread_state_pool_stats() waited for the pool lock";
  EXPECT_EQ(seen.mapped, expected.mapped);
  EXPECT_EQ(seen.in_use, expected.in_use);
  EXPECT_EQ(seen.free, expected.free);
  EXPECT_EQ(seen.washed, expected.washed);
  release_thread_state(state);
  EXPECT_EQ(thread_state_pool_stats().in_use, expected.in_use - 1);
}

TEST(ThreadStateSizeTest, TheStateIsWholePages) {
  EXPECT_EQ(sizeof(ThreadState) % 4096, 0u);
  EXPECT_LE(sizeof(ThreadState), 3 * 4096u);
}

}  // namespace
}  // namespace achunk::testing
