// Test support: a clock that moves only when the test advances it.
// Depends on the platform interface only.
#pragma once

#include <atomic>

#include "achunk/platform/clock.h"

namespace achunk::testing {

class FakeClock final : public Clock {
 public:
  int64_t now_us() const override { return now_.load(std::memory_order_relaxed); }
  // 2026-01-02 03:04:05 UTC plus the time advanced.
  int64_t wall_us() const override { return 1'767'323'045'000'000 + now_us() - 1'000'000'000; }
  void advance_us(int64_t us) { now_.fetch_add(us, std::memory_order_relaxed); }
  void advance_ms(int64_t ms) { advance_us(ms * 1000); }

 private:
  std::atomic<int64_t> now_{1'000'000'000};  // arbitrary, far from zero
};

}  // namespace achunk::testing
