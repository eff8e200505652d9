// Context layer: scope guards over a per-thread stack of current contexts.
//   WITH_CONTEXT(ctx) { ... }                 ctx is CURRENT_CONTEXT inside the block
//   CREATE_WITH_TEMP_CONTEXT(param) { ... }   a new context, current inside the block,
//                                             destroyed when the block is left
// Depends on memory_context.h.
#pragma once

#include <source_location>

#include "context/memory_context.h"

namespace achunk {

class ContextGuard {
 public:
  explicit ContextGuard(MemoryContext ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;
  // False when the handle is stale or the stack (64 deep) is full; nothing was pushed.
  bool ok() const { return pushed_; }

 private:
  bool pushed_ = false;
};

class TempContextGuard {
 public:
  explicit TempContextGuard(const ContextParam& param,
                            std::source_location site = std::source_location::current());
  ~TempContextGuard();
  TempContextGuard(const TempContextGuard&) = delete;
  TempContextGuard& operator=(const TempContextGuard&) = delete;
  bool ok() const { return guard_ != nullptr && guard_->ok(); }
  const absl::Status& status() const { return status_; }
  MemoryContext context() const { return ctx_; }

 private:
  absl::Status status_;
  MemoryContext ctx_;
  ContextGuard* guard_ = nullptr;
  alignas(ContextGuard) unsigned char guard_storage_[sizeof(ContextGuard)];
};

}  // namespace achunk

#define CURRENT_CONTEXT (::achunk::MemoryContext::current())
#define WITH_CONTEXT(ctx) \
  if (::achunk::ContextGuard achunk_with_context_guard_{(ctx)}; achunk_with_context_guard_.ok())
#define CREATE_WITH_TEMP_CONTEXT(param)                               \
  if (::achunk::TempContextGuard achunk_temp_context_guard_{(param)}; \
      achunk_temp_context_guard_.ok())
