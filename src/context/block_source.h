// Context layer: where a context's allocators take their pages from. Either the shared
// blocks of its (tenant, ctx) allocator (locked) or the thread's page manager (no lock).
// Depends on the object layer (ObjectSet::alloc_span).
#pragma once

#include <cstdint>

#include "alloc/object/object_set.h"

namespace achunk {

class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // A span of at least `bytes`, or nullptr with last_alloc_failure() set.
  virtual ABlock* alloc_block(int64_t bytes) = 0;
  virtual void free_block(ABlock* block) = 0;
};

class SharedBlockSource final : public BlockSource {
 public:
  explicit SharedBlockSource(ObjectSet& set) : set_(set) {}
  ABlock* alloc_block(int64_t bytes) override { return set_.alloc_span(bytes); }
  void free_block(ABlock* block) override { set_.free_span(block); }

 private:
  ObjectSet& set_;
};

}  // namespace achunk
