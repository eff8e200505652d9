// Base layer: why the last allocation on this thread failed, kept per thread so the
// caller that got nullptr can read the reason (which limit, or which errno) afterwards.
// Depends on nothing else inside achunk.
#pragma once

#include <cstdint>

namespace achunk {

enum class AllocFailKind : int {
  NONE = 0,
  INVALID_SIZE,             // zero, negative or absurdly large request
  INVALID_ARGUMENT,         // a bad ctx id or alignment, or no room for another tenant
  CTX_LIMIT,                // the (tenant, ctx) limit would be exceeded
  TENANT_LIMIT,             // the tenant limit would be exceeded
  SERVER_LIMIT,             // memory_limit would be exceeded even after flushing the cache
  PHYSICAL_MEMORY_EXHAUST,  // mmap failed (errno says why) even after flushing the cache
};

struct AllocFailure {
  AllocFailKind kind = AllocFailKind::NONE;
  int sys_errno = 0;  // errno of the failed mmap, PHYSICAL_MEMORY_EXHAUST only
  int64_t size = 0;   // requested bytes
  int64_t hold = 0;   // bytes held when the request failed
  int64_t limit = 0;  // limit in force when the request failed
};

const char* to_string(AllocFailKind kind);

// The reason of the last failed allocation on the calling thread.
const AllocFailure& last_alloc_failure();
void set_alloc_failure(const AllocFailure& failure);
void clear_alloc_failure();

// Writes a one-line human-readable reason into buf (always NUL-terminated, never
// allocates). Returns the length it needed, like snprintf.
int64_t format_alloc_failure(const AllocFailure& failure, char* buf, int64_t len);

}  // namespace achunk
