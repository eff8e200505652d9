// Context layer: what contexts take from the process, handed down by the wiring on top
// (src/global/) once it has built the process-wide objects: the tenant directory every
// context draws its pages from, and the context_use_pm switch as it is now. Depends on
// the object layer. The wiring includes only this header of the layer: it stays free of
// absl, whose <iostream> would start iostreams in every process that preloads achunk.
#pragma once

#include <atomic>

#include "achunk/base/fork_locks.h"

namespace achunk {

class ObMallocAllocator;

struct ContextEnv {
  ObMallocAllocator* directory = nullptr;
  const std::atomic<bool>* use_pm = nullptr;
};

// Builds the process-wide objects on its first call (they stay lazy) and returns them.
using ContextEnvSource = ContextEnv (*)();
// Installs the source, at load time. Until then every context creation, the root's
// included, fails with FailedPrecondition.
void install_context_env(ContextEnvSource source);
// fork(): the lock of the context slot free list (contexts' own locks are their owners').
void memory_context_visit_fork_locks(ForkLockVisitor& v);

}  // namespace achunk
