// Context layer: what contexts take from the process, handed down by the wiring on top
// (src/global/) once it has built the process-wide objects: the tenant directory every
// context draws its pages from, and the context_use_pm switch as it is now. Depends on
// the object layer.
#pragma once

#include <atomic>

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

}  // namespace achunk
