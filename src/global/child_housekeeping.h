// Global layer: when a forked child of a process with a housekeeping thread starts its
// own thread and makes its stats region. Only once it has lived one release interval
// (1 s when the interval is 0) or holds memory worth returning (EARLY_HOLD in its chunk
// layer, inherited chunks included): a small child that exits or execs sooner, as a
// fork-per-request server's do, pays for neither, and the child of a large parent, whose
// fork costs far more than a thread, gives back what it drops. Pure, so the rule is
// tested on any clock; global.cc checks it on slow paths, never by a timer.
// Depends on nothing.
#pragma once

#include <cstdint>

namespace achunk::child_housekeeping {

inline constexpr int64_t EARLY_HOLD = int64_t{16} << 20;

// How long a child waits before it is old enough.
inline int64_t quiet_us(int64_t release_interval_ms) {
  return (release_interval_ms > 0 ? release_interval_ms : 1000) * 1000;
}

// Whether a child born at `born_us`, whose chunk layer holds `hold` bytes at `now_us`,
// starts its housekeeping now.
inline bool due(int64_t born_us, int64_t now_us, int64_t release_interval_ms, int64_t hold) {
  return now_us - born_us >= quiet_us(release_interval_ms) || hold >= EARLY_HOLD;
}

}  // namespace achunk::child_housekeeping
