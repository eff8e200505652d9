// Platform layer: the monotonic clock the chunk layer reads time from, injected so
// tests advance a fake clock instead of sleeping. Depends on nothing inside achunk.
#pragma once

#include <cstdint>

namespace achunk {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since an arbitrary fixed point; never goes backwards.
  virtual int64_t now_us() const = 0;
  // Microseconds since the Unix epoch, for timestamps a person reads (may jump).
  virtual int64_t wall_us() const = 0;
};

// CLOCK_MONOTONIC_COARSE: a few nanoseconds per read through the vDSO, with a resolution
// of a scheduler tick (1-10 ms), which is ample for a TTL measured in seconds.
class MonotonicClock final : public Clock {
 public:
  int64_t now_us() const override;
  int64_t wall_us() const override;
};

}  // namespace achunk
