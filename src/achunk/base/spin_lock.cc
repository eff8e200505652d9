#include "achunk/base/spin_lock.h"

#include "achunk/base/tls.h"

namespace achunk::spin_lock_detail {

std::atomic<const void*> fork_owner{nullptr};
constinit std::atomic<int64_t> alive[2] = {};

namespace {
ACHUNK_TLS char thread_self;
}  // namespace

const void* this_thread() {
  return &thread_self;
}

}  // namespace achunk::spin_lock_detail
