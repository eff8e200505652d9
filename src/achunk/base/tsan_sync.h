// Base layer: tells ThreadSanitizer about an ordering it cannot see. A handshake made of
// plain stores and a process-wide barrier (Os::process_barrier) orders two threads as a
// lock would; ACHUNK_TSAN_ACQUIRE/RELEASE on one address mark its two ends for TSan, and
// compile to nothing in every other build. Depends on nothing inside achunk.
#pragma once

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define ACHUNK_TSAN_ACQUIRE(addr) __tsan_acquire(static_cast<void*>(addr))
#define ACHUNK_TSAN_RELEASE(addr) __tsan_release(static_cast<void*>(addr))
#else
#define ACHUNK_TSAN_ACQUIRE(addr) static_cast<void>(0)
#define ACHUNK_TSAN_RELEASE(addr) static_cast<void>(0)
#endif
