// The rule for a forked child's housekeeping thread and stats region: not before one
// release interval (1 s without a thread) unless it holds memory worth returning.
#include "global/child_housekeeping.h"

#include <gtest/gtest.h>

#include "support/fake_clock.h"

namespace achunk {
namespace {

using child_housekeeping::due;
using child_housekeeping::EARLY_HOLD;
using testing::FakeClock;

TEST(ChildHousekeepingTest, NotBeforeOneReleaseInterval) {
  FakeClock clock;
  const int64_t born = clock.now_us();
  const int64_t small = 4 << 20;
  EXPECT_FALSE(due(born, clock.now_us(), 1000, small));
  clock.advance_ms(999);
  EXPECT_FALSE(due(born, clock.now_us(), 1000, small));
  clock.advance_ms(1);
  EXPECT_TRUE(due(born, clock.now_us(), 1000, small));
}

TEST(ChildHousekeepingTest, TheIntervalIsTheOptionsOrOneSecondWithoutAThread) {
  FakeClock clock;
  const int64_t born = clock.now_us();
  clock.advance_ms(250);
  EXPECT_TRUE(due(born, clock.now_us(), 250, 0));
  EXPECT_FALSE(due(born, clock.now_us(), 251, 0));
  EXPECT_FALSE(due(born, clock.now_us(), 0, 0));
  clock.advance_ms(750);
  EXPECT_TRUE(due(born, clock.now_us(), 0, 0));
}

TEST(ChildHousekeepingTest, AtOnceWhenItHoldsMemoryWorthReturning) {
  FakeClock clock;
  const int64_t born = clock.now_us();
  EXPECT_FALSE(due(born, clock.now_us(), 1000, EARLY_HOLD - 1));
  EXPECT_TRUE(due(born, clock.now_us(), 1000, EARLY_HOLD));
  EXPECT_TRUE(due(born, clock.now_us(), 1000, int64_t{1} << 30));
}

}  // namespace
}  // namespace achunk
