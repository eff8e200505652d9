// Base layer: how a layer names the locks fork() must find free (the fork gate, see
// spin_lock.h). Each layer that owns such locks has one function passing every one of them to a
// ForkLockVisitor, outer locks first (the order the layer nests them in); the wiring (src/global)
// calls all of those functions, in layer order, into the one fork-lock registry. A lock that is not
// visited is a lock a child may inherit held; a lock fork() must not wait for says so at
// construction (ForkRole::NOT_HELD), and tests/global/fork_lock_registry_test.cc proves the
// registry visits every other live lock. Depends on spin_lock.h.
#pragma once

#include "achunk/base/spin_lock.h"

namespace achunk {

class ForkLockVisitor {
 public:
  virtual void visit(SpinLock& lock, const char* name) = 0;

 protected:
  ~ForkLockVisitor() = default;
};

}  // namespace achunk
