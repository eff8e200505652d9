#include "achunk/base/alloc_failure.h"

#include <cstring>

#include "achunk/base/buf_writer.h"
#include "achunk/base/tls.h"

namespace achunk {

namespace {
ACHUNK_TLS AllocFailure tl_failure;
}  // namespace

const char* to_string(AllocFailKind kind) {
  switch (kind) {
    case AllocFailKind::NONE:
      return "NONE";
    case AllocFailKind::INVALID_SIZE:
      return "INVALID_SIZE";
    case AllocFailKind::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case AllocFailKind::CTX_LIMIT:
      return "CTX_HOLD_REACH_LIMIT";
    case AllocFailKind::TENANT_LIMIT:
      return "TENANT_HOLD_REACH_LIMIT";
    case AllocFailKind::SERVER_LIMIT:
      return "SERVER_HOLD_REACH_LIMIT";
    case AllocFailKind::PHYSICAL_MEMORY_EXHAUST:
      return "PHYSICAL_MEMORY_EXHAUST";
  }
  return "UNKNOWN";
}

const AllocFailure& last_alloc_failure() {
  return tl_failure;
}
void set_alloc_failure(const AllocFailure& failure) {
  tl_failure = failure;
}
void clear_alloc_failure() {
  tl_failure = AllocFailure{};
}

int64_t format_alloc_failure(const AllocFailure& f, char* buf, int64_t len) {
  BufWriter w(buf, len);
  w.str(to_string(f.kind)).str(": size=").num(f.size).str(" hold=").num(f.hold);
  w.str(" limit=").num(f.limit);
  switch (f.kind) {
    case AllocFailKind::SERVER_LIMIT:
      w.str(" (memory_limit reached after the chunk cache was flushed)");
      break;
    case AllocFailKind::PHYSICAL_MEMORY_EXHAUST:
      // strerror is not async-signal-safe but it does not allocate for known errnos.
      w.str(" errno=").num(f.sys_errno).str(" (").str(std::strerror(f.sys_errno)).str(")");
      break;
    case AllocFailKind::INVALID_SIZE:
      w.str(" (size out of range)");
      break;
    case AllocFailKind::INVALID_ARGUMENT:
      w.str(" (bad ctx id or alignment, or the tenant table is full)");
      break;
    case AllocFailKind::CTX_LIMIT:
      w.str(" (the ctx limit of the tenant)");
      break;
    case AllocFailKind::TENANT_LIMIT:
      w.str(" (the tenant limit)");
      break;
    case AllocFailKind::NONE:
      break;
  }
  return w.length();
}

}  // namespace achunk
